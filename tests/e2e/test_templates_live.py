"""Override templates, plaintext, origin and cel overriders on live objects created with kubectl."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok

pytestmark = pytest.mark.cluster


LABELS_ANNOTATIONS = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: meta-templates}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod, labelSelector: {matchLabels: {app: meta}}}]
  overrideRules:
  - targetOperations: [CREATE, UPDATE]
    overriders:
      template: {type: labels, operation: add, path: example.com/team, value: {string: payments}}
  - targetOperations: [CREATE]
    overriders:
      template: {type: labels, operation: remove, path: tmp.example.com/scratch}
  - targetOperations: [CREATE]
    overriders:
      template: {type: annotations, operation: add, path: app.kubernetes.io/part-of, value: {string: shop.v2}}
  - targetOperations: [CREATE]
    overriders:
      template:
        type: annotations
        operation: replace
        value: {stringMap: {example.com/a: "1", b.example.com/c.d: two}}
  - targetOperations: [CREATE]
    overriders:
      template:
        type: annotations
        operation: replace
        path: example.com/restart-policy
        valueRef: {from: current, path: /spec/restartPolicy}
"""
META_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: meta
  labels: {app: meta, tmp.example.com/scratch: "yes"}
  annotations: {kept: "yes"}
spec:
  containers: [{name: app, image: nginx}]
"""


def test_labels_and_annotations_with_slash_and_dot_keys(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, LABELS_ANNOTATIONS, "op", "meta-templates", 5, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=META_POD)
    meta = get_json(cluster, "pod", "meta", namespace)["metadata"]
    assert meta["labels"] == {"app": "meta", "example.com/team": "payments"}
    assert meta["annotations"] == {
        "kept": "yes",
        "app.kubernetes.io/part-of": "shop.v2",
        "example.com/a": "1",
        "b.example.com/c.d": "two",
        "example.com/restart-policy": "Always",  # defaulted by the API server before admission
    }
    # The label rule also targets UPDATE: removing the label with kubectl puts it back.
    kubectl_ok(cluster, "label", "pod", "meta", "-n", namespace, "example.com/team-")
    labels = get_json(cluster, "pod", "meta", namespace)["metadata"]["labels"]
    assert labels == {"app": "meta", "example.com/team": "payments"}


BARE_POD_POLICY = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: bare-meta}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {type: labels, operation: add, path: example.com/team, value: {string: core}}
  - targetOperations: [CREATE]
    overriders:
      template: {type: annotations, operation: add, path: example.com/added-by, value: {string: template}}
"""
BARE_POD = """
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec:
  containers: [{name: app, image: nginx}]
"""


def test_templates_create_missing_label_and_annotation_maps(cluster: Cluster, webhook: Webhook,
                                                            namespace: str) -> None:
    apply_policy(cluster, BARE_POD_POLICY, "op", "bare-meta", 2, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=BARE_POD)
    meta = get_json(cluster, "pod", "bare", namespace)["metadata"]
    assert meta["labels"] == {"example.com/team": "core"}
    assert meta["annotations"] == {"example.com/added-by": "template"}


SCHEDULING = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: scheduling}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [CREATE, UPDATE]
    overriders:
      template:
        type: tolerations
        operation: add
        tolerations:
        - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}
        - {key: example.com/gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
  - targetOperations: [CREATE, UPDATE]
    overriders:
      template:
        type: affinity
        operation: add
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: pool, operator: In, values: [batch]}]
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              preference:
                matchExpressions: [{key: disk, operator: In, values: [ssd]}]
"""
SCHEDULED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: sched}
spec:
  containers: [{name: app, image: nginx}]
  tolerations:
  - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, values: [a]}]
"""


def test_tolerations_and_affinity_are_added_once(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, SCHEDULING, "op", "scheduling", 2, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=SCHEDULED_POD)
    spec = get_json(cluster, "pod", "sched", namespace)["spec"]
    keys = [t["key"] for t in spec["tolerations"]]
    # The toleration already present is not added again; the API server's defaults are kept.
    assert sorted(keys) == sorted(["dedicated", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                                   "example.com/gpu"])
    assert {"key": "example.com/gpu", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 60} in spec["tolerations"]
    node = spec["affinity"]["nodeAffinity"]
    terms = node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                     {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]
    assert node["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]

    # An UPDATE runs both rules again: nothing is duplicated.
    kubectl_ok(cluster, "label", "pod", "sched", "-n", namespace, "touched=yes")
    again = get_json(cluster, "pod", "sched", namespace)["spec"]
    assert again["tolerations"] == spec["tolerations"]
    assert again["affinity"] == spec["affinity"]


RESOURCES = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: resources}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template:
        type: resources
        operation: replace
        containerNames: [app]
        resources:
          requests: {cpu: 250m, memory: 1.5Gi}
          limits: {cpu: 1500m, nvidia.com/gpu: 1}
  - targetOperations: [CREATE]
    overriders:
      template:
        type: resources
        operation: remove
        containerNames: [sidecar]
        resources:
          requests: {cpu: 0}
"""
RESOURCES_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - {name: app, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}
      - {name: sidecar, image: envoy, resources: {requests: {cpu: 50m, memory: 64Mi}}}
"""


def test_resources_template_on_a_deployment(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, RESOURCES, "op", "resources", 2, namespace)
    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=RESOURCES_DEPLOYMENT)
    containers = get_json(cluster, "deploy", "shop", namespace)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert containers[0]["resources"] == {"requests": {"cpu": "250m", "memory": "1536Mi"},
                                          "limits": {"cpu": "1500m", "nvidia.com/gpu": "1"}}
    assert containers[1]["resources"] == {"requests": {"memory": "64Mi"}}


