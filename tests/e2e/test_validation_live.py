"""Validate policies on live requests: Deny, Warn, namespace scope, runtime failures, refused policies."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, kubectl_ok

pytestmark = pytest.mark.cluster


def configmap(name: str, labels: dict[str, str] | None = None) -> str:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})


def _namespace_guard(style: str, name: str, key: str) -> str:
    if style == "template":
        rule = {"targetOperations": ["DELETE"], "template": {"type": "condition", "condition": {
            "cond": "Exist", "dataRef": {"from": "current", "path": f"metadata.labels.{key}"},
            "message": f"namespace carries {key}: deletion refused"}}}
    else:
        rule = {"targetOperations": ["DELETE"], "cel": (
            f'has(object.metadata.labels) && "{key}" in object.metadata.labels'
            f' ? dyn({{"valid": false, "reason": "namespace " + object.metadata.name + " carries {key}: '
            'deletion refused"}) : dyn(true)')}
    return json.dumps({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
                       "metadata": {"name": name},
                       "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace"}],
                                "validateRules": [rule]}})


@pytest.mark.parametrize("style", ["template", "cel"])
def test_cluster_validate_policy_refuses_deleting_a_labelled_namespace(cluster: Cluster, webhook: Webhook,
                                                                       style: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    policy, key = f"e2e-protect-{suffix}", f"e2e.example.com/protected-{suffix}"
    protected, unlabelled = f"e2e-{suffix}-protected", f"e2e-{suffix}-open"
    try:
        apply_policy(cluster, _namespace_guard(style, policy, key), "cvp", policy, 1)
        kubectl_ok(cluster, "create", "namespace", protected)
        kubectl_ok(cluster, "label", "namespace", protected, f"{key}=yes")
        kubectl_ok(cluster, "create", "namespace", unlabelled)

        proc = cluster.kubectl("delete", "namespace", protected, "--wait=false")
        assert proc.returncode != 0
        assert f"ClusterValidatePolicy {policy}: " in proc.stderr
        assert f"carries {key}: deletion refused" in proc.stderr
        if style == "cel":  # the reason returned by the expression, built from the object being deleted
            assert f"namespace {protected} carries" in proc.stderr
        phase = kubectl_ok(cluster, "get", "namespace", protected, "-o", "jsonpath={.status.phase}")
        assert phase == "Active"

        kubectl_ok(cluster, "delete", "namespace", unlabelled, "--wait=false")
        # Without the label the same namespace may go.
        kubectl_ok(cluster, "label", "namespace", protected, f"{key}-")
        kubectl_ok(cluster, "delete", "namespace", protected, "--wait=false")
    finally:
        cluster.kubectl("label", "namespace", protected, f"{key}-")
        cluster.kubectl("delete", "cvp", policy, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", protected, unlabelled, "--wait=false", "--ignore-not-found")


WARN = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: team-label}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - targetOperations: [CREATE, UPDATE]
    cel: has(object.metadata.labels) && "team" in object.metadata.labels
    message: configmaps should carry a team label
    validationActions: [Warn]
"""


def test_warn_action_admits_and_kubectl_prints_the_warning(cluster: Cluster, webhook: Webhook,
                                                          namespace: str) -> None:
    apply_policy(cluster, WARN, "vp", "team-label", 1, namespace)
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=configmap("untagged"))
    assert proc.returncode == 0, proc.stderr
    assert f"Warning: ValidatePolicy {namespace}/team-label: configmaps should carry a team label" in proc.stderr
    kubectl_ok(cluster, "get", "cm", "untagged", "-n", namespace)

    tagged = cluster.kubectl("create", "-n", namespace, "-f", "-", input=configmap("tagged", {"team": "a"}))
    assert tagged.returncode == 0, tagged.stderr
    assert "Warning" not in tagged.stderr


DENY_BAD_NAMES = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: reserved-names}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - targetOperations: [CREATE]
    template:
      type: condition
      condition:
        cond: Regex
        dataRef: {from: current, path: /metadata/name}
        value: {string: "^reserved-"}
        message: configmap names starting with reserved- are reserved
"""


def test_validate_policy_applies_only_in_its_own_namespace(cluster: Cluster, webhook: Webhook, namespace: str,
                                                           other_namespace: str) -> None:
    apply_policy(cluster, DENY_BAD_NAMES, "vp", "reserved-names", 1, namespace)
    denied = cluster.kubectl("create", "-n", namespace, "-f", "-", input=configmap("reserved-1"))
    assert denied.returncode != 0
    assert f"ValidatePolicy {namespace}/reserved-names: configmap names starting with reserved- are reserved" \
        in denied.stderr
    assert cluster.kubectl("get", "cm", "reserved-1", "-n", namespace).returncode != 0

    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=configmap("ordinary"))
    allowed = cluster.kubectl("create", "-n", other_namespace, "-f", "-", input=configmap("reserved-1"))
    assert allowed.returncode == 0, allowed.stderr
    assert "Warning" not in allowed.stderr


LOCKED = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: locked}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - targetOperations: [DELETE]
    cel: >-
      !(has(object.metadata.labels) && object.metadata.labels[?"locked"].orValue("") == "true"
        && request.operation == "DELETE")
    message: locked configmaps cannot be deleted
"""


