"""The HTTP API in-process (httpx ASGITransport), once through a real uvicorn server, and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from runner.api import create_app
from runner.cli import main as cli_main
from runner.config import MAX_CODE_BYTES, RunnerConfig
from runner.host_memory import MemoryPlan, host_memory_bytes
from runner.sandbox import remove_stale_etc_folders
from runner.service import RunnerService, RunRequest
from runner.verdict import Status
from tests.net import free_port
from tests.runner.conftest import RUNNER_GPUS
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

TOKEN = "test-token-not-a-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(service: RunnerService) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service, TOKEN, manage_service=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://runner", timeout=120) as http:
        yield http


async def test_health_reports_capabilities(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/health", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["hardware"]["gpus"] == RUNNER_GPUS
    assert body["hardware"]["torch"].startswith("2.13.0")
    assert "gloo" in body["backends"]
    assert body["sandbox"]["engine"] == "bubblewrap"
    assert body["sandbox"]["isolated"] is True
    assert body["sandbox"]["cgroup"] in (0, 1, 2)
    assert set(body["pool"]) >= {"targets", "ready"}
    assert body["limits"]["max_code_bytes"] == MAX_CODE_BYTES


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}])
async def test_missing_or_wrong_token_is_401(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    for method, path in (("GET", "/v1/health"), ("POST", "/v1/runs")):
        response = await client.request(method, path, headers=headers, json={"code": "print(1)"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"


async def test_run_answers_the_verdict(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs", headers=AUTH, json={"code": "print(6 * 7)"})
    assert response.status_code == 200
    verdict = response.json()
    assert verdict["status"] == "ok"
    assert verdict["ranks"][0]["stdout"] == "42\n"


async def test_ddp_run_with_all_fields(client: httpx.AsyncClient) -> None:
    body = {
        "code": "import torch.distributed as dist\nprint(dist.get_rank(), dist.get_world_size())\n",
        "mode": "ddp",
        "nproc": 2,
        "backend": "gloo",
        "timeout_s": 60,
        "init_process_group": True,
    }
    response = await client.post("/v1/runs", headers=AUTH, json=body)
    verdict = response.json()
    assert verdict["status"] == "ok", verdict
    assert [r["stdout"] for r in verdict["ranks"]] == ["0 2\n", "1 2\n"]


async def test_code_over_64_kib_is_413(client: httpx.AsyncClient) -> None:
    code = "#" * (MAX_CODE_BYTES + 1)
    response = await client.post("/v1/runs", headers=AUTH, json={"code": code})
    assert response.status_code == 413
    assert "64 KiB" in response.json()["detail"]


async def test_huge_body_is_413_before_parsing(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs", headers=AUTH, content=b"{" + b" " * (1 << 20))
    assert response.status_code == 413


async def test_lone_surrogate_in_code_is_a_clear_rejection(client: httpx.AsyncClient) -> None:
    # Valid JSON, but "\ud800" decodes to a lone surrogate: no UTF-8 file can hold it.
    body = b'{"code": "print(\'\\ud800\')"}'
    response = await client.post(
        "/v1/runs", headers={**AUTH, "Content-Type": "application/json"}, content=body
    )
    assert response.status_code == 200
    verdict = response.json()
    assert verdict["status"] == "rejected"
    assert verdict["notes"] == ["code is not valid Unicode text: surrogates not allowed at character 7"]


async def test_invalid_json_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs", headers=AUTH, content=b"{not json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]


async def test_non_object_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs", headers=AUTH, json=["print(1)"])
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "code"),
        ({"code": "x", "mode": "tpu"}, "mode"),
        ({"code": "x", "nproc": 0}, "nproc"),
        ({"code": "x", "backend": "mpi"}, "backend"),
        ({"code": "x", "timeout_s": -1}, "timeout_s"),
        ({"code": "x", "colour": "red"}, "colour"),
        ({"code": 5}, "code"),
    ],
)
async def test_malformed_fields_are_422_with_a_clear_message(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    response = await client.post("/v1/runs", headers=AUTH, json=body)
    assert response.status_code == 422
    errors = response.json()["detail"]
    assert any(field in e["loc"] for e in errors), errors
    assert all(e["msg"] for e in errors)


def _ready(http: httpx.Client, ranks: str) -> int:
    """How many warm sandboxes of ``ranks`` ranks the server's pool holds (-1 while it does not answer)."""
    try:
        return int(http.get("/v1/health").json()["pool"]["ready"][ranks])
    except httpx.HTTPError:
        return -1


