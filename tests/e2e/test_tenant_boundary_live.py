"""Namespace owners write their own policies, and those policies stay in their namespace
(issue 26), against the real API server: the ClusterRole of config/ aggregated into ``edit``, a
ServiceAccount bound to ``edit`` acting through impersonation, and our webhook refusing what
would read another namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT, Cluster
from tests.e2e.conftest import Webhook, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster

AUTHORS = ROOT / "config" / "base" / "rbac" / "policy-authors.yaml"
FIELD = "spec.overrideRules[0].overriders.template.valueRef.k8s.namespace"


def policy(name: str, namespace: str) -> str:
    """An OverridePolicy copying a ConfigMap's value into each new ConfigMap's annotation."""
    return json.dumps({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": name},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap",
                                        "labelSelector": {"matchLabels": {"copy": name}}}],
                 "overrideRules": [{"targetOperations": ["CREATE"], "overriders": {"template": {
                     "type": "annotations", "operation": "add", "path": "copied",
                     "valueRef": {"from": "k8s", "path": "/data/value", "k8s": {
                         "apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": "source"}}}}}]}})


@pytest.fixture
def author(cluster: Cluster, namespace: str) -> Iterator[str]:
    """A ServiceAccount of ``namespace`` bound to the built-in ``edit`` role there, once our
    ClusterRole is aggregated into it; its name for ``--as``."""
    kubectl_ok(cluster, "apply", "-f", str(AUTHORS))
    kubectl_ok(cluster, "-n", namespace, "create", "serviceaccount", "author")
    kubectl_ok(cluster, "-n", namespace, "create", "rolebinding", "author-edit", "--clusterrole=edit",
               f"--serviceaccount={namespace}:author")
    user = f"system:serviceaccount:{namespace}:author"
    # kube-controller-manager's clusterrole-aggregation controller (running on 1.20 too) adds
    # our rules to edit; nothing here binds our ClusterRole directly.
    aggregated = wait_for(lambda: cluster.kubectl("auth", "can-i", "create", "overridepolicies.policy.kcloudlabs.io",
                                                  "-n", namespace, f"--as={user}").stdout.strip() == "yes", 30, 0.3)
    assert aggregated, kubectl_ok(cluster, "get", "clusterrole", "edit", "-o", "yaml")
    yield user
    cluster.kubectl("delete", "-f", str(AUTHORS), "--ignore-not-found")


def create_labelled(cluster: Cluster, namespace: str, name: str, labels: dict[str, str]) -> str:
    """Create a ConfigMap (afresh) with ``labels``: its ``copied`` annotation, or kubectl's error."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}
    cluster.kubectl("-n", namespace, "delete", "configmap", name, "--ignore-not-found")
    made = cluster.kubectl("-n", namespace, "create", "-f", "-", "-o", "json", input=json.dumps(cm))
    if made.returncode != 0:
        return made.stderr
    return str((json.loads(made.stdout)["metadata"].get("annotations") or {}).get("copied"))


def test_a_namespace_editor_writes_policies_that_stay_in_their_namespace(
        cluster: Cluster, webhook: Webhook, namespace: str, other_namespace: str, author: str) -> None:
    for ns, value in ((namespace, "ours"), (other_namespace, "theirs")):
        kubectl_ok(cluster, "-n", ns, "create", "configmap", "source", f"--from-literal=value={value}")
    as_author = ("-n", namespace, f"--as={author}")

    # Allowed by RBAC, admitted by the webhook: a policy reading its own namespace.
    kubectl_ok(cluster, "create", *as_author, "-f", "-", input=policy("own", namespace))
    assert wait_for(lambda: create_labelled(cluster, namespace, "copy-own", {"copy": "own"}) == "ours", 15)

    # The cluster kinds are not the namespace's: refused by RBAC, before any webhook.
    cluster_policy = json.loads(policy("everyone", namespace))
    cluster_policy["kind"] = "ClusterOverridePolicy"
    denied = cluster.kubectl("create", f"--as={author}", "-f", "-", input=json.dumps(cluster_policy))
    assert denied.returncode != 0
    assert 'cannot create resource "clusteroverridepolicies"' in denied.stderr, denied.stderr
    assert "admission webhook" not in denied.stderr

    # Reading team-b's ConfigMap: RBAC lets the author create policies, our webhook refuses this one.
    refused = cluster.kubectl("create", *as_author, "-f", "-", input=policy("steal", other_namespace))
    assert refused.returncode != 0
    assert 'admission webhook "' in refused.stderr and "kinitiras.kcloudlabs.io" in refused.stderr, refused.stderr
    assert f"{FIELD}: namespace {other_namespace} is outside this policy's namespace" in refused.stderr
    assert cluster.kubectl("-n", namespace, "get", "op", "steal").returncode != 0

    # A namespace from a placeholder is admitted, and refused when the rule runs: the object
    # asking for team-b's value is not created (failurePolicy Fail), with the boundary named.
    kubectl_ok(cluster, "create", *as_author, "-f", "-", input=policy("dynamic", "{{metadata.labels.from}}"))
    assert wait_for(lambda: create_labelled(cluster, namespace, "copy-dyn", {"copy": "dynamic", "from": namespace})
                    == "ours", 15)
    answer = create_labelled(cluster, namespace, "copy-dyn", {"copy": "dynamic", "from": other_namespace})
    assert 'admission webhook "mutate.kinitiras.kcloudlabs.io" denied' in answer, answer
    assert f"ConfigMap {other_namespace}/source is outside namespace '{namespace}'" in answer
    assert "theirs" not in answer
