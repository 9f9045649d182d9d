"""The runner fleet (issue 17): several runners in RANKZERO_RUNNER_URL, routed by what each one has.

At the real boundary: real ``rankzero-runner serve`` processes on loopback ports, each with its own
token. This machine has no GPU, so one runner is started with ``--test-advertise-gpus 2`` (testing only:
its ``/v1/health`` claims 2 GPUs and NCCL, its verdicts say they ran on its real hardware). Which runner
took a job is read from the runners themselves: that note, and each runner's ``pool.served_*`` counters.
The failover rules (which answers mean "nothing ran") are also tested against scripted HTTP answers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import SecretStr

from bot.config import Settings
from bot.core.dispute_service import DisputeService, question_from_spec
from bot.core.disputes import gpu_shortfall
from bot.core.errors import ConfigurationError, RunnerUnavailableError
from bot.core.verdicts import RunSpec
from bot.runner_client import HttpRunnerClient, RunnerRefusedError
from bot.runner_fleet import FleetRunnerClient, RunnerEndpoint, parse_runner_endpoints, runner_from_settings
from runner.hardware import cpu_cores
from tests.fakes import FrozenClock
from tests.runner_server import RunnerServer, runner_server

START = dt.datetime(2026, 11, 25, 9, 0, tzinfo=dt.UTC)
ROOT = Path(__file__).resolve().parents[2]

DDP_CODE = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}: {t.item()}")
    """
)
# A two-GPU question as the bank writes them (tests/bot/core/test_disputes_e2e.py has the same one).
GPU_SPEC: dict[str, Any] = {
    "id": "fixture-needs-two-gpus",
    "kind": "predict_output",
    "prompt": "Two ranks with NCCL on two GPUs. What is printed?",
    "code": "import torch\nimport torch.distributed as dist\nt = torch.ones(1, device='cuda')\n"
    "dist.all_reduce(t)\nprint(t)\n",
    "runner": {"mode": "ddp", "nproc": 2, "gpus": 2, "init_process_group": True},
    "choices": [
        {"text": "tensor([2.], device='cuda:0')\ntensor([2.], device='cuda:1')", "correct": True},
        {"text": "tensor([1.], device='cuda:0')\ntensor([1.], device='cuda:1')"},
    ],
}
TEST_RUNNER_NOTE = "test runner: it advertises 2 GPUs"


# --------------------------------------------------------------------------- real runners
@pytest.fixture(scope="module")
def gpu_runner() -> Iterator[RunnerServer]:
    """A runner that advertises 2 GPUs (testing only), with a warm sandbox for 2-rank jobs."""
    with runner_server(pool="2:1", args=["--test-advertise-gpus", "2", "--max-concurrent", "2"]) as server:
        yield server


@pytest.fixture(scope="module")
def cpu_runner() -> Iterator[RunnerServer]:
    """A CPU runner that runs one job at a time (so that it can be made busy).

    It advertises 0 GPUs, so that it is the CPU shape on a host with GPUs too.
    """
    with runner_server(pool="1:0", args=["--max-concurrent", "1", "--test-advertise-gpus", "0"]) as server:
        yield server


def _health(server: RunnerServer) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/health", headers={"Authorization": f"Bearer {server.token}"})
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def _served(server: RunnerServer) -> int:
    pool = _health(server)["pool"]
    return int(pool["served_warm"] + pool["served_cold"] + pool["served_light"])


def _fleet(*servers: RunnerServer, **kwargs: Any) -> FleetRunnerClient:
    return FleetRunnerClient([RunnerEndpoint(s.url, s.token) for s in servers], **kwargs)


