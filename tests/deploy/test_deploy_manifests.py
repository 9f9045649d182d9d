"""The Kubernetes manifests in deploy/ (issues 17 and 26): loaded as YAML and checked field by field.

No cluster here: these checks read the manifests as data. Each runner Deployment's arguments go through
the runner's own argument parser, the bot's settings through Settings and its commands through the CLI, so
a flag or setting renamed in the code breaks this test, not a rollout. Every object is validated strictly
against Kubernetes' own schemas of two versions (kubernetes-validate, offline); `make deploy-check` adds
the rendered output and the checkov policy linter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.cli import _is_loopback, _parse_pool, build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SHAPES = {"cpu": 0, "gpu-2": 2, "gpu-8": 8}
#: The oldest and the newest Kubernetes the manifests are validated against (deploy/check.sh too).
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _kustomization(folder: Path = DEPLOY) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return loaded


def _objects(folder: Path = DEPLOY) -> list[dict[str, Any]]:
    """The objects of a kustomization's resources (the generated ConfigMap and Secrets aside)."""
    return [doc for name in _kustomization(folder)["resources"] for doc in _load(folder / name)]


def _of_kind(kind: str, folder: Path = DEPLOY) -> list[dict[str, Any]]:
    return [o for o in _objects(folder) if o["kind"] == kind]


def _named(kind: str, name: str, folder: Path = DEPLOY) -> dict[str, Any]:
    [found] = [o for o in _of_kind(kind, folder) if o["metadata"]["name"] == name]
    return found


def _runner_deployments() -> list[dict[str, Any]]:
    return [
        d
        for d in _of_kind("Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/name"] == "rankzero-runner"
    ]


def _is_manifest(path: Path) -> bool:
    """A Kubernetes object file (not the kustomization, nor a compose file that may sit beside them)."""
    return path.name != "kustomization.yaml" and all("apiVersion" in d and "kind" in d for d in _load(path))


def test_every_file_is_listed_in_the_kustomization() -> None:
    for folder in (DEPLOY, DEPLOY / "postgres"):
        listed = _kustomization(folder)["resources"]
        on_disk = sorted(p.name for p in folder.glob("*.yaml") if _is_manifest(p))
        assert sorted(listed) == on_disk
        for obj in _objects(folder):
            assert obj["apiVersion"] and obj["metadata"]["name"]
            if obj["kind"] != "Namespace":
                assert obj["metadata"]["namespace"] == "rankzero"


def test_one_deployment_and_one_service_per_gpu_shape() -> None:
    deployments = {d["metadata"]["labels"]["rankzero/shape"]: d for d in _runner_deployments()}
    services = {
        s["metadata"]["labels"]["rankzero/shape"]: s
        for s in _of_kind("Service")
        if "rankzero/shape" in s["metadata"]["labels"]
    }
    assert set(deployments) == set(services) == set(SHAPES)
    for shape, gpus in SHAPES.items():
        deployment, service = deployments[shape], services[shape]
        pod = deployment["spec"]["template"]
        labels = pod["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert service["spec"]["selector"].items() <= labels.items()  # the Service reaches these pods
        [container] = pod["spec"]["containers"]
        [port] = container["ports"]
        [service_port] = service["spec"]["ports"]
        assert service_port["targetPort"] in (port["name"], port["containerPort"])
        limits = container["resources"]["limits"]
        if gpus:
            assert limits["nvidia.com/gpu"] == gpus
            # Privileged pods see every GPU of the node: the node must have exactly this many.
            assert pod["spec"]["nodeSelector"]["nvidia.com/gpu.count"] == str(gpus)
            assert deployment["spec"]["strategy"]["type"] == "Recreate"
        else:
            assert "nvidia.com/gpu" not in limits and "nodeSelector" not in pod["spec"]
        assert container["resources"]["requests"]["memory"] == limits["memory"]


def test_the_runner_arguments_parse_and_need_the_token_file() -> None:
    for deployment in _runner_deployments():
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["command"] == ["rankzero-runner"]
        args = build_parser().parse_args(container["args"])  # the runner's own parser
        assert args.command == "serve" and not args.unsafe_no_sandbox
        assert args.test_advertise_gpus is None  # the test-only shape never reaches a cluster
        assert not _is_loopback(args.host) and args.port == container["ports"][0]["containerPort"]
        assert max(_parse_pool(args.pool)) <= 8 and args.max_concurrent >= 1
        # The token comes from the Secret as a file, never inline.
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        token_mount = next(m for m in mounts.values() if str(args.token_file).startswith(m["mountPath"]))
        assert token_mount["readOnly"] is True
        secret = volumes[token_mount["name"]]["secret"]
        assert secret["secretName"] == "rankzero-runner-token"
        assert "env" not in container or all("TOKEN" not in e["name"] for e in container["env"])
        assert pod["automountServiceAccountToken"] is False


def test_the_privileges_bubblewrap_and_the_per_job_uids_need() -> None:
    for deployment in _runner_deployments():
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        security = container["securityContext"]
        # Root (per-job uid pairs, cgroups) in a privileged container (new /proc mounts, namespaces).
        assert security["privileged"] is True and security["runAsUser"] == 0
        assert security["readOnlyRootFilesystem"] is True
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        # Writable scratch where the root filesystem is read-only; the uid locks shared by the node.
        assert "emptyDir" in volumes[mounts["/tmp"]] and "emptyDir" in volumes[mounts["/run"]]
        assert volumes[mounts["/run/rankzero-uids"]]["hostPath"]["path"] == "/run/rankzero-uids"


def _secret_names(pod: dict[str, Any]) -> set[str]:
    """Every Secret a pod template refers to: volumes, envFrom and env valueFrom."""
    names = {v["secret"]["secretName"] for v in pod["spec"].get("volumes", []) if "secret" in v}
    for container in pod["spec"]["containers"]:
        names |= {e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e}
        names |= {
            e["valueFrom"]["secretKeyRef"]["name"]
            for e in container.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})
        }
    return names


