"""The Kubernetes manifests in deploy/ (issue 17): loaded as YAML and checked field by field.

No cluster here: these checks read the manifests as data. Each runner Deployment's arguments go through
the runner's own argument parser, so a flag renamed in runner/cli.py breaks this test, not a rollout.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.cli import _is_loopback, _parse_pool, build_parser

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SHAPES = {"cpu": 0, "gpu-2": 2, "gpu-8": 8}


def _objects() -> list[dict[str, Any]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return found


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in _objects() if o["kind"] == kind]


def test_every_file_is_listed_in_the_kustomization() -> None:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    for obj in _objects():
        assert obj["apiVersion"] and obj["metadata"]["name"]
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "rankzero"


def test_one_deployment_and_one_service_per_gpu_shape() -> None:
    deployments = {d["metadata"]["labels"]["rankzero/shape"]: d for d in _of_kind("Deployment")}
    services = {s["metadata"]["labels"]["rankzero/shape"]: s for s in _of_kind("Service")}
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
    for deployment in _of_kind("Deployment"):
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
    for deployment in _of_kind("Deployment"):
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


def test_no_secret_ships_and_only_the_bot_reaches_the_runners() -> None:
    # An empty Secret in the manifests would blank the operator's real token on every apply: the token
    # comes from a file the operator writes, through kustomize's secretGenerator, and git ignores it.
    assert _of_kind("Secret") == []
    [generated] = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["secretGenerator"]
    assert generated["name"] == "rankzero-runner-token"
    assert generated["files"] == ["token=secrets/runner-token"]
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(DEPLOY / "secrets" / "runner-token")], cwd=DEPLOY, check=False
    )
    assert ignored.returncode == 0, "deploy/secrets/runner-token must be ignored by git"
    [policy] = _of_kind("NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "rankzero-runner"
    assert policy["spec"]["egress"] == [] and set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8765, "protocol": "TCP"}]


def test_runner_probes_are_http_on_the_unauthenticated_endpoints() -> None:
    # TCP probes passed while the event loop was stuck; /livez and /readyz need no token (runner/api.py).
    from runner.api import PROBES

    for deployment in _of_kind("Deployment"):
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
    done = subprocess.run(
        ["kubectl", "kustomize", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    built = [d for d in yaml.safe_load_all(done.stdout) if d]
    [secret] = [o for o in built if o["kind"] == "Secret"]
    assert secret["metadata"]["name"].startswith("rankzero-runner-token-")  # content hash: new token, rollout
    mounted = {
        v["secret"]["secretName"]
        for o in built
        if o["kind"] == "Deployment"
        for v in o["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    assert mounted == {secret["metadata"]["name"]}
    assert sorted((o["kind"], o["metadata"]["name"]) for o in built if o["kind"] != "Secret") == sorted(
        (o["kind"], o["metadata"]["name"]) for o in _objects()
    )