PLAINTEXT = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: plaintext}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod, labelSelector: {matchLabels: {plain: "yes"}}}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      plaintext:
      - {op: add, path: /metadata/annotations/added-by, value: op}
"""


def _plain_pod(name: str, annotations: dict[str, str] | None) -> str:
    meta: dict[str, Any] = {"name": name, "labels": {"plain": "yes"}}
    if annotations is not None:
        meta["annotations"] = annotations
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                       "spec": {"containers": [{"name": "app", "image": "nginx"}]}})


def test_plaintext_adds_annotation_to_pod_with_annotations(cluster: Cluster, webhook: Webhook,
                                                           namespace: str) -> None:
    apply_policy(cluster, PLAINTEXT, "op", "plaintext", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=_plain_pod("annotated", {"team": "payments"}))
    annotations = get_json(cluster, "pod", "annotated", namespace)["metadata"]["annotations"]
    assert annotations == {"team": "payments", "added-by": "op"}


def test_plaintext_adds_annotation_to_pod_without_annotations(cluster: Cluster, webhook: Webhook,
                                                              namespace: str) -> None:
    # kinitiras denied this CREATE (the annotations map did not exist); the map is created here.
    apply_policy(cluster, PLAINTEXT, "op", "plaintext", 1, namespace)
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=_plain_pod("bare", None))
    assert proc.returncode == 0, proc.stderr
    assert get_json(cluster, "pod", "bare", namespace)["metadata"]["annotations"] == {"added-by": "op"}


ORIGIN = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: origin}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      origin:
      - type: nodeSelector
        operation: add
        nodeSelector: {node-pool: batch}
      - type: labels
        operation: add
        labels: {example.com/pool: batch}
      - type: annotations
        operation: add
        annotations: {batch.example.com/queue: nightly}
      - type: tolerations
        operation: add
        tolerations:
        - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}
"""
ORIGIN_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: etl, labels: {app: etl}}
spec:
  replicas: 0
  selector: {matchLabels: {app: etl}}
  template:
    metadata: {labels: {app: etl}}
    spec:
      nodeSelector: {disk: ssd}
      containers: [{name: worker, image: busybox}]
"""


def test_origin_node_selector_and_labels_on_a_deployment(cluster: Cluster, webhook: Webhook,
                                                         namespace: str) -> None:
    apply_policy(cluster, ORIGIN, "op", "origin", 1, namespace)
    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=ORIGIN_DEPLOYMENT)
    deployment = get_json(cluster, "deploy", "etl", namespace)
    assert deployment["metadata"]["labels"] == {"app": "etl", "example.com/pool": "batch"}
    assert deployment["metadata"]["annotations"]["batch.example.com/queue"] == "nightly"
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"disk": "ssd", "node-pool": "batch"}
    assert pod_spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "batch",
                                        "effect": "NoSchedule"}]


CEL = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: cel-ops}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      cel: |-
        (!has(object.metadata.labels)
          ? [{"op": "add", "path": "/metadata/labels", "value": {"tier": "standard"}}]
          : ("tier" in object.metadata.labels
              ? []
              : [{"op": "add", "path": "/metadata/labels/tier", "value": "standard"}]))
        + [{"op": "add", "path": "/metadata/annotations",
            "value": {"example.com/containers": string(size(object.spec.template.spec.containers))}},
           {"op": "replace", "path": "/spec/revisionHistoryLimit", "value": 3}]
"""


def _cel_deployment(name: str, labels: dict[str, str] | None) -> str:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "envoy"}]}}}})


def test_cel_overrider_returning_patch_ops(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, CEL, "op", "cel-ops", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=_cel_deployment("unlabelled", None))
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=_cel_deployment("critical", {"tier": "critical"}))
    unlabelled = get_json(cluster, "deploy", "unlabelled", namespace)
    assert unlabelled["metadata"]["labels"] == {"tier": "standard"}
    assert unlabelled["metadata"]["annotations"]["example.com/containers"] == "2"
    assert unlabelled["spec"]["revisionHistoryLimit"] == 3
    critical = get_json(cluster, "deploy", "critical", namespace)
    assert critical["metadata"]["labels"] == {"tier": "critical"}
    assert critical["spec"]["revisionHistoryLimit"] == 3


def test_cluster_override_policy_applies_in_every_namespace(cluster: Cluster, webhook: Webhook,
                                                            namespace: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    name, other = f"e2e-cop-{suffix}", f"e2e-{suffix}-other"
    policy = f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, labelSelector: {{matchLabels: {{cop: "{suffix}"}}}}}}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {{type: annotations, operation: add, path: example.com/seen-by, value: {{string: {name}}}}}
"""
    kubectl_ok(cluster, "create", "namespace", other)
    try:
        apply_policy(cluster, policy, "cop", name, 1)
        for ns in (namespace, other):
            kubectl_ok(cluster, "create", "configmap", "marked", "-n", ns)
            kubectl_ok(cluster, "label", "configmap", "marked", "-n", ns, f"cop={suffix}")
            # The label arrives with an UPDATE, which the rule does not target; create one labelled.
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "labelled", "labels": {"cop": suffix}}}
            kubectl_ok(cluster, "create", "-n", ns, "-f", "-", input=json.dumps(cm))
            assert get_json(cluster, "cm", "labelled", ns)["metadata"]["annotations"] == {"example.com/seen-by": name}
            assert "annotations" not in get_json(cluster, "cm", "marked", ns)["metadata"]
    finally:
        cluster.kubectl("delete", "cop", name, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", other, "--wait=false")