async def test_each_runner_reports_its_shape(gpu_runner: RunnerServer, cpu_runner: RunnerServer) -> None:
    gpu, cpu = _health(gpu_runner), _health(cpu_runner)
    assert (gpu["hardware"]["gpus"], gpu["test_advertised"]) == (2, True)
    assert "nccl" in gpu["backends"] and gpu["capacity"]["max_concurrent_jobs"] == 2
    assert (cpu["hardware"]["gpus"], cpu["test_advertised"]) == (0, True)
    assert cpu["backends"] == ["gloo"] and cpu["capacity"]["max_concurrent_jobs"] == 1
    assert cpu["capacity"]["free_slots"] == 1 and cpu["capacity"]["cpu_cores"] >= 1
    async with _fleet(cpu_runner, gpu_runner) as fleet:
        health = await fleet.health()
    # The fleet as one runner: its largest runner's hardware, so gpu_shortfall asks the whole fleet.
    assert health.fleet_size == 2 and health.hardware.gpus == 2
    assert set(health.backends) == {"gloo", "nccl"}
    assert [r["gpus"] for r in health.extra["runners"]] == [0, 2]


async def test_a_two_gpu_job_goes_to_the_runner_with_gpus_a_cpu_job_to_the_smallest(
    gpu_runner: RunnerServer, cpu_runner: RunnerServer
) -> None:
    async with _fleet(cpu_runner, gpu_runner) as fleet:  # the CPU runner first: order is not the rule
        before = _served(gpu_runner), _served(cpu_runner)
        verdict = await fleet.run(RunSpec(DDP_CODE, mode="ddp", nproc=2, gpus=2, init_process_group=True))
        assert (verdict.status, verdict.stdout) == ("ok", "rank 0: 2.0\nrank 1: 2.0\n"), verdict.notes
        assert verdict.notes[0].startswith(TEST_RUNNER_NOTE)
        assert (_served(gpu_runner), _served(cpu_runner)) == (before[0] + 1, before[1])

    async with _fleet(gpu_runner, cpu_runner) as fleet:  # now the GPU runner first
        verdict = await fleet.run(RunSpec("print('cpu job')"))
        assert verdict.status == "ok" and verdict.stdout == "cpu job\n"
        # A CPU question stays off the GPU runner while the CPU runner has a free slot.
        assert verdict.notes[0].startswith("test runner: it advertises 0 GPUs")
        assert (_served(gpu_runner), _served(cpu_runner)) == (before[0] + 1, before[1] + 1)


async def test_a_busy_runner_is_passed_over_for_one_with_a_free_slot(
    gpu_runner: RunnerServer, cpu_runner: RunnerServer
) -> None:
    async with HttpRunnerClient(cpu_runner.url, cpu_runner.token) as direct:
        sleeper = asyncio.create_task(direct.run(RunSpec("import time\ntime.sleep(4)\nprint('slept')")))
        for _ in range(100):  # until the CPU runner says its only slot is taken
            if _health(cpu_runner)["capacity"]["free_slots"] == 0:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the CPU runner never reported its slot taken")
        async with _fleet(cpu_runner, gpu_runner) as fleet:
            verdict = await fleet.run(RunSpec("print('while busy')"))
        assert verdict.stdout == "while busy\n" and verdict.notes[0].startswith(TEST_RUNNER_NOTE)
        assert (await sleeper).stdout == "slept\n"
    assert _health(cpu_runner)["capacity"]["free_slots"] == 1


