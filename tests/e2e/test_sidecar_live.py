"""examples/appmesh on the local API server: the App Mesh sidecar injected from a ConfigMap template,
once per pod of a Deployment, following ConfigMap changes, and the same from a converted SuperGloo
Mesh."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "appmesh"


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLE / name).read_text()) if d]


@pytest.fixture
def policies(cluster: Cluster) -> Iterator[list[str]]:
    """Names of the cluster policies a test creates; they are deleted afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        cluster.kubectl("delete", "clusteroverridepolicy", name, "--ignore-not-found")


def example_in(cluster: Cluster, namespace: str, policies: list[str]) -> dict[str, Any]:
    """The example policy and its ConfigMap, scoped to ``namespace``; returns the ConfigMap."""
    [policy] = load("policy.yaml")
    [configmap] = load("configmap.yaml")
    name = f"appmesh-{uuid.uuid4().hex[:6]}"
    policy["metadata"]["name"] = name
    policy["spec"]["resourceSelectors"][0]["namespace"] = namespace
    sidecar = policy["spec"]["overrideRules"][0]["overriders"]["template"]["sidecar"]
    sidecar["configMapRef"]["namespace"] = configmap["metadata"]["namespace"] = namespace
    kubectl_ok(cluster, "apply", "-f", "-", input=json.dumps(configmap))
    policies.append(name)
    apply_policy(cluster, json.dumps(policy), "cop", name, 1)
    return configmap


def projected(pod: dict[str, Any]) -> dict[str, Any]:
    """What the example defines of a pod, leaving out the API server's defaults."""
    def container(c: dict[str, Any]) -> dict[str, Any]:
        out = {k: c[k] for k in ("name", "image", "env", "securityContext") if k in c}
        if "ports" in c:
            out["ports"] = [{"containerPort": p["containerPort"]} for p in c["ports"]]
        return out

    meta = pod["metadata"]
    return {"labels": meta.get("labels"), "annotations": meta.get("annotations"),
            "containers": [container(c) for c in pod["spec"]["containers"]],
            "initContainers": [container(c) for c in pod["spec"].get("initContainers", [])]}


def send(cluster: Cluster, namespace: str, name: str, verb: str = "create") -> dict[str, Any]:
    """The example file's one object, put in ``namespace`` and sent with ``kubectl <verb>``; as sent."""
    [obj] = load(name)
    obj["metadata"]["namespace"] = namespace
    kubectl_ok(cluster, verb, "-f", "-", input=json.dumps(obj))
    return obj


def marker_of(name: str) -> str:
    return f"policy.kcloudlabs.io/sidecar-{name}"


def test_the_example_pod_is_stored_as_expected(cluster: Cluster, webhook: Webhook, namespace: str,
                                               policies: list[str]) -> None:
    example_in(cluster, namespace, policies)
    pod = send(cluster, namespace, "pod.yaml")
    stored = get_json(cluster, "pod", "cart", namespace)
    [expected] = load("expected-pod.yaml")
    expected["metadata"]["annotations"] = {marker_of(policies[0]): f"ClusterOverridePolicy {policies[0]}"}
    assert projected(stored) == projected(expected)

    unlabelled = copy.deepcopy(pod)
    unlabelled["metadata"]["name"] = "no-node"
    del unlabelled["metadata"]["labels"]["virtual-node"]
    refused = cluster.kubectl("create", "-f", "-", input=json.dumps(unlabelled))
    assert refused.returncode != 0
    assert 'the pod has no label "virtual-node", which this sidecar requires' in refused.stderr


