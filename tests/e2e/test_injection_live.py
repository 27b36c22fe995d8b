"""Service injection (the inject template) on the local API server: the examples of
examples/service-injection, ours and the PodPreset documentation's through `convert`, create
objects that read back as the expected YAML; a Deployment's Pods are injected exactly once; a
converted PodPreset marks Pods with PodPreset's annotation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "service-injection"
MARKER = "policy.kcloudlabs.io/inject-"
PODPRESET_MARKER = "podpreset.admission.kubernetes.io/podpreset-"
# Added by the API server's own admission (the ServiceAccount plugin), not by us.
SERVICE_ACCOUNT_PREFIXES = ("default-token-", "kube-api-access-")


def example(path: Path, namespace: str) -> str:
    """An example file with its namespace (myns) replaced by the test's."""
    return path.read_text().replace("namespace: myns", f"namespace: {namespace}")


def expected(path: Path, namespace: str) -> Any:
    return yaml.safe_load(example(path, namespace))


def _ours(item: Any) -> bool:
    return not (isinstance(item, dict) and str(item.get("name", "")).startswith(SERVICE_ACCOUNT_PREFIXES))


def project(stored: Any, want: Any) -> Any:
    """``stored`` cut down to the fields ``want`` has (what the API server defaults is left out),
    without the service account token volume and mounts."""
    if isinstance(want, dict) and isinstance(stored, dict):
        return {key: project(stored[key], value) for key, value in want.items() if key in stored}
    if isinstance(want, list) and isinstance(stored, list):
        kept = [item for item in stored if _ours(item)]
        if len(kept) != len(want):
            return kept
        return [project(item, w) for item, w in zip(kept, want, strict=True)]
    return stored


def check_marker(stored: dict[str, Any], cluster: Cluster, policy: str, namespace: str) -> None:
    """The marker names the policy with a resourceVersion it had (the version the webhook compiled)."""
    marker = stored["metadata"]["annotations"].pop(MARKER + policy)
    current = get_json(cluster, "op", policy, namespace)["metadata"]["resourceVersion"]
    assert marker.isdigit() and int(marker) <= int(current), (marker, current)


def pods(cluster: Cluster, namespace: str, count: int, selector: str) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        out = cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
        items: list[dict[str, Any]] = json.loads(out)["items"] if out else []
        return items if len(items) == count else None

    items = wait_for(found, timeout=40)
    assert items, cluster.kubectl("get", "all,events", "-n", namespace).stdout
    return items  # type: ignore[return-value]


def test_the_proposals_pod_reads_back_as_expected(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, example(EXAMPLES / "allow-database.yaml", namespace), "op", "allow-database", 1, namespace)
    kubectl_ok(cluster, "create", "-f", "-", input=example(EXAMPLES / "website-pod.yaml", namespace))
    want = expected(EXAMPLES / "website-pod.expected.yaml", namespace)
    stored = project(get_json(cluster, "pod", "website", namespace), want)
    check_marker(stored, cluster, "allow-database", namespace)
    del want["metadata"]["annotations"][MARKER + "allow-database"]
    assert stored == want


def test_the_proposals_replicaset_pods_are_injected_and_the_replicaset_is_not(
        cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, example(EXAMPLES / "allow-database-tier.yaml", namespace), "op", "allow-database-tier", 1,
                 namespace)
    kubectl_ok(cluster, "create", "-f", "-", input=example(EXAMPLES / "frontend-replicaset.yaml", namespace))
    replicaset = get_json(cluster, "replicaset", "frontend", namespace)
    template = replicaset["spec"]["template"]
    assert "annotations" not in template["metadata"] and "volumes" not in template["spec"]
    want = expected(EXAMPLES / "frontend-pod.expected.yaml", namespace)
    for pod in pods(cluster, namespace, 3, "tier=frontend"):
        stored = project(pod, want)
        check_marker(stored, cluster, "allow-database-tier", namespace)
        assert stored == {**want, "metadata": {**want["metadata"], "annotations": {}}}