async def test_cannot_reproduce_only_when_no_runner_of_the_fleet_can(
    gpu_runner: RunnerServer, cpu_runner: RunnerServer
) -> None:
    question = question_from_spec(GPU_SPEC, version=1)
    four = question_from_spec({**GPU_SPEC, "runner": {**GPU_SPEC["runner"], "gpus": 4}}, version=1)
    async with _fleet(cpu_runner, gpu_runner) as fleet:
        disputes = DisputeService(lambda: None, FrozenClock(START), fleet)  # type: ignore[arg-type,return-value]
        card = await disputes.check_question(question)
        # It reached the 2-GPU runner (which, without a real GPU, answers that CUDA is needed).
        assert card.cannot_reproduce is None and card.verdict is not None
        assert card.verdict.notes[0].startswith(TEST_RUNNER_NOTE)
        if card.verdict.hardware.gpus == 0:
            assert card.verdict.status == "unsupported"
        card = await disputes.check_question(four)
        assert card.verdict is None
        assert card.cannot_reproduce is not None and card.cannot_reproduce.startswith(
            "cannot reproduce here: needs 4 GPUs, none of the 2 runners has more than 2"
        )
    async with HttpRunnerClient(cpu_runner.url, cpu_runner.token) as single:
        disputes = DisputeService(lambda: None, FrozenClock(START), single)  # type: ignore[arg-type,return-value]
        card = await disputes.check_question(question)
        assert card.verdict is None and card.cannot_reproduce is not None
        assert card.cannot_reproduce.startswith(
            "cannot reproduce here: needs 2 GPUs, this runner has 0 (CPU only"
        )


async def test_a_killed_runner_is_passed_over(gpu_runner: RunnerServer) -> None:
    with runner_server(pool="1:0", args=["--max-concurrent", "2", "--test-advertise-gpus", "0"]) as doomed:
        async with _fleet(doomed, gpu_runner, health_ttl_s=600.0, down_retry_s=600.0) as fleet:
            await fleet.health()  # both up: the CPU job would go to `doomed` (the smaller runner)
            os.kill(doomed.pid, signal.SIGTERM)  # only the process this test started
            for _ in range(150):
                try:
                    httpx.get(f"{doomed.url}/v1/health", timeout=1)
                except httpx.ConnectError:
                    break  # refused: the listening socket is gone
                except httpx.TransportError:
                    pass  # reset or cut off while it shuts down: ask again
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the runner did not stop")
            verdict = await fleet.run(RunSpec("print('failed over')"))
            assert verdict.stdout == "failed over\n" and verdict.notes[0].startswith(TEST_RUNNER_NOTE)
            [down, up] = fleet.runners()
            assert (down["up"], up["up"]) == (False, True) and "unreachable" in down["error"]
            # A 2-GPU job needs the runner that is up; a job only the dead runner could take is
            # "unavailable", never "cannot reproduce".
            health = await fleet.health()
            assert health.hardware.gpus == 2 and health.fleet_size == 2
    async with _fleet(gpu_runner) as fleet:
        with pytest.raises(RunnerUnavailableError, match=r"no runner that is up can run this ddp job"):
            await fleet.run(RunSpec("print(1)", mode="ddp", nproc=2, gpus=4))


# --------------------------------------------------------------------------- scripted answers
def _health_json(gpus: int = 0, free: int = 2) -> dict[str, Any]:
    return {
        "status": "ok",
        "hardware": {
            "gpus": gpus,
            "names": ["H100"] * gpus,
            "torch": "2.13.0",
            "cuda": "12.8" if gpus else None,
        },
        "test_advertised": False,
        "capacity": {"cpu_cores": 8, "max_concurrent_jobs": 2, "free_slots": free, "queued_jobs": 0},
        "backends": ["gloo", "nccl"] if gpus else ["gloo"],
        "modes": ["python", "dp", "ddp"],
        "sandbox": {"engine": "bubblewrap", "isolated": True, "cgroup": 2},
        "pool": {},
        "limits": {"max_nproc": 8, "max_timeout_s": 300.0},
        "running_jobs": 0,
    }


def _verdict_json(status: str = "ok", stdout: str = "hi\n") -> dict[str, Any]:
    return {
        "status": status,
        "mode": "python",
        "nproc": 1,
        "backend": None,
        "elapsed_s": 0.1,
        "hardware": {"gpus": 0, "names": [], "torch": "2.13.0", "cuda": None},
        "sandbox": {"engine": "bubblewrap", "isolated": True},
        "root_cause_rank": 0 if status == "error" else None,
        "notes": [],
        "ranks": [
            {
                "rank": 0,
                "exit_code": 0 if status == "ok" else 1,
                "signal": None,
                "stdout": stdout,
                "stderr": "",
                "truncated": False,
                "exception": None,
                "stuck_at": None,
            }
        ],
    }