def _workloads(folder: Path = DEPLOY) -> list[dict[str, Any]]:
    return [o for o in _objects(folder) if o["kind"] in ("Deployment", "StatefulSet", "Job")]


def test_no_secret_ships_every_one_is_generated_from_an_ignored_file() -> None:
    # An empty Secret in the manifests would blank the operator's real one on every apply: each comes from
    # a file the operator writes, through kustomize's secretGenerator, and git ignores it (a missing file
    # stops `kubectl apply -k` before anything is applied).
    for folder in (DEPLOY, DEPLOY / "postgres"):
        assert _of_kind("Secret", folder) == []
        generated = {g["name"]: g for g in _kustomization(folder)["secretGenerator"]}
        for generator in generated.values():
            sources = [f.split("=", 1)[-1] for f in generator.get("files", [])] + generator.get("envs", [])
            assert sources and all(src.startswith("secrets/") for src in sources)
            for src in sources:
                ignored = subprocess.run(
                    ["git", "check-ignore", "-q", str(folder / src)], cwd=DEPLOY, check=False
                )
                assert ignored.returncode == 0, f"{folder / src} must be ignored by git"
        # Every Secret a workload uses is one of these (none is expected to exist already).
        used = set().union(*(_secret_names(w["spec"]["template"]) for w in _workloads(folder)))
        assert used == set(generated), (used, set(generated))
    [runner_token] = [g for g in _kustomization()["secretGenerator"] if g["name"] == "rankzero-runner-token"]
    assert runner_token["files"] == ["token=secrets/runner-token"]
    # The migration Job gets the database URL and nothing else.
    migrate = _named("Job", "rankzero-migrate")
    assert _secret_names(migrate["spec"]["template"]) == {"rankzero-database"}


def _policy(name: str, folder: Path = DEPLOY) -> dict[str, Any]:
    return _named("NetworkPolicy", name, folder)


def _peers(rules: list[dict[str, Any]], direction: str) -> list[tuple[str, list[int]]]:
    """(who, ports) per rule: a pod's app name, "namespace:<name>", "ipBlock:<cidr>" or "anyone"."""
    found = []
    for rule in rules:
        ports = sorted(p["port"] for p in rule.get("ports", []))
        for peer in rule.get(direction) or [{}]:
            if "podSelector" in peer and "namespaceSelector" not in peer:
                who = peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
            elif "namespaceSelector" in peer:
                labels = peer["namespaceSelector"].get("matchLabels", {})
                who = f"namespace:{labels.get('kubernetes.io/metadata.name', '*')}"
            elif "ipBlock" in peer:
                who = f"ipBlock:{peer['ipBlock']['cidr']}"
            else:
                who = "anyone"
            found.append((who, ports))
    return found


