"""Policies over their life: update and delete take effect quickly, scope, status columns, Events."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from typing import Any

import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster

_names = itertools.count()


def new_configmap_labels(cluster: Cluster, namespace: str, prefix: str = "cm") -> dict[str, str]:
    """Create a ConfigMap with a fresh name; the labels it was admitted with."""
    name = f"{prefix}-{next(_names)}"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=json.dumps(cm))
    out = kubectl_ok(cluster, "get", "cm", name, "-n", namespace, "-o", "json")
    return json.loads(out)["metadata"].get("labels") or {}


def tier_policy(value: str, rules: int = 1) -> str:
    extra = "".join(f"""
  - targetOperations: [CREATE]
    overriders:
      template: {{type: annotations, operation: add, path: example.com/extra-{i}, value: {{string: "{i}"}}}}"""
                    for i in range(1, rules))
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {{name: tier}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {{type: labels, operation: add, path: example.com/tier, value: {{string: {value}}}}}{extra}
"""


def test_policy_update_takes_effect_on_new_requests(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, tier_policy("gold"), "op", "tier", 1, namespace)
    assert new_configmap_labels(cluster, namespace) == {"example.com/tier": "gold"}

    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=tier_policy("silver"))
    started = time.monotonic()
    switched = wait_for(lambda: new_configmap_labels(cluster, namespace) == {"example.com/tier": "silver"}, 30)
    assert switched, f"still the old value {time.monotonic() - started:.1f} s after the update"
    # Once switched, it stays switched.
    assert new_configmap_labels(cluster, namespace) == {"example.com/tier": "silver"}


def test_policy_delete_removes_the_behaviour(cluster: Cluster, webhook: Webhook,
                                                                namespace: str) -> None:
    apply_policy(cluster, tier_policy("gold"), "op", "tier", 1, namespace)
    assert new_configmap_labels(cluster, namespace) == {"example.com/tier": "gold"}

    kubectl_ok(cluster, "delete", "op", "tier", "-n", namespace)
    started = time.monotonic()
    gone = wait_for(lambda: new_configmap_labels(cluster, namespace) == {}, 30)
    assert gone, f"still labelled {time.monotonic() - started:.1f} s after the delete"
    assert new_configmap_labels(cluster, namespace) == {}


def test_override_policy_does_not_touch_other_namespaces(cluster: Cluster, webhook: Webhook, namespace: str,
                                                         other_namespace: str) -> None:
    apply_policy(cluster, tier_policy("gold"), "op", "tier", 1, namespace)
    assert new_configmap_labels(cluster, namespace) == {"example.com/tier": "gold"}
    assert new_configmap_labels(cluster, other_namespace) == {}


def test_get_shows_ready_and_the_rule_count(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, tier_policy("gold", rules=3), "op", "tier", 3, namespace)
    header = cluster.kubectl("get", "op", "tier", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "READY", "RULES", "AGE"]
    listed = kubectl_ok(cluster, "get", "kinitiras", "-n", namespace, "--no-headers").split()
    assert listed[:3] == ["overridepolicy.policy.kcloudlabs.io/tier", "True", "3"]

    # An update with fewer rules: the count and the Ready condition follow the new generation.
    apply_policy(cluster, tier_policy("gold", rules=1), "op", "tier", 1, namespace)

    def ready_for_current_generation() -> dict[str, Any] | None:
        policy = json.loads(kubectl_ok(cluster, "get", "op", "tier", "-n", namespace, "-o", "json"))
        ready = next(c for c in policy["status"]["conditions"] if c["type"] == "Ready")
        return ready if ready["observedGeneration"] == policy["metadata"]["generation"] else None

    ready = wait_for(ready_for_current_generation, 30)
    assert ready, kubectl_ok(cluster, "get", "op", "tier", "-n", namespace, "-o", "yaml")
    assert (ready["status"], ready["reason"]) == ("True", "Compiled")


OWNER_LABEL = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Pod, labelSelector: {{matchLabels: {{mode: "{mode}"}}}}}}]
  overrideRules:
  - targetOperations: [CREATE]
    failurePolicy: Fail
    overriders:
      template:
        {{type: labels, operation: add, path: example.com/owner, valueRef: {{from: owner, path: metadata.name}}}}
"""


def pod(name: str, mode: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"mode": mode}},
                       "spec": {"containers": [{"name": "app", "image": "nginx"}]}})


def rule_errors(cluster: Cluster, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    events = json.loads(kubectl_ok(cluster, "get", "events", "-n", namespace, "-o", "json"))["items"]
    return [e for e in events if e["reason"] == "RuleError" and e["involvedObject"].get("kind") == kind
            and e["involvedObject"].get("name") == name]


def test_runtime_rule_failure_denies_and_emits_a_warning_event(cluster: Cluster, webhook: Webhook,
                                                               namespace: str) -> None:
    apply_policy(cluster, OWNER_LABEL.format(name="owner-label", mode="real"), "op", "owner-label", 1, namespace)
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod("lonely", "real"))
    assert proc.returncode != 0
    reason = (f"policy OverridePolicy {namespace}/owner-label, rule 0: "
              "owner reference: the object has no ownerReferences")
    assert reason in proc.stderr
    assert cluster.kubectl("get", "pod", "lonely", "-n", namespace).returncode != 0

    events = wait_for(lambda: rule_errors(cluster, namespace, "OverridePolicy", "owner-label"), 30)
    assert events, kubectl_ok(cluster, "get", "events", "-n", namespace)
    event = events[0]  # type: ignore[index]
    assert event["type"] == "Warning"
    assert event["message"] == reason
    assert event["involvedObject"]["namespace"] == namespace
    assert event["source"]["component"] == "kinitiras-py"
    shown = kubectl_ok(cluster, "get", "events", "-n", namespace)
    assert "Warning" in shown and "RuleError" in shown and "overridepolicy/owner-label" in shown


def test_dry_run_failure_emits_no_event(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    apply_policy(cluster, OWNER_LABEL.format(name="dry-only", mode="dry"), "op", "dry-only", 1, namespace)
    apply_policy(cluster, OWNER_LABEL.format(name="real-only", mode="real"), "op", "real-only", 1, namespace)
    dry = cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", input=pod("dry", "dry"))
    assert dry.returncode != 0
    assert f"policy OverridePolicy {namespace}/dry-only, rule 0: owner reference" in dry.stderr
    # A real failure afterwards: once its Event is there, one for the dry run would be too.
    assert cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod("real", "real")).returncode != 0
    assert wait_for(lambda: rule_errors(cluster, namespace, "OverridePolicy", "real-only"), 30)
    assert rule_errors(cluster, namespace, "OverridePolicy", "dry-only") == []


def test_cluster_policy_rule_failure_event_goes_to_default(cluster: Cluster, webhook: Webhook,
                                                           namespace: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    name = f"e2e-owner-{suffix}"
    text = OWNER_LABEL.format(name=name, mode=suffix).replace("kind: OverridePolicy", "kind: ClusterOverridePolicy")
    try:
        apply_policy(cluster, text, "cop", name, 1)
        proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=pod("lonely", suffix))
        assert proc.returncode != 0
        assert f"policy ClusterOverridePolicy {name}, rule 0: owner reference" in proc.stderr
        events = wait_for(lambda: rule_errors(cluster, "default", "ClusterOverridePolicy", name), 30)
        assert events, kubectl_ok(cluster, "get", "events", "-n", "default")
        assert events[0]["type"] == "Warning"  # type: ignore[index]
    finally:
        cluster.kubectl("delete", "cop", name, "--ignore-not-found")