@pytest.fixture
def live_server(service: RunnerService) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(create_app(service, TOKEN, manage_service=False), host="127.0.0.1", port=port)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "uvicorn did not start", polls=600, every_s=0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def test_real_server_on_loopback_and_its_port_is_unreachable_from_jobs(live_server: int) -> None:
    port = live_server
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('reached')\n"
        "except OSError as exc:\n    print(type(exc).__name__)\n"
    )
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=120) as http:
        assert http.get("/v1/health").status_code == 200
        verdict = http.post("/v1/runs", json={"code": code}).json()
    assert verdict["status"] == "ok"
    assert verdict["ranks"][0]["stdout"] == "ConnectionRefusedError\n"


def test_serve_refuses_a_public_address_without_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RANKZERO_RUNNER_TOKEN", raising=False)
    assert cli_main(["serve", "--host", "0.0.0.0"]) == 2
    assert "without a token" in capsys.readouterr().err


def _cgroup_folders_of(pid: int) -> list[str]:
    """Cgroup folders a runner process with this pid created (runner/cgroups.py names them rankzero-<pid>)."""
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            folder = Path("/sys/fs/cgroup", controller, path.lstrip("/"))
            if controller in ("", "memory", "pids") and folder.is_dir():
                found += [str(p) for p in folder.glob(f"rankzero-{pid}*")]
    return found


