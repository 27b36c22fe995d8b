"""The foundation against the real API server: CRDs, schema refusals, printer columns, workloads."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import DATA, Cluster

pytestmark = pytest.mark.cluster

EXAMPLES = sorted((DATA / "examples").rglob("*.yaml"))
INVALID = sorted((DATA / "invalid").rglob("*.yaml"))


def _namespace(cluster: Cluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name, check=True)
    return name


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 10, EXAMPLES


def _ensure_namespaces(cluster: Cluster, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        ns = (doc or {}).get("metadata", {}).get("namespace")
        if ns and cluster.kubectl("get", "namespace", ns).returncode != 0:
            cluster.kubectl("create", "namespace", ns, check=True)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(DATA)))
def test_example_policy_is_accepted_by_the_api_server(cluster: Cluster, path: Path) -> None:
    _ensure_namespaces(cluster, path)
    proc = cluster.kubectl("apply", "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    # What the server stored is what we wrote: nothing was pruned as unknown.
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        kind, name = doc["kind"], doc["metadata"]["name"]
        ns = doc["metadata"].get("namespace", "default")
        got = cluster.kubectl("get", "-n", ns, f"{kind}.policy.kcloudlabs.io", name, "-o", "yaml", check=True)
        stored = yaml.safe_load(got.stdout)
        assert _subset(doc["spec"], stored["spec"]), f"{path}: server pruned or changed fields"
        cluster.kubectl("delete", "-n", ns, f"{kind}.policy.kcloudlabs.io", name, check=True)


def _subset(want: object, have: object) -> bool:
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_subset, want, have))
    return want == have


def _expected_field(path: Path) -> str:
    match = re.search(r"^# must-name: (\S+)", path.read_text(), re.MULTILINE)
    assert match, f"{path} must say which field the server names (# must-name: ...)"
    return match.group(1)


def test_invalid_cases_exist() -> None:
    assert len(INVALID) >= 4, INVALID


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_schema_refuses_invalid_policy_naming_the_field(cluster: Cluster, path: Path) -> None:
    # --validate=false: the API server itself must refuse, not kubectl's client-side check.
    proc = cluster.kubectl("apply", "--validate=false", "-n", "default", "-f", str(path))
    assert proc.returncode != 0, f"{path.name} was accepted"
    # Kubernetes 1.20 names the field without list indexes: spec.overrideRules.overriders.type.
    assert re.sub(r"\[\d+\]", "", _expected_field(path)) in proc.stderr, proc.stderr


def test_printer_columns_and_category(cluster: Cluster) -> None:
    for path in EXAMPLES:
        _ensure_namespaces(cluster, path)
        cluster.kubectl("apply", "-f", str(path), check=True)
    out = cluster.kubectl("get", "op,cop,cvp,vp", "-A", check=True).stdout
    headers = [line for line in out.splitlines() if line.startswith(("NAME ", "NAMESPACE "))]
    assert len(headers) == 4, out
    for header in headers:
        assert header.split() in (["NAME", "READY", "RULES", "AGE"], ["NAMESPACE", "NAME", "READY", "RULES", "AGE"])
    listed = cluster.kubectl("get", "kinitiras", "-A", "-o", "name", check=True).stdout.split()
    kinds = {item.split("/")[0].split(".")[0] for item in listed}
    assert kinds == {"overridepolicy", "clusteroverridepolicy", "clustervalidatepolicy", "validatepolicy"}
    for path in EXAMPLES:
        cluster.kubectl("delete", "-f", str(path), "--wait=false", check=True)


def test_deployment_yields_replicaset_and_pods(cluster: Cluster) -> None:
    ns = _namespace(cluster)
    cluster.kubectl("create", "deployment", "web", "-n", ns, "--image=nginx:1.25", "--replicas=2", check=True)
    deadline = time.monotonic() + 60
    pods: list[str] = []
    while time.monotonic() < deadline:
        pods = cluster.kubectl("get", "pods", "-n", ns, "-l", "app=web", "-o", "name").stdout.split()
        if len(pods) == 2:
            break
        time.sleep(0.5)
    assert len(pods) == 2, cluster.kubectl("get", "all,events", "-n", ns).stdout
    rs = cluster.kubectl("get", "replicasets", "-n", ns, "-o", "name", check=True).stdout.split()
    assert len(rs) == 1