def test_network_policies_bot_to_postgres_runners_and_chat_apis_only() -> None:
    deny = _policy("rankzero-default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}

    runner = _policy("rankzero-runner")
    assert runner["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "rankzero-runner"
    assert runner["spec"]["egress"] == [] and set(runner["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert _peers(runner["spec"]["ingress"], "from") == [("rankzero-bot", [8765])]  # only the bot

    bot = _policy("rankzero-bot")["spec"]
    assert set(bot["policyTypes"]) == {"Ingress", "Egress"}
    assert _peers(bot["ingress"], "from") == [("anyone", [3000]), ("namespace:*", [8787])]
    egress = _peers(bot["egress"], "to")
    assert ("namespace:kube-system", [53, 53]) in egress
    assert ("rankzero-postgres", [5432]) in egress and ("rankzero-runner", [8765]) in egress
    # The internet for the chat APIs: 443 only, private ranges excluded.
    public = [(who, ports) for who, ports in egress if who.startswith("ipBlock:")]
    assert public == [("ipBlock:0.0.0.0/0", [443]), ("ipBlock:::/0", [443])]
    v4 = next(r for r in bot["egress"] if any("ipBlock" in t for t in r["to"]))["to"][0]["ipBlock"]
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} <= set(v4["except"])
    assert len(egress) == 5, egress

    migrate = _policy("rankzero-migrate")["spec"]
    assert migrate["ingress"] == [] and ("rankzero-postgres", [5432]) in _peers(migrate["egress"], "to")

    postgres = _policy("rankzero-postgres", DEPLOY / "postgres")["spec"]
    assert postgres["egress"] == []
    assert _peers(postgres["ingress"], "from") == [("rankzero-bot", [5432]), ("rankzero-migrate", [5432])]
    # The policies select what the workloads are labelled.
    labels = {
        w["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
        for folder in (DEPLOY, DEPLOY / "postgres")
        for w in _workloads(folder)
    }
    assert labels == {"rankzero-bot", "rankzero-migrate", "rankzero-runner", "rankzero-postgres"}


def _bot() -> dict[str, Any]:
    return _named("StatefulSet", "rankzero-bot")


def _bot_env(hostname: str) -> dict[str, str]:
    """The bot container's environment as the cluster gives it (the ConfigMap, then the literal env)."""
    [config] = [g for g in _kustomization()["configMapGenerator"] if g["name"] == "rankzero-bot-config"]
    env = dict(literal.split("=", 1) for literal in config["literals"])
    [container] = _bot()["spec"]["template"]["spec"]["containers"]
    env |= {e["name"]: e["value"] for e in container["env"] if "value" in e}
    env["HOSTNAME"] = hostname
    return env


def test_the_bot_runs_one_discord_shard_per_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.config import Settings
    from bot.core.sharding import ShardSet

    bot = _bot()
    replicas = bot["spec"]["replicas"]
    assert bot["spec"]["podManagementPolicy"] == "Parallel"
    [container] = bot["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    # The shard count is the replica count: scale both together.
    assert int(env["RANKZERO_DISCORD_SHARD_COUNT"]["value"]) == replicas
    index = env["RANKZERO_DISCORD_SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.labels['apps.kubernetes.io/pod-index']"
    # The settings as each pod reads them: pod N runs shard N of `replicas` (pod-index label absent: the
    # hostname's ordinal), Slack and the health endpoint on the pod's address.
    for ordinal in range(replicas):
        monkeypatch.setattr("socket.gethostname", lambda o=ordinal: f"rankzero-bot-{o}")
        for name in list(os.environ):
            if name.startswith("RANKZERO_"):
                monkeypatch.delenv(name)
        for name, value in _bot_env(f"rankzero-bot-{ordinal}").items():
            monkeypatch.setenv(name, value)
        settings = Settings(database_url="postgresql+asyncpg://u:p@db:5432/rankzero")
        assert settings.discord_shard_set == ShardSet((ordinal,), replicas)
        assert settings.health_host == "0.0.0.0" and settings.slack_host == "0.0.0.0"
        assert settings.web_host == "0.0.0.0"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {
            "health": settings.health_port,
            "slack": settings.slack_port,
            "web": settings.web_port,
        }
        assert settings.runner_url is not None
        assert sorted(settings.runner_url.split(",")) == sorted(
            f"http://rankzero-runner-{shape}.rankzero.svc:8765" for shape in SHAPES
        )


def test_the_bot_command_probes_and_services() -> None:
    import click

    from bot.cli.root import main
    from bot.serve import REPORT_PATHS

    bot = _bot()
    pod = bot["spec"]["template"]
    [container] = pod["spec"]["containers"]
    with click.Context(main) as ctx:
        assert (
            container["command"] == ["rankzero"] and main.get_command(ctx, container["args"][0]) is not None
        )
    # Liveness only asks the event loop (an outage of Discord or the database never restarts the pod);
    # readiness is the whole report.
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["startupProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] in REPORT_PATHS
    # Slack over every bot pod; the governing Service of the StatefulSet is headless.
    slack = _named("Service", "rankzero-slack")
    assert slack["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert [p["targetPort"] for p in slack["spec"]["ports"]] == ["slack"]
    governing = _named("Service", bot["spec"]["serviceName"])
    assert governing["spec"]["clusterIP"] == "None"
    # The migration Job runs a real command of the CLI: `rankzero db upgrade`.
    [migrate] = _named("Job", "rankzero-migrate")["spec"]["template"]["spec"]["containers"]
    with click.Context(main) as ctx:
        db = main.get_command(ctx, migrate["args"][0])
        assert isinstance(db, click.Group) and db.get_command(ctx, migrate["args"][1]) is not None
    assert migrate["args"] == ["db", "upgrade"] and migrate["image"] == container["image"]


def test_every_workload_is_bounded_and_the_bot_is_unprivileged() -> None:
    for folder in (DEPLOY, DEPLOY / "postgres"):
        for workload in _workloads(folder):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                resources = container["resources"]
                assert {"cpu", "memory"} <= resources["requests"].keys() & resources["limits"].keys()
                assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert workload["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    for workload in (_bot(), _named("Job", "rankzero-migrate")):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        [container] = pod["containers"]
        security = container["securityContext"]
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["allowPrivilegeEscalation"] is False and "privileged" not in security
        # Writable scratch where the root filesystem is read-only.
        assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


def test_disruption_budgets_select_the_pods_they_protect() -> None:
    budgets = {b["metadata"]["name"]: b["spec"] for b in _of_kind("PodDisruptionBudget")}
    assert budgets["rankzero-bot"]["maxUnavailable"] == 1  # one shard at a time
    assert budgets["rankzero-runner-cpu"]["minAvailable"] == 1
    pods = [w["spec"]["template"]["metadata"]["labels"] for w in _workloads()]
    for spec in budgets.values():
        selector = spec["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in pods)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_for_kubernetes(version: str) -> None:
    # Strict: an unknown or misplaced field (a typo, a field of a newer release) fails, as the API server's
    # strict field validation would. Offline: kubernetes-validate ships the schemas.
    validate = pytest.importorskip("kubernetes_validate")
    objects = _objects() + _objects(DEPLOY / "postgres")
    objects += [o for path in sorted((DEPLOY / "examples").glob("*.yaml")) for o in _load(path)]
    assert {o["kind"] for o in objects} >= {"StatefulSet", "Deployment", "Job", "NetworkPolicy", "Ingress"}
    for obj in objects:
        validate.validate(obj, version, strict=True)


def test_the_validator_refuses_a_misplaced_field() -> None:
    validate = pytest.importorskip("kubernetes_validate")
    bot = _bot()
    bot["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True  # the wrong case
    with pytest.raises(validate.ValidationError, match="readOnlyRootFileSystem"):
        validate.validate(bot, KUBERNETES_VERSIONS[0], strict=True)


def test_runner_probes_are_http_on_the_unauthenticated_endpoints() -> None:
    # TCP probes passed while the event loop was stuck; /livez and /readyz need no token (runner/api.py).
    from runner.api import PROBES

    for deployment in _runner_deployments():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        paths = {
            kind: container[kind]["httpGet"]["path"]
            for kind in ("startupProbe", "readinessProbe", "livenessProbe")
        }
        assert paths == {"startupProbe": "/readyz", "readinessProbe": "/readyz", "livenessProbe": "/livez"}
        assert set(paths.values()) <= PROBES
        assert all(container[kind]["httpGet"]["port"] == "http" for kind in paths)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_manifests(tmp_path: Path) -> None:
    # As an operator would: a copy of deploy/ with the token file written.
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    (copy / "secrets" / "runner-token").write_text("a-token-for-this-test")
    (copy / "secrets" / "database.env").write_text(
        "RANKZERO_DATABASE_URL=postgresql+asyncpg://u:p@db/rankzero\n"
    )
    (copy / "secrets" / "bot.env").write_text("RANKZERO_DISCORD_TOKEN=a-token-for-this-test\n")
    done = subprocess.run(
        ["kubectl", "kustomize", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    built = [d for d in yaml.safe_load_all(done.stdout) if d]
    secrets = {o["metadata"]["name"] for o in built if o["kind"] == "Secret"}
    [token] = [name for name in secrets if name.startswith("rankzero-runner-token-")]  # content hash: rollout
    assert {name.rsplit("-", 1)[0] for name in secrets} == {
        "rankzero-runner-token",
        "rankzero-database",
        "rankzero-bot",
    }
    mounted = {
        v["secret"]["secretName"]
        for o in built
        if o["kind"] == "Deployment"
        for v in o["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    assert mounted == {token}
    # Every reference to a generated Secret or ConfigMap was rewritten to its hashed name.
    configs = {o["metadata"]["name"] for o in built if o["kind"] == "ConfigMap"}
    for workload in (o for o in built if o["kind"] in ("StatefulSet", "Job", "Deployment")):
        assert _secret_names(workload["spec"]["template"]) <= secrets
        for container in workload["spec"]["template"]["spec"]["containers"]:
            assert {
                e["configMapRef"]["name"] for e in container.get("envFrom", []) if "configMapRef" in e
            } <= configs
    generated = ("Secret", "ConfigMap")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in built if o["kind"] not in generated) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in _objects()
    )