def test_a_deployments_pods_get_the_sidecar_exactly_once(cluster: Cluster, webhook: Webhook, namespace: str,
                                                         policies: list[str]) -> None:
    example_in(cluster, namespace, policies)
    send(cluster, namespace, "deployment.yaml", "apply")

    def pods() -> list[dict[str, Any]]:
        items = json.loads(kubectl_ok(cluster, "get", "pods", "-n", namespace, "-o", "json"))["items"]
        return list(items) if len(items) == 2 else []

    found = wait_for(pods, 60, 0.5)
    assert found, kubectl_ok(cluster, "get", "deploy,rs,pods,events", "-n", namespace)
    for pod in found:  # type: ignore[attr-defined]
        names = [c["name"] for c in pod["spec"]["containers"]]
        assert names == ["catalog", "envoy"]
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["proxyinit"]
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][1]["env"]}
        assert env["APPMESH_VIRTUAL_NODE_NAME"] == "mesh/shop-mesh/virtualNode/catalog"
        assert pod["metadata"]["annotations"][marker_of(policies[0])] == f"ClusterOverridePolicy {policies[0]}"
    # The Deployment itself is not a Pod: the policy leaves it as written.
    template = get_json(cluster, "deployment", "catalog", namespace)["spec"]["template"]
    assert [c["name"] for c in template["spec"]["containers"]] == ["catalog"]


def test_a_configmap_change_applies_to_the_next_pods(cluster: Cluster, webhook: Webhook, namespace: str,
                                                     policies: list[str]) -> None:
    configmap = example_in(cluster, namespace, policies)
    pod = send(cluster, namespace, "pod.yaml")
    first = get_json(cluster, "pod", "cart", namespace)["spec"]["containers"][-1]
    assert first["image"].endswith("aws-appmesh-envoy:v1.8.0.2-beta")

    text = configmap["data"]["sidecar.yaml"]
    configmap["data"]["sidecar.yaml"] = text.replace("image: {{ values.envoyImage }}", "image: envoy.example/v2")
    kubectl_ok(cluster, "apply", "-f", "-", input=json.dumps(configmap))
    second = copy.deepcopy(pod)
    second["metadata"]["name"] = "cart-2"

    def dry_run_image() -> str:
        out = kubectl_ok(cluster, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(second))
        return str(json.loads(out)["spec"]["containers"][-1]["image"])

    assert wait_for(lambda: dry_run_image() == "envoy.example/v2", 60, 0.2)
    kubectl_ok(cluster, "create", "-f", "-", input=json.dumps(second))
    assert get_json(cluster, "pod", "cart-2", namespace)["spec"]["containers"][-1]["image"] == "envoy.example/v2"
    assert get_json(cluster, "pod", "cart", namespace)["spec"]["containers"][-1] == first

    kubectl_ok(cluster, "delete", "configmap", configmap["metadata"]["name"], "-n", namespace)
    third = copy.deepcopy(pod)
    third["metadata"]["name"] = "cart-3"

    def refusal() -> str:
        proc = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(third))
        return proc.stderr if proc.returncode else ""

    message = wait_for(refusal, 60, 0.2)
    assert f"sidecar template: ConfigMap {namespace}/appmesh-sidecar not found" in str(message)


def test_the_converted_supergloo_mesh_injects_the_same(cluster: Cluster, webhook: Webhook, namespace: str,
                                                      other_namespace: str, policies: list[str]) -> None:
    example_in(cluster, namespace, policies)
    pod = send(cluster, namespace, "pod.yaml")
    ours = get_json(cluster, "pod", "cart", namespace)

    mesh, configmap = load("supergloo.yaml")
    mesh["spec"]["awsAppMesh"]["injectionSelector"] = {"namespaceSelector": {"namespaces": [other_namespace]}}
    source = "\n---\n".join(yaml.safe_dump(d) for d in (mesh, configmap))
    converted = subprocess.run([sys.executable, "-m", "kinitiras_py", "convert", "-"], input=source,
                               capture_output=True, text=True, check=True).stdout
    [policy] = [d for d in yaml.safe_load_all(converted) if d]
    name = policy["metadata"]["name"]
    policies.append(name)
    apply_policy(cluster, converted, "cop", name, 1)
    pod["metadata"]["namespace"] = other_namespace
    kubectl_ok(cluster, "create", "-f", "-", input=json.dumps(pod))
    theirs = get_json(cluster, "pod", "cart", other_namespace)

    mine, converted_view = projected(ours), projected(theirs)
    assert mine.pop("annotations") == {marker_of(policies[0]): f"ClusterOverridePolicy {policies[0]}"}
    assert converted_view.pop("annotations") == {marker_of(name): f"ClusterOverridePolicy {name}"}
    assert converted_view == mine
