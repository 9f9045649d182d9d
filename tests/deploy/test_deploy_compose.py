"""The images' Containerfiles, their locks, compose.yaml and `make deploy-env` (issue 26), read as data.

Building and starting the images takes minutes and root (`make images images-smoke`, deploy/smoke.py);
these checks are the cheap half: compose.yaml against the Compose Specification's JSON schema (the copy
check-jsonschema ships), every name it uses against the settings and the command lines it starts, every
file a Containerfile copies or installs, and the .env writer run for real.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml
from cryptography.fernet import Fernet

from bot.cli import main as rankzero_main
from bot.config import Settings
from runner.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MAKE_ENV = DEPLOY / "make_env.py"
CONTAINERFILES = {
    "bot": "requirements/lock-bot.txt",
    "runner-cpu": "requirements/lock-runner.txt",
    "runner-cuda": "requirements/lock-cuda.txt",
}


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def _instructions(name: str) -> list[tuple[str, str]]:
    """A Containerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    text = (DEPLOY / f"{name}.Containerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def _locked(path: str) -> dict[str, str]:
    """name -> version of every pin in a lock file."""
    pins = {}
    for line in (ROOT / path).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


# --- compose.yaml ---


def _schema_errors(document: dict[str, Any]) -> list[str]:
    """What the Compose Specification's schema (the copy check-jsonschema ships) finds wrong."""
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads(vendor.joinpath("compose-spec.json").read_text())
    validator_class = jsonschema.validators.validator_for(schema)  # the draft the schema names
    validator_class.check_schema(schema)
    errors = validator_class(schema).iter_errors(document)
    return [f"{list(e.path)}: {e.message}" for e in sorted(errors, key=lambda e: list(e.path))]


def test_compose_file_follows_the_compose_specification() -> None:
    errors = _schema_errors(_compose())
    assert not errors, "\n".join(errors)


def test_the_schema_check_catches_a_misspelled_key() -> None:
    # The schema is strict (no unknown keys): the check above can fail.
    broken = _compose()
    broken["services"]["bot"]["helthcheck"] = broken["services"]["bot"].pop("healthcheck")
    assert any("helthcheck" in error for error in _schema_errors(broken))


def test_the_stack_is_postgres_migrations_once_bot_and_a_cpu_runner() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "migrate", "bot", "runner"}
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["bot"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ("postgres", "bot", "runner"):
        assert services[name]["healthcheck"]["test"], name
        assert services[name]["restart"] == "unless-stopped", name
    # The database's files, and the bot's data folder (its HOME), are in named volumes.
    for name, mount in (("postgres", "/var/lib/postgresql/data"), ("bot", "/var/lib/rankzero")):
        [volume] = services[name]["volumes"]
        source, target = volume.split(":")
        assert source in _compose()["volumes"] and target == mount, name
    # The runner is reached over the project's network only.
    assert "ports" not in services["runner"]
    assert services["bot"]["environment"]["RANKZERO_RUNNER_URL"] == "http://runner:8765"


def test_the_commands_compose_starts_exist() -> None:
    services = _compose()["services"]
    for name in ("migrate", "bot"):
        words = services[name]["command"]
        ctx = click.Context(rankzero_main)
        command: click.Command | None = rankzero_main
        for word in words:
            if not isinstance(command, click.Group):
                break
            command = command.get_command(ctx, word)
            assert command is not None, f"{name}: `rankzero {' '.join(words)}`: no command {word!r}"
    args = build_parser().parse_args(services["runner"]["command"])
    assert (args.command, args.host, args.port) == ("serve", "0.0.0.0", 8765)


def test_every_bot_variable_is_a_setting() -> None:
    # A misspelled RANKZERO_ name would be ignored silently (extra="ignore"): check each one.
    fields = set(Settings.model_fields)
    for name in ("migrate", "bot"):
        for variable in _compose()["services"][name]["environment"]:
            assert variable.startswith("RANKZERO_"), variable
            assert variable.removeprefix("RANKZERO_").lower() in fields, f"{name}: {variable} is no setting"


def test_every_variable_compose_interpolates_is_written_by_deploy_env() -> None:
    text = (ROOT / "compose.yaml").read_text()
    used = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))
    written = set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", _template(), flags=re.MULTILINE))
    assert used == written
    # The ones compose cannot start without are the generated ones.
    required = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*):\?", text))
    assert required == {"POSTGRES_PASSWORD", "RUNNER_TOKEN", "SECRET_KEY"}


