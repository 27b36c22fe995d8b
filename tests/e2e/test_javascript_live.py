"""JavaScript rules on live requests: js-admissions-controller's README examples (examples/javascript/)
as converted JsAdmissions and as our policies, the sandbox's limits, and a script refused at admission."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok

pytestmark = pytest.mark.cluster

EXAMPLES = ROOT / "examples" / "javascript"
SHORT = {"ClusterOverridePolicy": "cop", "ClusterValidatePolicy": "cvp"}


def policy_text(path: Path) -> str:
    """The policies of an example file: ours as written, a JsAdmission through `kinitiras-py convert`."""
    if "momiji.com" not in path.read_text():
        return path.read_text()
    proc = subprocess.run([sys.executable, "-m", "kinitiras_py", "convert", str(path)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def in_force(cluster: Cluster, path: Path) -> Iterator[None]:
    """Apply an example's policies, wait until the webhook has them, remove them afterwards."""
    text = policy_text(path)
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    try:
        for doc in docs:
            rules = len(doc["spec"].get("overrideRules") or doc["spec"].get("validateRules"))
            apply_policy(cluster, json.dumps(doc), SHORT[doc["kind"]], doc["metadata"]["name"], rules)
        yield
    finally:
        for doc in docs:
            cluster.kubectl("delete", SHORT[doc["kind"]], doc["metadata"]["name"], "--ignore-not-found")


def create(cluster: Cluster, obj: dict[str, Any], namespace: str) -> subprocess.CompletedProcess[str]:
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    return cluster.kubectl("create", "-f", "-", input=json.dumps(obj))


def examples(path: Path) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(path.read_text())}


FORMS = ["jsadmission.yaml", "policy.yaml"]


@pytest.mark.parametrize("form", FORMS)
def test_date_annotation(cluster: Cluster, webhook: Webhook, namespace: str, form: str) -> None:
    pod = yaml.safe_load((EXAMPLES / "date-annotation" / "pod.yaml").read_text())
    for _ in in_force(cluster, EXAMPLES / "date-annotation" / form):
        proc = create(cluster, pod, namespace)
        assert proc.returncode == 0, proc.stderr
        created = get_json(cluster, "pod", pod["metadata"]["name"], namespace)
        stamp = created["metadata"]["annotations"]["jsadmissions/date"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
        # An update is not a CREATE: the date stays as it was.
        kubectl_ok(cluster, "label", "pod", pod["metadata"]["name"], "-n", namespace, "touched=yes")
        after = get_json(cluster, "pod", pod["metadata"]["name"], namespace)
        assert after["metadata"]["annotations"]["jsadmissions/date"] == stamp
        assert after["metadata"]["labels"] == {"touched": "yes"}


@pytest.mark.parametrize("form", FORMS)
def test_sas_workload_class(cluster: Cluster, webhook: Webhook, namespace: str, form: str) -> None:
    pods = examples(EXAMPLES / "sas-workload-class" / "pods.yaml")
    for _ in in_force(cluster, EXAMPLES / "sas-workload-class" / form):
        for name, workload in (("cas-worker", "cas"), ("compute-server", "compute"), ("plain", "stateless"),
                               ("stateful-service", "stateful"), ("crunchy-db", "stateless")):
            proc = create(cluster, pods[name], namespace)
            assert proc.returncode == 0, (name, proc.stderr)
            created = get_json(cluster, "pod", name, namespace)
            assert created["metadata"]["labels"]["workload.sas.com/jsa-class"] == workload
            assert created["spec"]["nodeSelector"][f"workload.sas.com/{workload}"] == "yes"
        worker = get_json(cluster, "pod", "cas-worker", namespace)["spec"]["containers"][0]["resources"]
        assert worker == {"limits": {"cpu": "6", "memory": "32Gi"}, "requests": {"cpu": "1", "memory": "24Gi"}}
        command = get_json(cluster, "pod", "crunchy-db", namespace)["spec"]["containers"][0]["command"]
        assert command == ["/bin/bash", "-ceEx", "ulimit -c 0 ; ulimit -a ; patroni /etc/patroni"]
        proc = create(cluster, pods["crunchy-db-changed"], namespace)
        assert proc.returncode != 0
        assert "ClusterOverridePolicy sas-workload-class" in proc.stderr
        assert "unexpected command in the crunchy database container" in proc.stderr
        assert cluster.kubectl("get", "pod", "crunchy-db-changed", "-n", namespace).returncode != 0


@pytest.fixture
def default_namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace whose name the pod-limit example watches (default-*)."""
    name = f"default-e2e-{uuid.uuid4().hex[:8]}"
    kubectl_ok(cluster, "create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.mark.parametrize("form", FORMS)
def test_pod_limit(cluster: Cluster, webhook: Webhook, namespace: str, default_namespace: str, form: str) -> None:
    deployments = examples(EXAMPLES / "pod-limit" / "deployments.yaml")
    for _ in in_force(cluster, EXAMPLES / "pod-limit" / form):
        assert create(cluster, deployments["small"], default_namespace).returncode == 0
        assert create(cluster, deployments["huge-elsewhere"], namespace).returncode == 0
        proc = create(cluster, deployments["huge"], default_namespace)
        assert proc.returncode != 0
        assert "Deployment huge asks for 50 pods; at most 40 may run in the default namespaces" in proc.stderr
        # An UPDATE of the Deployment itself (kubectl scale goes through the scale subresource instead).
        grown = cluster.kubectl("patch", "deployment", "small", "-n", default_namespace, "--type=merge",
                                "-p", '{"spec": {"replicas": 41}}')
        assert grown.returncode != 0 and "asks for 41 pods" in grown.stderr


def limited(name: str, failure: str, body: str, **limits: int) -> str:
    return json.dumps({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": name},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], "overrideRules": [
            {"failurePolicy": failure, "overriders": {"javascript": {"source": body, **limits}}}]}})


def test_a_script_past_its_limits_is_a_rule_error(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    spin = "function jsa_mutate(obj) { while (true) {} }"
    apply_policy(cluster, limited("spin", "Fail", spin), "op", "spin", 1, namespace)
    proc = cluster.kubectl("create", "configmap", "cm", "-n", namespace)
    assert proc.returncode != 0 and "OverridePolicy" in proc.stderr
    assert "ran longer than its 100 ms limit" in proc.stderr
    apply_policy(cluster, limited("spin", "Ignore", spin), "op", "spin", 1, namespace)
    proc = cluster.kubectl("create", "configmap", "cm", "-n", namespace)
    assert proc.returncode == 0, proc.stderr
    assert "failurePolicy Ignore: rule skipped" in proc.stderr  # the warning kubectl prints
    hungry = "function jsa_mutate() { const a = []; while (true) a.push('x'.repeat(65536) + a.length); }"
    apply_policy(cluster, limited("spin", "Fail", hungry, memoryLimitMiB=8, timeoutMs=1000), "op", "spin", 1,
                 namespace)
    proc = cluster.kubectl("create", "configmap", "cm2", "-n", namespace)
    assert proc.returncode != 0 and "more than its 8 MiB memory limit" in proc.stderr


def test_a_script_with_a_syntax_error_is_refused_with_its_line(cluster: Cluster, webhook: Webhook,
                                                               namespace: str) -> None:
    broken = "function jsa_mutate(obj) {\n  return {Result: obj,,};\n}"
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=limited("broken", "Fail", broken))
    assert proc.returncode != 0
    assert "spec.overrideRules[0].overriders.javascript.source: line 2: SyntaxError" in proc.stderr
    assert cluster.kubectl("get", "op", "broken", "-n", namespace).returncode != 0