def test_cli_run_json_prints_exactly_one_object(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text("print('from the cli')\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "run", str(snippet), "--json", "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    verdict = json.loads(stdout)
    assert verdict["status"] == "ok"
    assert verdict["ranks"][0]["stdout"] == "from the cli\n"
    # The command closed its service: no cgroup folder of that runner process is left behind.
    assert _cgroup_folders_of(proc.pid) == []


def test_cli_run_readable_report_for_ddp(tmp_path: Path) -> None:
    snippet = tmp_path / "boom.py"
    snippet.write_text(
        "import torch.distributed as dist\nif dist.get_rank() == 1:\n    raise KeyError('two')\nprint('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(snippet), "--mode", "ddp", "--init-process-group"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "status: error" in result.stdout
    assert "root cause: rank 1" in result.stdout
    assert "exception: KeyError: 'two' (line 3)" in result.stdout


# --- the service under abuse (issue 18, section 3) ---


async def test_deeply_nested_json_is_400_not_500(client: httpx.AsyncClient) -> None:
    deep = b'{"code": "print(1)", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = await client.post(
        "/v1/runs", headers={**AUTH, "Content-Type": "application/json"}, content=deep
    )
    assert response.status_code == 400, response.text
    # Nested just below the parser's limit, it parses: the unknown field is refused, its value not echoed.
    shallow = {"code": "print(1)", "extra": json.loads("[" * 500 + "]" * 500)}
    response = await client.post("/v1/runs", headers=AUTH, json=shallow)
    assert response.status_code == 422
    assert response.json() == {
        "detail": [{"loc": ["extra"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}]
    }


async def test_docs_are_off_and_the_schema_needs_the_token(client: httpx.AsyncClient) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert (await client.get(path, headers=AUTH)).status_code == 404
        assert (await client.get(path)).status_code == 401
    assert (await client.get("/openapi.json")).status_code == 401
    assert (await client.get("/openapi.json", headers={"Authorization": "Bearer nope"})).status_code == 401
    schema = (await client.get("/openapi.json", headers=AUTH)).json()
    assert set(schema["paths"]) == {"/v1/runs", "/v1/health"}
    assert schema["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "The runner's token (RANKZERO_RUNNER_TOKEN).",
    }


async def test_unauthenticated_bodies_are_not_even_parsed(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/runs", content=b"[" * 100_000)
    assert response.status_code == 401


def _etc_folders(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"rankzero-etc-{pid}-*"))


def test_cli_run_leaves_no_etc_folder(tmp_path: Path) -> None:
    snippet = tmp_path / "hello.py"
    snippet.write_text("print('hi')\n")
    private_tmp = tmp_path / "tmp"  # the runner's temporary files go here, away from other runners'
    private_tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "run", str(snippet), "--json", "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(private_tmp)},
    )
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert json.loads(stdout)["status"] == "ok"
    assert list(private_tmp.iterdir()) == []


def test_etc_folders_of_dead_runners_are_removed_and_live_ones_kept() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = Path(tempfile.mkdtemp(prefix=f"rankzero-etc-{gone.pid}-"))
    (stale / "hosts").write_text("127.0.0.1 localhost\n")
    live = Path(tempfile.mkdtemp(prefix=f"rankzero-etc-{os.getpid()}-"))
    try:
        removed = remove_stale_etc_folders()
        assert str(stale) in removed and not stale.exists()
        assert live.exists()
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)


def test_service_close_removes_its_etc_folder() -> None:
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={}))
    verdict = svc.run(RunRequest(code="print(1)\n"))
    assert verdict.status == Status.OK
    assert len(_etc_folders(os.getpid())) >= 1
    hosts = svc.launcher._hosts
    assert hosts is not None and hosts.parent.exists()
    svc.close()
    assert not hosts.parent.exists()


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _limit_fds(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_idle_half_open_connections_cannot_exhaust_descriptors() -> None:
    # The finding: ~1,000 connections that never finish their headers took every descriptor; runs got
    # 500 and the pool refill died. Reproduced at a smaller scale: the server may hold 700 descriptors
    # and 900 idle connections arrive (raw sockets to 127.0.0.1 only).
    port = free_port()
    env = {**os.environ, "RANKZERO_RUNNER_TOKEN": TOKEN}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner.cli",
            "serve",
            "--port",
            str(port),
            "--pool",
            "2:1",
            "--max-concurrent",
            "2",
            "--max-connections",
            "100",
            "--request-timeout",
            "3",
            "--memory-mb",
            "2048",
            "--log-level",
            "ERROR",
        ],
        env=env,
        preexec_fn=lambda: _limit_fds(700),
    )
    idle: list[socket.socket] = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=120) as http:
            wait_until(lambda: _ready(http, "2") == 1, "the server did not start", polls=600, every_s=0.2)
            for _ in range(900):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: runner\r\nContent-Type: applic")
                idle.append(sock)
            # The server holds at most --max-connections of them (plus its own descriptors).
            assert _fd_count(server.pid) < 700 - 50
            # An authenticated run gets its verdict during the flood: the oldest idle connection makes room.
            verdict = http.post(
                "/v1/runs",
                json={"code": "import torch\nprint(torch.ones(2).sum().item())\n", "mode": "ddp", "nproc": 2},
            ).json()
            assert verdict["status"] == "ok", verdict
            assert [r["stdout"] for r in verdict["ranks"]] == ["2.0\n", "2.0\n"]
            # The connections that never finished their request are cut after --request-timeout.
            time.sleep(4)
            cut = 0
            for sock in idle:
                sock.settimeout(0.5)
                try:
                    cut += sock.recv(1) == b""
                except ConnectionResetError:
                    cut += 1
                except TimeoutError:
                    pass
            assert cut == len(idle)
            health = http.get("/v1/health").json()
            assert health["status"] == "ok" and health["pool"]["refill"]["ok"] is True, health
            wait_until(
                lambda: _ready(http, "2") >= 1,
                "the pool did not refill after the flood",
                polls=300,
                every_s=0.2,
            )
    finally:
        for sock in idle:
            sock.close()
        server.terminate()
        server.wait(timeout=30)


def test_pool_refill_failure_is_retried_with_backoff_and_shown_in_health() -> None:
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={1: 1}))
    real_bwrap = svc.launcher.bwrap
    # A sandbox that cannot start (bwrap replaced by a program that exits at once, as a broken
    # bubblewrap would): the refill must record it, keep retrying, and recover.
    svc.launcher.check()
    svc.launcher.bwrap = "/bin/false"
    svc.pool.start()
    try:
        wait_until(
            lambda: svc.health()["pool"]["refill"]["consecutive_failures"] >= 2,
            "the refill did not record two failures",
            polls=300,
        )
        health = svc.health()
        assert health["status"] == "degraded"
        refill = health["pool"]["refill"]
        assert refill["ok"] is False and refill["last_error"].startswith("a warm sandbox did not start")
        assert refill["last_error_at"] is not None and refill["retry_in_s"] is not None
        # Jobs still run (cold) meanwhile; then the refill recovers by itself.
        svc.launcher.bwrap = real_bwrap
        assert svc.pool.wait_full(90)
        health = svc.health()
        assert health["status"] == "ok" and health["pool"]["refill"]["consecutive_failures"] == 0
        assert health["pool"]["refill"]["last_error"] is not None  # kept for the operator
    finally:
        svc.launcher.bwrap = real_bwrap
        svc.close()