class Scripted:
    """One scripted runner: its health and how it answers runs; counts what it was asked."""

    def __init__(self, url: str, run: Any, gpus: int = 0, free: int = 2) -> None:
        self.url, self.answer, self.gpus, self.free = url, run, gpus, free
        self.health_calls = 0
        self.run_calls = 0
        self.transport = httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/health":
            self.health_calls += 1
            return httpx.Response(200, json=_health_json(self.gpus, self.free))
        self.run_calls += 1
        answer = self.answer(request) if callable(self.answer) else self.answer
        if isinstance(answer, BaseException):
            raise answer
        if asyncio.iscoroutine(answer):
            answer = await answer
        assert isinstance(answer, httpx.Response)
        return answer


def _scripted_fleet(*runners: Scripted, **kwargs: Any) -> FleetRunnerClient:
    return FleetRunnerClient(
        [RunnerEndpoint(r.url, "t") for r in runners],
        transports={r.url: r.transport for r in runners},
        **kwargs,
    )


def _disconnect(request: httpx.Request) -> BaseException:
    return httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)


def _reset(request: httpx.Request) -> BaseException:
    return httpx.ReadError("[Errno 104] Connection reset by peer", request=request)


@pytest.mark.parametrize(
    "failure",
    [
        httpx.Response(503, json={"detail": "the runner cannot start a sandbox now"}),
        httpx.Response(500, text="Internal Server Error"),
        httpx.Response(429, text="slow down"),
        httpx.Response(401, json={"detail": "missing or wrong bearer token"}),
        _disconnect,
        _reset,
    ],
    ids=["503", "500", "429", "401", "disconnect", "reset"],
)
async def test_nothing_ran_so_the_next_runner_takes_the_job(failure: Any) -> None:
    first = Scripted("http://first:8765", failure)
    second = Scripted("http://second:8765", httpx.Response(200, json=_verdict_json(stdout="second\n")))
    async with _scripted_fleet(first, second) as fleet:
        verdict = await fleet.run(RunSpec("print(1)"))
        assert verdict.stdout == "second\n"
        assert first.run_calls >= 1 and second.run_calls == 1
        # The failed runner is left alone for a while, then asked for its health again.
        assert [r["up"] for r in fleet.runners()] == [False, True]
        await fleet.run(RunSpec("print(2)"))
        assert second.run_calls == 2 and first.health_calls == 1


async def test_a_verdict_is_final_even_a_failing_one() -> None:
    first = Scripted("http://first:8765", httpx.Response(200, json=_verdict_json("error", "")))
    second = Scripted("http://second:8765", httpx.Response(200, json=_verdict_json()))
    async with _scripted_fleet(first, second) as fleet:
        verdict = await fleet.run(RunSpec("raise SystemExit(1)"))
    assert verdict.status == "error" and (first.run_calls, second.run_calls) == (1, 0)


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx.Response(422, json={"detail": []}), RunnerRefusedError),
        (httpx.Response(413, json={"detail": "code is over 65536 bytes"}), RunnerRefusedError),
        # The job may be running there: a second run elsewhere would double it.
        (lambda request: httpx.ReadTimeout("timed out", request=request), RunnerUnavailableError),
    ],
    ids=["422", "413", "timeout"],
)
async def test_a_bad_request_or_a_timeout_is_not_run_twice(failure: Any, error: type[Exception]) -> None:
    first = Scripted("http://first:8765", failure)
    second = Scripted("http://second:8765", httpx.Response(200, json=_verdict_json()))
    async with _scripted_fleet(first, second) as fleet:
        with pytest.raises(error):
            await fleet.run(RunSpec("print(1)"))
    assert (first.run_calls, second.run_calls) == (1, 0)


