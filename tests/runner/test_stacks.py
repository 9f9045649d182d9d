"""Reading faulthandler dumps into stuck_at (pure functions, no sandbox)."""

from runner.stacks import parse_threads, returned_from_spawn_target, stuck_at
from runner.verdict import StuckAt

SNIPPET = "/tmp/main.py"
SOURCE = "import torch\nimport time\n\n\n\ntime.sleep(5)\ndist.all_reduce(t)\n"

DUMP = """Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait

Current thread 0x00007f0000000002 (most recent call first):
  File "/venv/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "/venv/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/tmp/main.py", line 7 in <module>
"""


def test_parse_threads_splits_and_orders_frames() -> None:
    threads = parse_threads(DUMP)
    assert len(threads) == 2
    assert threads[1][0].function == "all_reduce"
    assert threads[1][-1].file == SNIPPET


def test_stuck_in_library_call_skips_forwarding_wrappers() -> None:
    assert stuck_at(DUMP, SNIPPET, SOURCE) == StuckAt(function="<module>", line=7, call="all_reduce")


def test_stuck_in_c_call_names_the_call_on_the_line() -> None:
    dump = 'Current thread 0x1 (most recent call first):\n  File "/tmp/main.py", line 6 in <module>\n'
    assert stuck_at(dump, SNIPPET, SOURCE) == StuckAt(function="<module>", line=6, call="sleep")


def test_innermost_user_function_is_reported() -> None:
    source = "def train():\n    while True:\n        pass\n\ntrain()\n"
    dump = (
        "Current thread 0x1 (most recent call first):\n"
        '  File "/tmp/main.py", line 3 in train\n'
        '  File "/tmp/main.py", line 5 in <module>\n'
    )
    found = stuck_at(dump, SNIPPET, source)
    assert found is not None
    assert (found.function, found.line) == ("train", 3)


def test_dump_without_user_frames_gives_none() -> None:
    empty = "Current thread 0x1 (most recent call first):\n  <no Python frame>\n"
    assert stuck_at(empty, SNIPPET, "") is None
    assert stuck_at("garbage \x00 not a dump", SNIPPET, "") is None


def _child_dump(*frames: tuple[str, int, str]) -> str:
    lines = [f'  File "{file}", line {line} in {func}' for file, line, func in frames]
    return "Current thread 0x1 (most recent call first):\n" + "\n".join(lines) + "\n"


SPAWN_PY = "/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py"
PROCESS_PY = "/usr/lib/python3.11/multiprocessing/process.py"


def test_a_worker_back_in_the_spawn_wrapper_has_returned_from_its_function() -> None:
    returned = _child_dump((SPAWN_PY, 87, "_wrap"), (PROCESS_PY, 108, "run"), (PROCESS_PY, 314, "_bootstrap"))
    assert returned_from_spawn_target(returned)
    # Still inside the function: the snippet's frame is innermost.
    inside = _child_dump(("/tmp/main.py", 12, "work"), (SPAWN_PY, 87, "_wrap"), (PROCESS_PY, 108, "run"))
    assert not returned_from_spawn_target(inside)
    # A `_wrap` of the snippet's own, or one not called by multiprocessing's Process.run, is not torch's.
    assert not returned_from_spawn_target(_child_dump(("/tmp/main.py", 3, "_wrap"), (PROCESS_PY, 108, "run")))
    assert not returned_from_spawn_target(
        _child_dump((SPAWN_PY, 87, "_wrap"), ("/tmp/main.py", 9, "<module>"))
    )
    assert not returned_from_spawn_target(_child_dump((SPAWN_PY, 87, "_wrap")))
