"""The HTTP API in-process (httpx ASGITransport), once through a real uvicorn server, and the CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from runner.api import create_app
from runner.cli import main as cli_main
from runner.config import MAX_CODE_BYTES
from tests.runner.conftest import RUNNER_GPUS

pytestmark = pytest.mark.slow

TOKEN = "test-token-not-a-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(service) -> httpx.AsyncClient:
    app = create_app(service, TOKEN, manage_service=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://runner", timeout=120) as http:
        yield http


async def test_health_reports_capabilities(client):
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
async def test_missing_or_wrong_token_is_401(client, headers):
    for method, path in (("GET", "/v1/health"), ("POST", "/v1/runs")):
        response = await client.request(method, path, headers=headers, json={"code": "print(1)"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"


async def test_run_answers_the_verdict(client):
    response = await client.post("/v1/runs", headers=AUTH, json={"code": "print(6 * 7)"})
    assert response.status_code == 200
    verdict = response.json()
    assert verdict["status"] == "ok"
    assert verdict["ranks"][0]["stdout"] == "42\n"


async def test_ddp_run_with_all_fields(client):
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


async def test_code_over_64_kib_is_413(client):
    code = "#" * (MAX_CODE_BYTES + 1)
    response = await client.post("/v1/runs", headers=AUTH, json={"code": code})
    assert response.status_code == 413
    assert "64 KiB" in response.json()["detail"]


async def test_huge_body_is_413_before_parsing(client):
    response = await client.post("/v1/runs", headers=AUTH, content=b"{" + b" " * (1 << 20))
    assert response.status_code == 413


async def test_lone_surrogate_in_code_is_a_clear_rejection(client):
    # Valid JSON, but "\ud800" decodes to a lone surrogate: no UTF-8 file can hold it.
    body = b'{"code": "print(\'\\ud800\')"}'
    response = await client.post(
        "/v1/runs", headers={**AUTH, "Content-Type": "application/json"}, content=body
    )
    assert response.status_code == 200
    verdict = response.json()
    assert verdict["status"] == "rejected"
    assert verdict["notes"] == ["code is not valid Unicode text: surrogates not allowed at character 7"]


async def test_invalid_json_is_400(client):
    response = await client.post("/v1/runs", headers=AUTH, content=b"{not json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]


async def test_non_object_is_400(client):
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
async def test_malformed_fields_are_422_with_a_clear_message(client, body, field):
    response = await client.post("/v1/runs", headers=AUTH, json=body)
    assert response.status_code == 422
    errors = response.json()["detail"]
    assert any(field in e["loc"] for e in errors), errors
    assert all(e["msg"] for e in errors)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def live_server(service) -> Iterator[int]:
    port = _free_port()
    config = uvicorn.Config(create_app(service, TOKEN, manage_service=False), host="127.0.0.1", port=port)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def test_real_server_on_loopback_and_its_port_is_unreachable_from_jobs(live_server):
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


def test_serve_refuses_a_public_address_without_token(monkeypatch, capsys):
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


def test_cli_run_json_prints_exactly_one_object(tmp_path):
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


def test_cli_run_readable_report_for_ddp(tmp_path):
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
