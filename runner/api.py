"""HTTP API: ``POST /v1/runs`` answers a verdict, ``GET /v1/health`` the runner's capabilities.

The JSON contract is documented in runner/README.md; this module only maps HTTP onto RunnerService.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.config import MAX_CODE_BYTES
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode

log = logging.getLogger(__name__)

# The whole body may carry JSON escapes around the code (a NUL is 6 bytes as \u0000): allow some slack
# for them, and refuse anything bigger before reading it.
MAX_BODY_BYTES = 8 * MAX_CODE_BYTES


class RunBody(BaseModel):
    """Body of ``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="The snippet, run as the file main.py (__name__ == '__main__').")
    mode: Literal["python", "dp", "ddp"] = "python"
    nproc: int = Field(default=1, ge=1, le=64, description="Ranks for ddp; python and dp always run 1.")
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    timeout_s: float | None = Field(default=None, gt=0, le=3600, description="Default: the runner's.")
    init_process_group: bool = False


def _auth_failure(request: Request, token: str | None) -> JSONResponse | None:
    if token is None:
        return None
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    return JSONResponse(
        {"detail": "missing or wrong bearer token"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


async def _read_capped(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise HTTPException(413, f"request body is over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, f"request body is over {MAX_BODY_BYTES} bytes")
    return bytes(body)


def create_app(service: RunnerService, token: str | None, manage_service: bool = True) -> FastAPI:
    """Build the app. With ``manage_service`` the app starts and stops the service with its lifespan."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_service:
            service.start()
        try:
            yield
        finally:
            if manage_service:
                service.close()

    app = FastAPI(title="RankZero runner", version="1", lifespan=lifespan)

    @app.get("/v1/health")
    async def health(request: Request) -> Any:
        """Capabilities: hardware, backends, sandbox engine, pool state, limits."""
        failure = _auth_failure(request, token)
        if failure is not None:
            return failure
        return service.health()

    @app.post("/v1/runs")
    async def create_run(request: Request) -> Any:
        """Run a snippet and answer its verdict (job failures are verdicts with HTTP 200)."""
        failure = _auth_failure(request, token)
        if failure is not None:
            return failure
        body = await _read_capped(request)
        try:
            data = json.loads(body)
        except ValueError as exc:
            return JSONResponse({"detail": f"body is not valid JSON: {exc}"}, status_code=400)
        if not isinstance(data, dict):
            return JSONResponse({"detail": "body must be a JSON object"}, status_code=400)
        code = data.get("code")
        if isinstance(code, str) and len(code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
            return JSONResponse(
                {"detail": f"code is over {MAX_CODE_BYTES} bytes ({MAX_CODE_BYTES // 1024} KiB)"},
                status_code=413,
            )
        try:
            run = RunBody.model_validate(data)
        except ValidationError as exc:
            errors = [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False, include_input=False)
            ]
            return JSONResponse({"detail": errors}, status_code=422)
        verdict = await service.run_async(
            RunRequest(
                code=run.code,
                mode=Mode(run.mode),
                nproc=run.nproc,
                backend=run.backend,
                timeout_s=run.timeout_s,
                init_process_group=run.init_process_group,
            )
        )
        log.info("run mode=%s nproc=%d -> %s", run.mode, run.nproc, verdict.status.value)
        return verdict.to_dict()

    return app
