"""Contract test: the bot's HttpRunnerClient against the runner's own app, in-process (httpx ASGITransport).

The runner service is real (bubblewrap sandboxes), so the two sides can never drift: a key renamed or
added on either side, a changed status code or auth scheme fails here.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from bot.core.errors import RunnerUnavailableError
from bot.core.verdicts import RunSpec
from bot.runner_client import (
    CAPACITY_KEYS,
    HARDWARE_KEYS,
    HEALTH_KEYS,
    RANK_KEYS,
    VERDICT_KEYS,
    HttpRunnerClient,
)
from runner.api import create_app
from runner.config import RunnerConfig
from runner.hardware import probe
from runner.sandbox import bubblewrap_path
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode

TOKEN = "contract-token"


@pytest.fixture(scope="module")
def runner_service() -> Iterator[RunnerService]:
    if bubblewrap_path() is None:
        pytest.fail("bubblewrap is required (apt-get install bubblewrap)")
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={1: 0, 2: 1}, max_concurrent_jobs=2))
    svc.start()
    yield svc
    svc.close()


@pytest.fixture
async def client(runner_service: RunnerService) -> AsyncIterator[HttpRunnerClient]:
    app = create_app(runner_service, TOKEN, manage_service=False)
    transport = httpx.ASGITransport(app=app)
    async with HttpRunnerClient("http://runner.test", TOKEN, transport=transport) as c:
        yield c


async def _raw(runner_service: RunnerService, body: dict[str, object]) -> httpx.Response:
    app = create_app(runner_service, TOKEN, manage_service=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://runner.test"
    ) as http:
        return await http.post(
            "/v1/runs", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )


async def test_health_keys_and_values(client: HttpRunnerClient, runner_service: RunnerService) -> None:
    health = await client.health()
    assert health.hardware.gpus == 0 and health.hardware.torch.startswith("2.")
    assert set(health.modes) == {"python", "dp", "ddp"} and "gloo" in health.backends
    assert health.sandboxed and health.max_nproc == 8
    assert set(runner_service.health()) == HEALTH_KEYS
    assert set(runner_service.health()["hardware"]) == HARDWARE_KEYS
    # What a fleet routes on (bot/runner_fleet.py): an idle runner has all its slots free.
    capacity = health.extra["capacity"]
    assert set(capacity) == CAPACITY_KEYS
    assert capacity["max_concurrent_jobs"] == 2 and capacity["free_slots"] == 2
    assert capacity["queued_jobs"] == 0 and capacity["cpu_cores"] >= 1
    assert health.extra["test_advertised"] is False


def test_a_test_runner_advertises_gpus_but_runs_on_what_it_has() -> None:
    """--test-advertise-gpus (testing only): health claims the shape; verdicts say what really ran."""
    real = probe().gpus
    svc = RunnerService(
        RunnerConfig(memory_mb=2048, pool={}, max_concurrent_jobs=1, test_advertise_gpus=real + 2)
    )
    try:
        health = svc.health()
        assert health["hardware"]["gpus"] == real + 2 and health["test_advertised"] is True
        assert "nccl" in health["backends"]
        assert health["hardware"]["names"][0] == f"advertised for tests (really {real} GPUs)"
        # It refuses an NCCL job it cannot really run (a rank more than its real GPUs), before it starts.
        verdict = svc.run(RunRequest("print(1)", mode=Mode.DDP, nproc=real + 1, backend="nccl"))
        assert verdict.status.value == "unsupported" and verdict.hardware.gpus == real
        assert verdict.notes[0].startswith(f"test runner: it advertises {real + 2} GPUs")
        assert verdict.ranks == []
    finally:
        svc.close()


async def test_the_verdict_has_exactly_the_keys_the_client_reads(runner_service: RunnerService) -> None:
    response = await _raw(runner_service, {"code": "print('hi')\nraise SystemExit(3)\n"})
    assert response.status_code == 200
    data = response.json()
    assert set(data) == VERDICT_KEYS
    assert set(data["hardware"]) == HARDWARE_KEYS
    assert set(data["ranks"][0]) == RANK_KEYS


async def test_ddp_two_ranks_print_in_rank_order(client: HttpRunnerClient) -> None:
    code = textwrap.dedent(
        """
        import torch
        import torch.distributed as dist
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        print(f"rank {dist.get_rank()}: {t.item()}")
        """
    )
    v = await client.run(RunSpec(code, mode="ddp", nproc=2, init_process_group=True, timeout_s=60))
    assert (v.status, v.mode, v.nproc, v.backend) == ("ok", "ddp", 2, "gloo")
    assert [r.rank for r in v.ranks] == [0, 1]
    assert v.stdout == "rank 0: 3.0\nrank 1: 3.0\n"
    assert v.sandboxed and v.hardware.gpus == 0 and v.root_cause_rank is None


async def test_exception_and_timeout_verdicts(client: HttpRunnerClient) -> None:
    v = await client.run(RunSpec("x = 1\nraise ValueError('bad value')\n"))
    assert v.status == "error" and v.root_cause_rank == 0
    root = v.root_cause
    assert root is not None and root.exception is not None
    assert (root.exception.type, root.exception.message, root.exception.line) == (
        "ValueError",
        "bad value",
        2,
    )
    v = await client.run(RunSpec("import time\nwhile True:\n    time.sleep(0.05)\n", timeout_s=1.5))
    assert v.status == "timeout"
    stuck = v.ranks[0].stuck_at
    assert stuck is not None and (stuck.function, stuck.line, stuck.call) == ("<module>", 3, "sleep")


async def test_refused_request_is_a_rejected_verdict(client: HttpRunnerClient) -> None:
    v = await client.run(RunSpec("print(1)", mode="ddp", nproc=9))
    assert v.status == "rejected" and v.ranks == ()


async def test_wrong_token_is_a_clear_error(runner_service: RunnerService) -> None:
    app = create_app(runner_service, TOKEN, manage_service=False)
    async with HttpRunnerClient("http://runner.test", "wrong", transport=httpx.ASGITransport(app=app)) as c:
        with pytest.raises(RunnerUnavailableError, match=r"refused our bearer token .*RANKZERO_RUNNER_TOKEN"):
            await c.health()


async def test_unreachable_runner_is_retried_then_reported() -> None:
    calls = 0

    def refuse(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    transport = httpx.MockTransport(refuse)
    async with HttpRunnerClient(
        "http://127.0.0.1:9", None, transport=transport, retries=2, retry_delay_s=0
    ) as c:
        with pytest.raises(RunnerUnavailableError, match=r"unreachable .*rankzero-runner serve"):
            await c.run(RunSpec("print(1)"))
    assert calls == 3  # the first try and two retries; answers (even 5xx) are never retried


async def test_a_server_error_is_not_retried() -> None:
    calls = 0

    def fail(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(500, text="boom")

    async with HttpRunnerClient("http://x", None, transport=httpx.MockTransport(fail), retry_delay_s=0) as c:
        with pytest.raises(RunnerUnavailableError, match="answered 500"):
            await c.health()
    assert calls == 1


def test_a_bad_url_says_which_setting_to_fix() -> None:
    with pytest.raises(RunnerUnavailableError, match="RANKZERO_RUNNER_URL"):
        HttpRunnerClient("127.0.0.1:8765")


# --- the OpenAPI schema is the contract (issue 18, section 3) ---


async def _schema(runner_service: RunnerService) -> dict[str, Any]:
    app = create_app(runner_service, TOKEN, manage_service=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://runner.test"
    ) as http:
        assert (await http.get("/openapi.json")).status_code == 401
        response = await http.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow a $ref, and the non-null branch of an ``anyOf [X, null]``."""
    if "anyOf" in node:
        node = next(n for n in node["anyOf"] if n.get("type") != "null")
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        node = schema["components"]["schemas"][name]
    return node


