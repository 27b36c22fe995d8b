"""Oversell on live objects: stored policy status, Deployments, their Pods, owner lookups."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, wait_for

pytestmark = pytest.mark.cluster


def apply(cluster: Cluster, text: str, namespace: str) -> None:
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=text)
    assert proc.returncode == 0, proc.stderr


OVERSELL = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: oversell}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE, UPDATE]
    overriders:
      template:
        type: resourcesOversell
        operation: replace
        resourcesOversell: {cpuFactor: "0.5", memoryFactor: "0.25"}
"""
POD_LABELS = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: pod-owner}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template:
        type: labels
        operation: add
        path: example.com/owner
        valueRef: {from: owner, path: metadata.name}
  - targetOperations: [CREATE]
    overriders:
      template: {type: resourcesOversell, operation: replace, resourcesOversell: {cpuFactor: "0.1"}}
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: nginx, resources: {limits: {cpu: "2", memory: 4Gi}}}
      - {name: sidecar, image: envoy, resources: {limits: {cpu: 300m, memory: 1000M}}}
"""


def test_policy_gets_rendered_cel_and_ready(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply(cluster, OVERSELL, namespace)
    stored = yaml.safe_load(cluster.kubectl("get", "op", "oversell", "-n", namespace, "-o", "yaml", check=True).stdout)
    rendered = stored["spec"]["overrideRules"][0]["overriders"]["renderedCel"]
    assert 'scale("0.5", "0.001")' in rendered and 'scale("0.25", "1")' in rendered

    def ready() -> list[str] | None:
        out = cluster.kubectl("get", "op", "oversell", "-n", namespace, "--no-headers").stdout.split()
        return out if out[1:3] == ["True", "1"] else None

    assert wait_for(ready), cluster.kubectl("get", "op", "oversell", "-n", namespace, "-o", "yaml").stdout


def test_deployment_and_its_pods_are_oversold(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply(cluster, OVERSELL, namespace)
    apply(cluster, POD_LABELS, namespace)
    wait_for(lambda: "True" in cluster.kubectl("get", "op", "-n", namespace, "--no-headers").stdout, 60)
    apply(cluster, DEPLOYMENT, namespace)
    deployment = json.loads(cluster.kubectl("get", "deploy", "web", "-n", namespace, "-o", "json", check=True).stdout)
    requests = [c["resources"]["requests"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert requests == [{"cpu": "1", "memory": "1Gi"}, {"cpu": "150m", "memory": "250M"}]

    def pods() -> list[dict] | None:
        items = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        return items if len(items) == 2 else None

    found = wait_for(pods, timeout=30)
    assert found, cluster.kubectl("get", "all,events", "-n", namespace).stdout
    for pod in found:  # type: ignore[union-attr]
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet"
        # The owner lookup resolved the ReplicaSet through the informer-backed store.
        assert pod["metadata"]["labels"]["example.com/owner"] == owner["name"]
        cpu = [c["resources"]["requests"]["cpu"] for c in pod["spec"]["containers"]]
        assert cpu == ["200m", "30m"]