async def test_every_runner_failing_names_each_one() -> None:
    runners = [Scripted(f"http://r{i}:8765", httpx.Response(503, text="busy")) for i in range(2)]
    async with _scripted_fleet(*runners) as fleet:
        with pytest.raises(
            RunnerUnavailableError, match=r"failed without a verdict: http://r0:8765.*http://r1"
        ):
            await fleet.run(RunSpec("print(1)"))


async def test_health_is_cached_briefly_and_free_slots_are_counted_between_answers() -> None:
    release = asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, json=_verdict_json(stdout=f"{request.url.host}\n"))

    one = Scripted("http://one:8765", held, free=1)
    two = Scripted("http://two:8765", held, free=1)
    async with _scripted_fleet(one, two, health_ttl_s=60.0) as fleet:
        # Both report one free slot; the second job goes to the other runner, not behind the first.
        jobs = [asyncio.create_task(fleet.run(RunSpec(f"print({i})"))) for i in range(2)]
        while one.run_calls + two.run_calls < 2:
            await asyncio.sleep(0.01)
        release.set()
        outputs = sorted(v.stdout for v in await asyncio.gather(*jobs))
        assert outputs == ["one\n", "two\n"]
        await fleet.run(RunSpec("print(3)"))
    assert (one.health_calls, two.health_calls) == (1, 1)  # within the TTL: asked once


async def test_a_gpu_ddp_job_needs_nccl_and_the_gpus() -> None:
    cpu = Scripted("http://cpu:8765", httpx.Response(200, json=_verdict_json(stdout="cpu\n")))
    gpu = Scripted("http://gpu:8765", httpx.Response(200, json=_verdict_json(stdout="gpu\n")), gpus=8)
    async with _scripted_fleet(gpu, cpu) as fleet:
        assert (await fleet.run(RunSpec("x", mode="ddp", nproc=2, gpus=2))).stdout == "gpu\n"
        assert (await fleet.run(RunSpec("x", mode="ddp", nproc=2))).stdout == "cpu\n"
        with pytest.raises(RunnerUnavailableError, match=r"needs? .*16 GPUs|16 GPUs"):
            await fleet.run(RunSpec("x", mode="ddp", nproc=2, gpus=16))
        health = await fleet.health()
    assert gpu_shortfall(RunSpec("x", gpus=16), health) == (
        "cannot reproduce here: needs 16 GPUs, none of the 2 runners has more than 8 "
        "(8 × H100 · torch 2.13.0 · CUDA 12.8); a CPU result would be misleading"
    )


# --------------------------------------------------------------------------- the setting
def test_one_url_is_the_plain_client_several_are_a_fleet() -> None:
    single = runner_from_settings(
        Settings(runner_url="http://127.0.0.1:8765/", runner_token=SecretStr("a,b"))
    )
    assert isinstance(single, HttpRunnerClient) and single.url == "http://127.0.0.1:8765"
    fleet = runner_from_settings(
        Settings(runner_url="http://a:1, https://b:2", runner_token=SecretStr("tok"))
    )
    assert isinstance(fleet, FleetRunnerClient) and fleet.urls == ["http://a:1", "https://b:2"]
    assert runner_from_settings(Settings()) is None
    endpoints = parse_runner_endpoints("http://a:1,http://b:2,http://c:3", "x, ,z")
    assert [e.token for e in endpoints] == ["x", None, "z"]
    assert "x" not in repr(endpoints)  # tokens stay out of reprs