def _properties(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    return dict(_resolve(schema, node)["properties"])


async def test_the_openapi_schema_has_exactly_the_keys_the_client_reads(
    runner_service: RunnerService,
) -> None:
    schema = await _schema(runner_service)
    runs = schema["paths"]["/v1/runs"]["post"]
    verdict = _resolve(schema, runs["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(verdict["properties"]) == VERDICT_KEYS
    assert set(verdict["required"]) == VERDICT_KEYS  # the client indexes them without a default
    assert set(_properties(schema, verdict["properties"]["hardware"])) == HARDWARE_KEYS
    rank = _resolve(schema, verdict["properties"]["ranks"]["items"])
    assert set(rank["properties"]) == RANK_KEYS
    stuck = _properties(schema, rank["properties"]["stuck_at"])
    assert {"function", "line", "call"} <= set(stuck)  # what bot.core.verdicts.StuckAt reads
    exception = _properties(schema, rank["properties"]["exception"])
    assert set(exception) == {"type", "message", "line"}
    statuses = set(verdict["properties"]["status"]["enum"])
    assert statuses == {"ok", "error", "timeout", "crashed", "oom", "output_limit", "unsupported", "rejected"}
    health = schema["paths"]["/v1/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    health_props = _properties(schema, health)
    assert set(health_props) == HEALTH_KEYS
    assert {"max_nproc", "max_timeout_s"} <= set(_properties(schema, health_props["limits"]))
    assert set(_properties(schema, health_props["capacity"])) == CAPACITY_KEYS
    assert {"capacity", "test_advertised"} <= set(_resolve(schema, health)["required"])
    # Answers the client turns into a clear error are documented.
    assert {"200", "401", "413", "422"} <= set(runs["responses"])
    assert runs["security"] == [{"HTTPBearer": []}]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_the_clients_request_body_fits_the_schema(runner_service: RunnerService) -> None:
    schema = await _schema(runner_service)
    body_schema = _resolve(
        schema, schema["paths"]["/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )
    assert body_schema["additionalProperties"] is False
    sent: list[dict[str, Any]] = []
    app = create_app(runner_service, TOKEN, manage_service=False)
    inner = httpx.ASGITransport(app=app)

    async def record(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            sent.append(json.loads(request.content))
        return await inner.handle_async_request(request)

    transport = httpx.MockTransport(record)
    async with HttpRunnerClient("http://runner.test", TOKEN, transport=transport) as c:
        for spec in (RunSpec("print(1)"), RunSpec("print(2)", mode="ddp", nproc=2, init_process_group=True)):
            await c.run(spec)
    assert len(sent) == 2
    properties = body_schema["properties"]
    for body in sent:
        assert set(body) <= set(properties), set(body) - set(properties)
        assert set(body_schema["required"]) <= set(body)
        assert body["mode"] in _resolve(schema, properties["mode"])["enum"]
        assert properties["nproc"]["minimum"] <= body["nproc"] <= properties["nproc"]["maximum"]