async def test_a_run_that_cannot_get_a_sandbox_is_503_not_500() -> None:
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={}))
    svc.launcher.check()
    svc.launcher.bwrap = "/bin/false"  # as a broken bubblewrap, or one that cannot get descriptors
    app = create_app(svc, TOKEN, manage_service=False)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://runner"
        ) as http:
            response = await http.post("/v1/runs", headers=AUTH, json={"code": "import torch\nprint(1)\n"})
        assert response.status_code == 503, response.text
        assert response.json()["detail"].startswith("the runner cannot start a sandbox now (RuntimeError")
        assert response.headers["retry-after"] == "5"
    finally:
        svc.close()


def test_the_default_configuration_serves_on_this_host() -> None:
    # Defaults only (pool 8:2, 4 concurrent jobs, 4096 MiB per rank): the memory plan must accept them on
    # the development and CI machines (24 GiB), the capacity-8 sandboxes must warm under the syscall
    # filters and the per-job identity, and a job served by one of them gets the limits of its own size.
    port = free_port()
    env = {**os.environ, "RANKZERO_RUNNER_TOKEN": TOKEN}
    server = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "serve", "--port", str(port), "--log-level", "ERROR"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=120) as http:

            def warm() -> bool:
                assert server.poll() is None, server.communicate()[1]
                return _ready(http, "8") >= 1

            wait_until(warm, "the default pool did not warm", polls=900, every_s=0.2)
            health = http.get("/v1/health").json()
            assert health["status"] == "ok" and health["pool"]["targets"] == {"8": 2}, health
            verdict = http.post(
                "/v1/runs",
                json={"code": "import torch\nprint(torch.ones(3).sum().item())\n", "mode": "ddp", "nproc": 2},
            ).json()
            assert verdict["status"] == "ok", verdict
            assert [r["stdout"] for r in verdict["ranks"]] == ["3.0\n", "3.0\n"]
            # With the default 4096 MiB per rank a 2-rank job is clamped to its fair share on this host
            # (24 GiB, 4 jobs): an operator's matter, never a note on an ordinary verdict a player sees.
            if health["sandbox"]["cgroup"]:
                plan = MemoryPlan.for_host(host_memory_bytes(), 4, 2 + 1, 4096, 256)
                assert plan.job_limit(2, 4096, 256)[1] is not None
            assert not any(n.startswith("memory:") for n in verdict["notes"]), verdict["notes"]
            assert all(n.startswith("backend auto chose ") for n in verdict["notes"]), verdict["notes"]
    finally:
        server.terminate()
        server.wait(timeout=30)


async def test_probes_answer_without_a_token_and_readiness_follows_the_pool() -> None:
    """/livez and /readyz are for the kubelet (no token) and say nothing about the host; /readyz is 503
    until a sandbox warmed, and again while the refill fails."""
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={1: 1}))
    real_bwrap = svc.launcher.bwrap
    svc.launcher.check()
    svc.launcher.bwrap = "/bin/false"  # every warm-up fails, as with a broken bubblewrap
    app = create_app(svc, TOKEN, manage_service=False)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://runner", timeout=60) as http:
            live = await http.get("/livez")
            assert (live.status_code, live.json()) == (200, {"status": "alive"})
            not_yet = await http.get("/readyz")
            assert not_yet.status_code == 503
            assert not_yet.json() == {
                "status": "not ready",
                "reason": "the first warm sandbox is not ready yet",
            }
            svc.pool.start()
            for _ in range(600):  # a hang guard (60 s), not a speed bound
                if svc.pool.failures:
                    break
                await asyncio.sleep(0.1)
            assert svc.pool.failures >= 1, svc.health()["pool"]
            failing = await http.get("/readyz")
            assert failing.status_code == 503 and "cannot refill" in failing.json()["reason"]
            svc.launcher.bwrap = real_bwrap
            assert await asyncio.to_thread(svc.pool.wait_full, 90)
            ready = await http.get("/readyz")
            assert (ready.status_code, ready.json()["status"]) == (200, "ready")
            # Only these two GETs skip the token: the rest of the API still refuses without it.
            assert (await http.post("/livez")).status_code == 401
            assert (await http.get("/v1/health")).status_code == 401
    finally:
        svc.launcher.bwrap = real_bwrap
        svc.close()