def test_compose_builds_the_images_from_their_containerfiles() -> None:
    services = _compose()["services"]
    for name, containerfile in (("bot", "bot"), ("migrate", "bot"), ("runner", "runner-cpu")):
        build = services[name]["build"]
        assert build["dockerfile"] == f"deploy/{containerfile}.Containerfile"
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()
    images = (DEPLOY / "images.sh").read_text()
    assert f"build bot {services['bot']['image']}" in images
    assert f"build runner-cpu {services['runner']['image']} " in images


# --- the Containerfiles ---


@pytest.mark.parametrize("name", sorted(CONTAINERFILES))
def test_containerfile_copies_what_exists_and_installs_its_lock(name: str) -> None:
    steps = _instructions(name)
    assert steps[0] == ("ARG", "BASE_IMAGE=docker.io/library/python:3.11-slim")
    assert [rest for keyword, rest in steps if keyword == "FROM"] == [
        "${BASE_IMAGE} AS build",
        "${BASE_IMAGE}",
    ]
    ignored = (ROOT / ".containerignore").read_text()
    for keyword, rest in steps:
        if keyword == "COPY" and not rest.startswith("--from"):
            *sources, _ = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"{name}: COPY {source}: no such file"
                assert f"!{source.split('/')[0]}" in ignored, f"{name}: {source} is outside the context"
    installs = " ".join(rest for keyword, rest in steps if keyword == "RUN")
    lock = CONTAINERFILES[name]
    assert f"--require-hashes --no-deps -r /src/{lock}" in installs
    assert "--hash=sha256:" in (ROOT / lock).read_text()


def test_containerignore_and_dockerignore_agree() -> None:
    assert (ROOT / ".containerignore").read_text() == (ROOT / ".dockerignore").read_text()


def test_entrypoints_are_the_projects_scripts() -> None:
    scripts = {"rankzero", "rankzero-runner"}
    for name in CONTAINERFILES:
        [entrypoint] = [rest for keyword, rest in _instructions(name) if keyword == "ENTRYPOINT"]
        assert json.loads(entrypoint)[0] in scripts
    [cmd] = [rest for keyword, rest in _instructions("runner-cpu") if keyword == "CMD"]
    args = build_parser().parse_args(json.loads(cmd))
    assert (args.command, args.host) == ("serve", "0.0.0.0")


def test_bot_image_is_non_root_and_listens_for_probes() -> None:
    steps = _instructions("bot")
    [user] = [rest for keyword, rest in steps if keyword == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit()  # numeric: runAsNonRoot can check it
    env = " ".join(rest for keyword, rest in steps if keyword == "ENV")
    assert "RANKZERO_HEALTH_HOST=0.0.0.0" in env
    # The runners need bubblewrap and libseccomp; the bot installs no system package at all.
    assert not any("apt-get" in rest for keyword, rest in steps if keyword == "RUN")
    for runner in ("runner-cpu", "runner-cuda"):
        runs = " ".join(rest for keyword, rest in _instructions(runner) if keyword == "RUN")
        assert "bubblewrap libseccomp2" in runs


def test_the_locks_carry_the_right_torch_and_agree_with_ci() -> None:
    ci = _locked("requirements/lock.txt")
    bot = _locked("requirements/lock-bot.txt")
    cpu = _locked("requirements/lock-runner.txt")
    cuda = _locked("requirements/lock-cuda.txt")
    dev_tools = {"pytest", "mypy", "ruff", "hypothesis", "pip-tools", "import-linter"}
    assert "torch" not in bot and not dev_tools & set(bot)
    assert cpu["torch"].endswith("+cpu") and not dev_tools & set(cpu)
    assert cuda["torch"] == ci["torch"].removesuffix("+cpu")
    assert any(name.startswith("nvidia-") for name in cuda)
    # Every package the images share with CI's lock is at the version CI tested.
    for lock in (bot, cpu, cuda):
        for package, version in lock.items():
            if package in ci and package != "torch":
                assert version == ci[package], package


# --- make deploy-env ---


def _template() -> str:
    text = MAKE_ENV.read_text()
    start = text.index('TEMPLATE = """')
    return text[start : text.index('"""\n', start + 15)]


def _make_env(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MAKE_ENV), str(path)], capture_output=True, text=True, check=False
    )