DEPLOYMENT_POLICY = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: cache}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment}
    - {apiVersion: v1, kind: Pod, labelSelector: {matchLabels: {app: cached}}}
  overrideRules:
    - overriders:
        template:
          type: inject
          inject:
            env: [{name: CACHE_DIR, value: /cache}]
            envFrom: [{configMapRef: {name: cache-settings, optional: true}}]
            volumeMounts: [{name: cache, mountPath: /cache}]
            volumes: [{name: cache, configMap: {name: cache-settings, optional: true}}]
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: cached}
spec:
  replicas: 2
  selector: {matchLabels: {app: cached}}
  template:
    metadata: {labels: {app: cached}}
    spec:
      initContainers: [{name: warm, image: busybox}]
      containers: [{name: app, image: nginx}, {name: side, image: envoy}]
"""


def test_a_deployments_pods_are_injected_exactly_once(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    # The policy selects the Deployment and its Pods: the Pods arrive with the items already there
    # (from the pod template, as the API server defaulted them) and gain nothing twice.
    apply_policy(cluster, DEPLOYMENT_POLICY, "op", "cache", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=DEPLOYMENT)
    template = get_json(cluster, "deployment", "cached", namespace)["spec"]["template"]
    assert set(template["metadata"]["annotations"]) == {MARKER + "cache"}
    for pod in [template, *pods(cluster, namespace, 2, "app=cached")]:
        spec = pod["spec"]
        assert [v["name"] for v in spec["volumes"] if _ours(v)] == ["cache"]
        volume = next(v for v in spec["volumes"] if _ours(v))
        assert volume["configMap"] == {"name": "cache-settings", "optional": True, "defaultMode": 420}
        for container in spec["containers"] + spec["initContainers"]:
            assert container["env"] == [{"name": "CACHE_DIR", "value": "/cache"}]
            assert container["envFrom"] == [{"configMapRef": {"name": "cache-settings", "optional": True}}]
            assert [m for m in container["volumeMounts"] if _ours(m)] == [{"name": "cache", "mountPath": "/cache"}]
        assert pod["metadata"]["annotations"][MARKER + "cache"] == template["metadata"]["annotations"][MARKER + "cache"]


def convert(path: Path, namespace: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "kinitiras_py", "convert", str(path)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("namespace: myns", f"namespace: {namespace}")


def test_podpreset_docs_examples_through_convert(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    presets = EXAMPLES / "podpreset"
    apply_policy(cluster, convert(presets / "preset-configmap.yaml", namespace), "op", "allow-database", 1, namespace)
    apply_policy(cluster, convert(presets / "preset-proxy.yaml", namespace), "op", "proxy", 1, namespace)
    kubectl_ok(cluster, "create", "-f", "-", input=example(presets / "website-pod.yaml", namespace))
    container = get_json(cluster, "pod", "website", namespace)["spec"]["containers"][0]
    assert container["env"] == [{"name": "DB_PORT", "value": "6379"}]
    assert container["envFrom"] == [{"configMapRef": {"name": "etcd-env-config"}}]
    assert [m for m in container["volumeMounts"] if _ours(m)] == [
        {"name": "cache-volume", "mountPath": "/cache"}, {"name": "proxy-volume", "mountPath": "/etc/proxy/configs"}]
    # The documentation's conflict: the Pod mounts another volume at /cache. allow-database is
    # skipped with a warning; proxy, not involved, still applies.
    conflict = example(presets / "conflict-pod.yaml", namespace).replace("name: website", "name: website-2")
    proc = cluster.kubectl("create", "-f", "-", input=conflict)
    assert proc.returncode == 0, proc.stderr
    assert "allow-database: not injected (onConflict Skip): volumeMounts name cache-volume / mountPath /cache" \
        in proc.stderr
    stored = get_json(cluster, "pod", "website-2", namespace)
    container = stored["spec"]["containers"][0]
    assert "env" not in container and "envFrom" not in container
    assert [m["name"] for m in container["volumeMounts"] if _ours(m)] == ["other-volume", "proxy-volume"]
    assert set(stored["metadata"]["annotations"]) == {PODPRESET_MARKER + "proxy"}


TRACING_PRESET = """
apiVersion: settings.k8s.io/v1alpha1
kind: PodPreset
metadata: {name: tracing, namespace: NS}
spec:
  selector: {matchLabels: {traced: "yes"}}
  env: [{name: OTEL_ENDPOINT, value: "http://collector:4317"}]
