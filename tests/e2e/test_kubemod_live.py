"""KubeMod's README examples, and samples of our own, on the local API server: each ModRule
converted by the registry (what ``kinitiras-py convert`` prints), applied with kubectl, and the
objects created with kubectl changed or refused as KubeMod would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.convert import registry
from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok

pytestmark = pytest.mark.cluster

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "foreign" / "kubemod"
SHORT = {"OverridePolicy": "op", "ClusterOverridePolicy": "cop", "ValidatePolicy": "vp",
         "ClusterValidatePolicy": "cvp"}


def install(cluster: Cluster, sample: str, namespace: str) -> list[dict[str, Any]]:
    """Convert a sample's ModRules (moved into ``namespace``; cluster-wide ones renamed for this
    test) and apply them, waiting until each is in force."""
    docs = []
    for doc in yaml.safe_load_all((SAMPLES / sample).read_text()):
        if doc["metadata"]["namespace"] == "kubemod-system":
            doc["metadata"]["name"] += f"-{namespace}"
        else:
            doc["metadata"]["namespace"] = namespace
        docs.append(doc)
    policies = registry.converted(docs, sample)
    for policy in policies:
        kind = policy["kind"]
        where = policy["metadata"].get("namespace")
        apply_policy(cluster, yaml.safe_dump(policy), SHORT[kind], policy["metadata"]["name"], 1, where)
    return policies


def remove(cluster: Cluster, policies: list[dict[str, Any]]) -> None:
    for policy in policies:
        where = ["-n", policy["metadata"]["namespace"]] if policy["metadata"].get("namespace") else []
        cluster.kubectl("delete", SHORT[policy["kind"]], policy["metadata"]["name"], *where)


def deployment(name: str, annotations: dict[str, str] | None = None, image: str = "nginx:1.14.2",
               **pod_spec: Any) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": "web"}, "annotations": annotations or {}},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": image,
                                                       "ports": [{"containerPort": 80}]}], **pod_spec}}}})


def pod_spec(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = get_json(cluster, "deployment", name, namespace)["spec"]["template"]["spec"]
    return spec


def test_sidecar_injection_with_a_negate_guard(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "sidecar-injection.yaml", namespace)
    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=deployment("traced", {"tracing/inject": "true"}))
    spec = pod_spec(cluster, "traced", namespace)
    assert [c["name"] for c in spec["containers"]] == ["main", "tracing-agent"]
    assert spec["containers"][1]["args"] == [f"--tags=deployment=traced,namespace={namespace}",
                                             f"--collector=collector.{namespace}:14250"]
    # kubectl's record of what was applied follows the patch, so the next apply keeps the agent.
    meta = get_json(cluster, "deployment", "traced", namespace)["metadata"]
    recorded = json.loads(meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert [c["name"] for c in recorded["spec"]["template"]["spec"]["containers"]] == ["main", "tracing-agent"]
    kubectl_ok(cluster, "annotate", "-n", namespace, "deployment", "traced", "touched=yes")
    assert [c["name"] for c in pod_spec(cluster, "traced", namespace)["containers"]] == ["main", "tracing-agent"]
    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=deployment("plain"))
    assert [c["name"] for c in pod_spec(cluster, "plain", namespace)["containers"]] == ["main"]


def test_security_context_enforcement(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "security-context.yaml", namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=deployment("web"))
    obj = get_json(cluster, "deployment", "web", namespace)
    assert obj["metadata"]["annotations"]["hardened"] == "yes-by-rule"
    assert obj["spec"]["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 101, "runAsGroup": 101, "fsGroup": 101}
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=deployment("other", image="busybox"))
    assert "hardened" not in (get_json(cluster, "deployment", "other", namespace)["metadata"].get("annotations") or {})


def test_external_ip_reject(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "reject-external-ips.yaml", namespace)

    def service(name: str, ips: list[str]) -> str:
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                               "spec": {"externalIPs": ips, "ports": [{"port": 80}]}})

    refused = cluster.kubectl("create", "-n", namespace, "-f", "-", input=service("bad", ["10.20.30.4", "1.2.3.4"]))
    assert refused.returncode != 0
    assert "external IPs [10.20.30.4 1.2.3.4] are not all in 10.20.30.0/24" in refused.stderr
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=service("good", ["10.20.30.4"]))


def test_owner_reference_removal(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "remove-owner-reference.yaml", namespace)
    owner = json.loads(kubectl_ok(cluster, "create", "configmap", "owner", "-n", namespace, "-o", "json"))
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "labels": {"search.example.org/type": "index-data"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                               "uid": owner["metadata"]["uid"]}]},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(claim))
    assert "ownerReferences" not in get_json(cluster, "pvc", "data", namespace)["metadata"]
    claim["metadata"]["name"], claim["metadata"]["labels"] = "kept", {}
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(claim))
    assert get_json(cluster, "pvc", "kept", namespace)["metadata"]["ownerReferences"][0]["name"] == "owner"


def test_label_from_the_namespace(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    policies = install(cluster, "namespace-label.yaml", namespace)
    try:
        pod = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=pod)
        assert "flavor" not in (get_json(cluster, "pod", "p", namespace)["metadata"].get("labels") or {})
        kubectl_ok(cluster, "label", "namespace", namespace, "color=blue", "flavor=mint")
        kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=pod.replace("name: p", "name: q"))
        assert get_json(cluster, "pod", "q", namespace)["metadata"]["labels"] == {"flavor": "mint"}
    finally:
        remove(cluster, policies)


def test_tiers(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "tiers.yaml", namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-",
               input=deployment("hub", image="docker.io/library/nginx:1"))
    spec = pod_spec(cluster, "hub", namespace)
    assert spec["containers"][0]["image"] == "registry.example.org/library/nginx:1"
    assert spec["imagePullSecrets"] == [{"name": "registry-example"}]
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=deployment("elsewhere", image="quay.io/x:1"))
    assert "imagePullSecrets" not in pod_spec(cluster, "elsewhere", namespace)


def test_zone_from_the_node_synthetic_reference(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    node = f"node-{namespace}"
    kubectl_ok(cluster, "create", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-b"}}}))
    policies = install(cluster, "node-labels.yaml", namespace)
    try:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "placed", "annotations": {"ref.kubemod.io/node": node}},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(pod))
        # admissionOperations: UPDATE only, as in KubeMod's example.
        assert "topology.kubernetes.io/zone" not in (get_json(cluster, "pod", "placed", namespace)["metadata"]
                                                     .get("labels") or {})
        kubectl_ok(cluster, "label", "pod", "placed", "-n", namespace, "touched=yes")
        labels = get_json(cluster, "pod", "placed", namespace)["metadata"]["labels"]
        assert labels == {"touched": "yes", "topology.kubernetes.io/zone": "zone-b"}
    finally:
        remove(cluster, policies)
        cluster.kubectl("delete", "node", node)


def test_a_count_over_a_filter_decides_a_pod(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    install(cluster, "pod-hardening.yaml", namespace)

    def pod(name: str, *hardened: bool) -> str:
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
            {"name": f"c{i}", "image": "nginx", "ports": [{"containerPort": 80 + i}],
             **({"securityContext": {"runAsNonRoot": True}} if safe else {})} for i, safe in enumerate(hardened)]}})

    # Two containers without a securityContext: length(...) >= '2' holds, as in KubeMod.
    refused = cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod("bare", False, False, True))
    assert refused.returncode != 0
    assert "bare: at most one container may go without a securityContext" in refused.stderr
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=pod("ok", False, True))
    containers = get_json(cluster, "pod", "ok", namespace)["spec"]["containers"]
    assert [c["ports"][0]["name"] for c in containers] == ["c0-p0", "c1-p0"]