def test_validate_policy_on_delete_sees_the_object_being_deleted(cluster: Cluster, webhook: Webhook,
                                                                 namespace: str) -> None:
    apply_policy(cluster, LOCKED, "vp", "locked", 1, namespace)
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=configmap("keep", {"locked": "true"}))
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=configmap("drop", {"locked": "false"}))
    proc = cluster.kubectl("delete", "cm", "keep", "-n", namespace)
    assert proc.returncode != 0
    assert f"ValidatePolicy {namespace}/locked: locked configmaps cannot be deleted" in proc.stderr
    kubectl_ok(cluster, "get", "cm", "keep", "-n", namespace)
    kubectl_ok(cluster, "delete", "cm", "drop", "-n", namespace)


def _wrong_type(failure_policy: str) -> str:
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {{name: wrong-type-{failure_policy.lower()}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap, labelSelector: {{matchLabels: {{fp: {failure_policy}}}}}}}]
  validateRules:
  - targetOperations: [CREATE]
    failurePolicy: {failure_policy}
    cel: object.metadata.name
"""


def test_rule_that_cannot_be_evaluated_follows_its_failure_policy(cluster: Cluster, webhook: Webhook,
                                                                  namespace: str) -> None:
    apply_policy(cluster, _wrong_type("Fail"), "vp", "wrong-type-fail", 1, namespace)
    apply_policy(cluster, _wrong_type("Ignore"), "vp", "wrong-type-ignore", 1, namespace)
    denied = cluster.kubectl("create", "-n", namespace, "-f", "-", input=configmap("a", {"fp": "Fail"}))
    assert denied.returncode != 0
    assert f"policy ValidatePolicy {namespace}/wrong-type-fail, rule 0: " in denied.stderr
    assert "must return a bool or a map {valid, reason}" in denied.stderr

    ignored = cluster.kubectl("create", "-n", namespace, "-f", "-", input=configmap("b", {"fp": "Ignore"}))
    assert ignored.returncode == 0, ignored.stderr
    assert f"Warning: policy ValidatePolicy {namespace}/wrong-type-ignore, rule 0: " in ignored.stderr
    assert "failurePolicy Ignore: rule skipped" in ignored.stderr


MALFORMED = {
    "oversell-factor": ("op", """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: bad-factor}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {type: resourcesOversell, operation: replace, resourcesOversell: {cpuFactor: "1.5"}}
""", ["spec.overrideRules[0].overriders.template.resourcesOversell.cpuFactor"]),
    "cue": ("op", """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: bad-cue}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      cue: |-
        object: _ @tag(object)
        half: len(object.metadata.name) / 2
        patches: [{op: "add", path: "/metadata/annotations/half", value: "\\(half)"}]
""", ["spec.overrideRules[0].overriders.cue", "line 2, column 33", "`/` is not supported"]),
    "invalid-cel": ("vp", """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: bad-cel}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - targetOperations: [CREATE]
    cel: 'object.metadata.name =='
""", ["spec.validateRules[0].cel", "invalid CEL"]),
    "several-problems": ("vp", """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: bad-several}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - targetOperations: [CREATE]
    cel: object.metadata.nosuchfn()
  - targetOperations: [CREATE]
    template:
      type: condition
      condition: {cond: In, dataRef: {from: current, path: /metadata/name}, value: {string: x}, message: m}
    validationActions: [Explode]
""", ["spec.validateRules[0].cel", "spec.validateRules[1].template.condition.value",
      "spec.validateRules[1].validationActions[0]"]),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_policy_is_refused_with_the_field_path(cluster: Cluster, webhook: Webhook, namespace: str,
                                                         case: str) -> None:
    resource, text, expected = MALFORMED[case]
    name = yaml.safe_load(text)["metadata"]["name"]
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=text)
    assert proc.returncode != 0, proc.stdout
    assert "denied the request" in proc.stderr
    for fragment in expected:
        assert fragment in proc.stderr
    assert cluster.kubectl("get", resource, name, "-n", namespace).returncode != 0


def test_malformed_cluster_policy_is_refused(cluster: Cluster, webhook: Webhook) -> None:
    name = f"e2e-bad-{uuid.uuid4().hex[:8]}"
    text = f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Pod}}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      plaintext: [{{op: move, path: /metadata/annotations/x, value: y}}]
"""
    try:
        proc = cluster.kubectl("apply", "-f", "-", input=text)
        assert proc.returncode != 0, proc.stdout
        assert f"ClusterOverridePolicy {name}: spec.overrideRules[0].overriders.plaintext[0].op" in proc.stderr
        assert cluster.kubectl("get", "cop", name).returncode != 0
    finally:
        cluster.kubectl("delete", "cop", name, "--ignore-not-found")


def test_malformed_update_is_refused_and_the_stored_policy_stays(cluster: Cluster, webhook: Webhook,
                                                                 namespace: str) -> None:
    good = MALFORMED["oversell-factor"][1].replace('cpuFactor: "1.5"', 'cpuFactor: "0.5"')
    apply_policy(cluster, good, "op", "bad-factor", 1, namespace)
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=MALFORMED["oversell-factor"][1])
    assert proc.returncode != 0
    assert "spec.overrideRules[0].overriders.template.resourcesOversell.cpuFactor" in proc.stderr
    stored = json.loads(kubectl_ok(cluster, "get", "op", "bad-factor", "-n", namespace, "-o", "json"))
    assert stored["spec"]["overrideRules"][0]["overriders"]["template"]["resourcesOversell"] == {"cpuFactor": "0.5"}
    assert kubectl_ok(cluster, "get", "op", "bad-factor", "-n", namespace, "--no-headers").split()[1:3] == \
        ["True", "1"]