@pytest.mark.parametrize(
    ("urls", "tokens", "message"),
    [
        ("http://a:1,,http://b:2", None, "RANKZERO_RUNNER_URL has an empty entry"),
        ("http://a:1,127.0.0.1:8765", None, "RANKZERO_RUNNER_URL entry 2 '127.0.0.1:8765' is not an http"),
        ("http://a:1,ftp://b", None, "RANKZERO_RUNNER_URL entry 2 'ftp://b' is not an http"),
        ("http://a:1,http://user:pw@b:2", None, "entry 2 carries credentials in the URL"),
        ("http://a:1,http://a:1/", None, "entry 2 repeats 'http://a:1'"),
        ("http://a:1,http://b:2?x=1", None, "has a query or fragment"),
        ("http://a:1?token=pw", None, "entry 1 has a query or fragment"),  # a token in the query: not shown
        ("http://a:1,http://b:2,http://c:3", "s1,s2", "RANKZERO_RUNNER_TOKEN has 2 comma-separated tokens"),
        (" , ", None, "RANKZERO_RUNNER_URL is empty"),
    ],
)
def test_a_bad_setting_is_one_clear_line(urls: str, tokens: str | None, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_runner_endpoints(urls, tokens)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "pw" not in text and "s1" not in text  # credentials and tokens are never shown


def test_the_cli_names_a_bad_runner_setting(tmp_path: Path) -> None:
    bank = tmp_path / "q.yaml"
    spec = {**GPU_SPEC, "topic": "Collectives", "difficulty": "expert"}
    bank.write_text(yaml.safe_dump({"questions": [spec]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(RANKZERO_RUNNER_URL="http://a:8765,runner-b:8765", XDG_DATA_HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "questions", "verify", str(bank)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "error: RANKZERO_RUNNER_URL entry 2 'runner-b:8765' is not an http(s) URL with a host: "
        "use e.g. http://gpu-2x:8765,http://cpu:8765"
    )


# --------------------------------------------------------------------------- the runner's side
def test_the_test_only_shape_is_refused_off_loopback() -> None:
    exe = Path(sys.executable).parent / "rankzero-runner"
    done = subprocess.run(
        [str(exe), "serve", "--host", "0.0.0.0", "--port", "1", "--test-advertise-gpus", "2"],
        env={**os.environ, "RANKZERO_RUNNER_TOKEN": "some-token"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--test-advertise-gpus is for tests only: it needs a loopback --host" in done.stderr


@pytest.mark.parametrize(
    ("cpu_max", "expected"), [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1)]
)
def test_cpu_cores_follow_a_cgroup_quota(tmp_path: Path, cpu_max: str, expected: int | None) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert cpu_cores(tmp_path) == affinity  # no cpu.max: the affinity
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert cpu_cores(tmp_path) == (affinity if expected is None else min(affinity, expected))


def test_questions_verify_runs_on_the_fleet(
    tmp_path: Path, gpu_runner: RunnerServer, cpu_runner: RunnerServer
) -> None:
    """The real command, with two runners and a token for each in the environment."""

    def question(qid: str, gpus: int) -> dict[str, Any]:
        return {
            "id": qid,
            "kind": "predict_output",
            "topic": "Multi-GPU basics",
            "difficulty": "beginner",
            "prompt": "What is printed?",
            "code": "import os\nif os.environ.get('RANK', '0') == '0':\n    print('x')\n",
            "runner": {"mode": "ddp", "nproc": 2, "gpus": gpus},
            "choices": [{"text": "x", "correct": True}, {"text": "y", "correct": False}],
        }

    bank = tmp_path / "bank.yaml"
    bank.write_text(
        yaml.safe_dump(
            {"questions": [question("on-cpu", 0), question("two-gpus", 2), question("four-gpus", 4)]}
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(
        COLUMNS="200",
        RANKZERO_RUNNER_URL=f"{cpu_runner.url},{gpu_runner.url}",
        RANKZERO_RUNNER_TOKEN=f"{cpu_runner.token},{gpu_runner.token}",
    )
    before = _served(gpu_runner), _served(cpu_runner)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "rankzero"), "questions", "verify", str(bank)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "confirmed     on-cpu" in done.stdout and "confirmed     two-gpus" in done.stdout
    assert (
        "cannot check  four-gpus: cannot reproduce here: needs 4 GPUs, none of the 2 runners has more than 2"
        in done.stdout
    )
    assert (_served(gpu_runner), _served(cpu_runner)) == (before[0] + 1, before[1] + 1)
