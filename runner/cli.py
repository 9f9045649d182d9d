"""``rankzero-runner``: ``serve`` the HTTP API, or ``run`` one file locally and print its verdict."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from runner.config import DEFAULT_MAX_NPROC, MAX_CODE_BYTES, WARM_SPAWN_MODES, RunnerConfig
from runner.logs import configure as configure_logs
from runner.sandbox import SandboxUnavailableError
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode, Status, Verdict

log = logging.getLogger(__name__)

TOKEN_ENV = "RANKZERO_RUNNER_TOKEN"  # noqa: S105 - the variable name, not a secret
LOG_FORMAT_ENV = "RANKZERO_LOG_FORMAT"


def _parse_pool(text: str) -> dict[int, int]:
    pool: dict[int, int] = {}
    for item in filter(None, text.split(",")):
        nproc, _, count = item.partition(":")
        pool[int(nproc)] = int(count or "1")
    return pool


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run jobs without bubblewrap (verdicts say isolated: false); for development only",
    )
    parser.add_argument("--memory-mb", type=int, default=RunnerConfig.memory_mb, help="per rank")
    parser.add_argument(
        "--warm-spawn",
        default=RunnerConfig.warm_spawn,
        choices=WARM_SPAWN_MODES,
        help=(
            "serve mp.spawn/forkserver workers from a fork of the warm rank: auto (default) for every"
            " snippet except one that both builds a DistributedDataParallel model and makes subgroups"
            " (new_group, a device mesh), on for all, off for none; see the runner README, Warm pool"
        ),
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--log-format",
        default=os.environ.get(LOG_FORMAT_ENV, "text").strip().lower() or "text",
        help=f"text (default) or json: one JSON object per line on stderr (also ${LOG_FORMAT_ENV})",
    )


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(prog="rankzero-runner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--token-file", type=Path, help=f"bearer token file (else ${TOKEN_ENV})")
    serve.add_argument(
        "--pool",
        default=f"{DEFAULT_MAX_NPROC}:2",
        help="warm sandboxes by capacity (the most ranks each can fork), e.g. 8:2 (default) or 1:1,2:1",
    )
    serve.add_argument("--max-concurrent", type=int, default=RunnerConfig.max_concurrent_jobs)
    serve.add_argument(
        "--max-connections",
        type=int,
        default=256,
        help="open HTTP connections at most (clamped to what the descriptor limit leaves after the jobs)",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        help="seconds a client has to send a whole request (headers and body) before it is disconnected",
    )
    serve.add_argument(
        "--share-gpus",
        action="store_true",
        help="let concurrent jobs share GPUs (default: each job gets GPUs no running job has, or waits)",
    )
    serve.add_argument(
        "--test-advertise-gpus",
        type=int,
        default=None,
        metavar="N",
        help="TESTING ONLY (loopback only): report N GPUs in /v1/health so that a bot's routing between "
        "runners can be tested without GPUs; jobs still run on the real hardware and say so",
    )
    _add_common(serve)

    run = sub.add_parser("run", help="run one file locally and print its verdict")
    run.add_argument("file", type=Path)
    run.add_argument("--mode", choices=[m.value for m in Mode], default="python")
    run.add_argument("--nproc", type=int, default=None, help="ranks for ddp (default 2)")
    run.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    run.add_argument("--timeout", type=float, default=None, help="seconds (default 30)")
    run.add_argument("--init-process-group", action="store_true")
    run.add_argument("--json", action="store_true", help="print exactly one JSON object")
    _add_common(run)
    return parser


def _read_token(token_file: Path | None) -> str | None:
    if token_file is not None:
        token = token_file.read_text().strip()
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    # Jobs get a clean environment anyway; dropping it here keeps it out of anything we start later.
    os.environ.pop(TOKEN_ENV, None)
    return token or None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve_refusal(args: argparse.Namespace, token: str | None) -> str | None:
    """Why ``serve`` must not start with these arguments (None: it may)."""
    if token is None and not _is_loopback(args.host):
        return f"refusing to listen on {args.host} without a token: set ${TOKEN_ENV} or --token-file"
    advertise = args.test_advertise_gpus
    if advertise is not None and (not _is_loopback(args.host) or not 0 <= advertise <= 64):
        # A runner that claims GPUs it lacks must never be reachable by a real bot.
        return "--test-advertise-gpus is for tests only: it needs a loopback --host and 0 <= N <= 64"
    return None


def serve(args: argparse.Namespace) -> int:
    """Start the HTTP server (blocks)."""
    import uvicorn

    from runner.api import create_app, descriptor_budget, server_config

    token = _read_token(args.token_file)
    refusal = _serve_refusal(args, token)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    advertise = args.test_advertise_gpus
    config = RunnerConfig(
        memory_mb=args.memory_mb,
        pool=_parse_pool(args.pool),
        max_concurrent_jobs=args.max_concurrent,
        warm_spawn=args.warm_spawn,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
        share_gpus=args.share_gpus,
        test_advertise_gpus=advertise,
    )
    try:
        service = RunnerService(config)
        service.launcher.check()
    except SandboxUnavailableError as exc:
        print(f"rankzero-runner: {exc}", file=sys.stderr)
        return 2
    if args.unsafe_no_sandbox:
        log.warning("running WITHOUT a sandbox: every verdict says isolated: false")
    if advertise is not None:
        log.warning("TEST RUNNER: /v1/health advertises %d GPUs this machine may not have", advertise)
    app = create_app(service, token)
    try:
        uv_config = server_config(
            app,
            args.host,
            args.port,
            max_connections=args.max_connections,
            request_timeout_s=args.request_timeout,
            reserved_fds=descriptor_budget(
                config.max_concurrent_jobs, config.max_nproc, sum(config.pool.values())
            ),
            log_level=args.log_level.lower(),
            # JSON lines: uvicorn's loggers go through the root handler instead of uvicorn's own.
            own_log_config=args.log_format == "text",
        )
    except ValueError as exc:
        service.close()
        print(f"rankzero-runner: {exc}", file=sys.stderr)
        return 2
    uvicorn.Server(uv_config).run()
    return 0


def run_file(args: argparse.Namespace) -> int:
    """Run one file in a fresh sandbox and print the verdict: exit 0 for status ok, 2 when the request was
    rejected (nothing ran), 1 otherwise.
    """
    code_bytes = args.file.read_bytes()
    if len(code_bytes) > MAX_CODE_BYTES:
        print(f"{args.file} is over {MAX_CODE_BYTES} bytes", file=sys.stderr)
        return 2
    mode = Mode(args.mode)
    nproc = args.nproc if args.nproc is not None else (2 if mode == Mode.DDP else 1)
    config = RunnerConfig(
        memory_mb=args.memory_mb,
        pool={},
        warm_spawn=args.warm_spawn,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    try:
        service = RunnerService(config)
        service.launcher.check()
    except SandboxUnavailableError as exc:
        print(f"rankzero-runner: {exc}", file=sys.stderr)
        return 2
    operator_notes: list[str] = []
    try:
        verdict = service.run(
            RunRequest(
                code=code_bytes.decode("utf-8", "replace"),
                mode=mode,
                nproc=nproc,
                backend=args.backend,
                timeout_s=args.timeout,
                init_process_group=args.init_process_group,
            ),
            operator_notes,
        )
    finally:
        # Removes the runner's cgroup folder (rankzero-<pid>) along with any sandbox left.
        service.close()
    if args.json:
        print(json.dumps(verdict.to_dict()))
        for note in operator_notes:  # stdout holds exactly the verdict
            print(f"runner: {note}", file=sys.stderr)
    else:
        print(render(verdict))
        # Not the verdict's (a player never sees these): how this runner's host limited the job.
        print(
            "\n".join(f"runner: {safe(note)}" for note in operator_notes), end="\n" if operator_notes else ""
        )
    if verdict.status == Status.REJECTED:
        # Nothing ran: the settings (--nproc, --timeout) or the file are beyond this runner's limits, a
        # usage error like an oversized file or an unknown --mode (exit 2), not the snippet failing (1).
        return 2
    return 0 if verdict.status == Status.OK else 1


# What a terminal would act on instead of showing: C0 controls but newline and tab (ESC starts clear-screen,
# cursor moves and OSC 52 clipboard writes; CR rewrites a line), DEL, C1 controls (0x9b is a one-byte CSI),
# and the bidirectional overrides that reorder what is shown.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: object, multiline: bool = False) -> str:
    r"""``text`` made inert for a terminal: control characters shown as escapes (ESC as ``\x1b``).

    Single-line fields (notes, exception messages) also get their newlines escaped, so that nothing a job
    controls can start a line of the report, such as a fake ``status: ok``.
    """
    escaped = _UNSAFE.sub(_escape, str(text))
    return escaped if multiline else escaped.replace("\n", "\\n")


def render(verdict: Verdict) -> str:
    """A readable per-rank report; every string a job controls is escaped (see ``safe``)."""
    data: dict[str, Any] = verdict.to_dict()
    lines = [
        f"status: {data['status']}   mode: {data['mode']}   ranks: {data['nproc']}   "
        f"backend: {data['backend'] or '-'}   {data['elapsed_s']:.2f} s",
        f"sandbox: {data['sandbox']['engine']} (isolated: {str(data['sandbox']['isolated']).lower()})   "
        f"gpus: {data['hardware']['gpus']}   torch {safe(data['hardware']['torch'])}",
    ]
    if data["root_cause_rank"] is not None:
        lines.append(f"root cause: rank {data['root_cause_rank']}")
    lines += [f"note: {safe(note)}" for note in data["notes"]]
    for rank in data["ranks"]:
        head = f"--- rank {rank['rank']}: exit {rank['exit_code']}"
        if rank["signal"] is not None:
            head += f", signal {rank['signal']}"
        if rank["truncated"]:
            head += ", output truncated"
        lines.append(head)
        if rank["exception"]:
            exc = rank["exception"]
            lines.append(f"  exception: {safe(exc['type'])}: {safe(exc['message'])} (line {exc['line']})")
        if rank["stuck_at"]:
            stuck = rank["stuck_at"]
            lines.append(
                f"  stuck in {safe(stuck['call'])} at line {stuck['line']} ({safe(stuck['function'])})"
            )
            for child in stuck.get("children") or ():
                # Processes the rank started (mp.spawn workers), from dumps the job wrote: escaped too.
                lines.append(
                    f"    child pid {child['pid']}: stuck in {safe(child['call'])} at line {child['line']} "
                    f"({safe(child['function'])})"
                )
        for stream in ("stdout", "stderr"):
            if rank[stream]:
                lines.append(f"  {stream}:")
                # Indented under its header: a line of output can never pass for a line of the report.
                text = safe(rank[stream], multiline=True)
                lines += [f"    {line}" for line in text.rstrip("\n").split("\n")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    args = build_parser().parse_args(argv)
    try:
        configure_logs(args.log_format, getattr(logging, str(args.log_level).upper(), logging.INFO))
    except ValueError as exc:
        print(f"rankzero-runner: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        return serve(args)
    return run_file(args)


if __name__ == "__main__":
    sys.exit(main())