def _values(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name] = value
    return values


def test_deploy_env_writes_fresh_secrets_readable_by_its_owner_only(tmp_path: Path) -> None:
    first, second = tmp_path / "a.env", tmp_path / "b.env"
    assert _make_env(first).returncode == 0
    assert _make_env(second).returncode == 0
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600
    a, b = _values(first), _values(second)
    for name in ("POSTGRES_PASSWORD", "RUNNER_TOKEN", "SECRET_KEY"):
        assert len(a[name]) >= 40 and a[name] != b[name], name
    Fernet(a["SECRET_KEY"].encode())  # raises on a malformed key
    # The password goes into a URL unescaped.
    assert re.fullmatch(r"[A-Za-z0-9_-]+", a["POSTGRES_PASSWORD"])
    assert a["DISCORD_TOKEN"] == a["SLACK_BOT_TOKEN"] == ""
    # No RANKZERO_ names: a `rankzero` run in the same folder reads .env, and must not take these.
    assert not any(name.startswith("RANKZERO_") for name in a)


def test_deploy_env_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    assert _make_env(path).returncode == 0
    path.write_text(path.read_text().replace("DISCORD_TOKEN=", "DISCORD_TOKEN=mine"))
    before = path.read_bytes()
    done = _make_env(path)
    assert done.returncode == 0 and "left as it is" in done.stdout
    assert path.read_bytes() == before
    # A file that lacks a generated secret is named, and still left alone.
    path.write_text("DISCORD_TOKEN=mine\n")
    done = _make_env(path)
    assert done.returncode == 1
    assert "lacks POSTGRES_PASSWORD, RUNNER_TOKEN, SECRET_KEY" in done.stderr
    assert path.read_text() == "DISCORD_TOKEN=mine\n"


def test_settings_ignore_the_deploy_env_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make deploy-env` writes .env in the repository root, where developers run `rankzero` too.
    assert _make_env(tmp_path / ".env").returncode == 0
    (tmp_path / ".env").write_text(
        (tmp_path / ".env").read_text().replace("DISCORD_TOKEN=", "DISCORD_TOKEN=x")
    )
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("RANKZERO_"):
            monkeypatch.delenv(name)
    settings = Settings()
    assert settings.discord_token is None and settings.secret_key is None and settings.runner_token is None


# --- the CUDA lock's writer (deploy/lock_from_report.py) ---


def _report_item(name: str, version: str, sha: str | None) -> dict[str, Any]:
    archive = {"hashes": {"sha256": sha}} if sha else {}
    return {
        "metadata": {"name": name, "version": version},
        "download_info": {"url": f"https://files.example/{name}-{version}.whl", "archive_info": archive},
    }


def _lock_from_report(tmp_path: Path, items: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"install": items}))
    return subprocess.run(
        [sys.executable, str(DEPLOY / "lock_from_report.py"), str(report)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_lock_from_report_pins_each_file_by_hash_in_pip_compile_names(tmp_path: Path) -> None:
    done = _lock_from_report(
        tmp_path,
        [
            _report_item("torch", "2.13.0", "a" * 64),
            _report_item("discord.py", "2.7.1", "b" * 64),
            _report_item("rankzero", "0.1.0", None),  # the project itself: installed from source
        ],
    )
    assert done.returncode == 0, done.stderr
    body = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    assert body == [
        "discord-py==2.7.1 \\",
        f"    --hash=sha256:{'b' * 64}",
        "torch==2.13.0 \\",
        f"    --hash=sha256:{'a' * 64}",
    ]


def test_lock_from_report_refuses_a_file_without_a_hash(tmp_path: Path) -> None:
    done = _lock_from_report(tmp_path, [_report_item("numpy", "2.4.6", None)])
    assert done.returncode == 1
    assert "numpy 2.4.6 has no sha256" in done.stderr