"""
TRACED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {traced: "yes"}}
spec:
  containers: [{name: app, image: nginx}]
"""


def test_a_converted_podpreset_marks_pods_with_podpresets_annotation(
        cluster: Cluster, webhook: Webhook, namespace: str, tmp_path: Path) -> None:
    # Written by hand, the preset has no resourceVersion: the Pod carries the converted policy's,
    # a version of the preset as it is stored now.
    (tmp_path / "preset.yaml").write_text(TRACING_PRESET.replace("NS", namespace))
    policy = convert(tmp_path / "preset.yaml", namespace)
    created = kubectl_ok(cluster, "apply", "-f", "-", "-o", "jsonpath={.metadata.resourceVersion}", input=policy)
    apply_policy(cluster, policy, "op", "tracing", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=TRACED_POD.replace("NAME", "first"))
    stored = get_json(cluster, "pod", "first", namespace)
    assert stored["spec"]["containers"][0]["env"] == [{"name": "OTEL_ENDPOINT", "value": "http://collector:4317"}]
    annotations = stored["metadata"]["annotations"]
    assert set(annotations) == {PODPRESET_MARKER + "tracing"}, annotations
    current = get_json(cluster, "op", "tracing", namespace)["metadata"]["resourceVersion"]
    assert int(created) <= int(annotations[PODPRESET_MARKER + "tracing"]) <= int(current), (created, current)

    # Exported from the old cluster, the preset carries the resourceVersion its Pods were marked with
    # there; the converted policy keeps marking new Pods with it.
    exported = TRACING_PRESET.replace("NS", namespace).replace("{name: tracing,",
                                                                 '{name: tracing, resourceVersion: "918273",')
    (tmp_path / "preset.yaml").write_text(exported)
    apply_policy(cluster, convert(tmp_path / "preset.yaml", namespace), "op", "tracing", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=TRACED_POD.replace("NAME", "second"))
    annotations = get_json(cluster, "pod", "second", namespace)["metadata"]["annotations"]
    assert annotations == {PODPRESET_MARKER + "tracing": "918273"}

    # A Pod holding the variable with another value: the preset is skipped, and writes nothing.
    held = TRACED_POD.replace("NAME", "third").replace(
        "image: nginx}", 'image: nginx, env: [{name: OTEL_ENDPOINT, value: "http://other:4317"}]}')
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=held)
    assert proc.returncode == 0 and "tracing: not injected (onConflict Skip)" in proc.stderr, proc.stderr
    assert "annotations" not in get_json(cluster, "pod", "third", namespace)["metadata"]


DENY_POLICY = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: strict-db}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
    - overriders:
        template: {type: inject, inject: {env: [{name: DB_PORT, value: "6379"}], onConflict: Deny}}
"""


def test_a_conflict_under_deny_refuses_the_pod_naming_policy_and_field(
        cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, DENY_POLICY, "op", "strict-db", 1, namespace)
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: legacy}\nspec:\n  containers:\n"
           "  - {name: app, image: nginx, env: [{name: DB_PORT, value: \"5432\"}]}\n")
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod)
    assert proc.returncode != 0
    assert (f"OverridePolicy {namespace}/strict-db, rule 0: inject conflict (onConflict Deny): env name DB_PORT "
            "(the pod holds it with another value), in container app") in proc.stderr
