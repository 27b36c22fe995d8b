"""Namespaced policies read only inside their namespace (issue 26): refused at admission when
written literally, a rule error naming the boundary when a placeholder leads outside."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.admission import sidecars as sidecar_templates
from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.convert import kubemod
from kinitiras_py.engine.checking import boundary
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rules import sidecars
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.refs import resolver, scoped
from kinitiras_py.refs.store import Store
from tests.cli import run

Obj = dict[str, Any]
T = "spec.overrideRules[0].overriders.template"
RULE = "a namespaced policy reads only objects in its own namespace"
SECRET_B: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team-b"},
                 "data": {"password": "c2VjcmV0"}}
SECRET_A: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team-a"},
                 "data": {"password": "b3Vycw=="}}


def steal(k8s: Obj, kind: str = "OverridePolicy", namespace: str | None = "team-a", **rule: Any) -> Obj:
    """The issue's policy: an annotation copied from another object through a k8s reference."""
    meta: Obj = {"name": "steal"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind, "metadata": meta, "spec": {
        "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
        "overrideRules": [{**rule, "overriders": {"template": {
            "type": "annotations", "operation": "add", "path": "stolen",
            "valueRef": {"from": "k8s", "path": "/data/password", "k8s": k8s}}}}]}}


def configmap(namespace: str = "team-a", **meta: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": namespace, **meta},
            "data": {"a": "b"}}


class RecordingStore:
    """Objects given up front; every read a rule makes, as (kind, namespace, name)."""

    def __init__(self, objects: Sequence[Obj] = ()) -> None:
        self.inner = StaticStore(objects)
        self.reads: list[tuple[str, str | None, str | None]] = []

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        self.reads.append((kind, namespace, name))
        return await self.inner.get(api_version, kind, namespace, name)

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        self.reads.append((kind, namespace, None))
        return await self.inner.list(api_version, kind, namespace)


def mutator(*policies: Obj, store: Store) -> Pipeline:
    return Pipeline(PolicyIndex([compile_policy(p) for p in policies]), PolicyIndex(), store)


def refused(policy: Obj) -> list[tuple[str, str]]:
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy)
    return [(e.path, e.reason) for e in caught.value.errors]


# --- the issue's example, through the CLI --------------------------------------------------------


def _files(tmp_path: Path, policy: Obj) -> tuple[Path, Path, Path]:
    files = (tmp_path / "policy.yaml", tmp_path / "cm.yaml", tmp_path / "context.yaml")
    for path, doc in zip(files, (policy, configmap(), SECRET_B), strict=True):
        path.write_text(yaml.safe_dump(doc))
    return files


def test_apply_refuses_the_issues_example_naming_the_field(tmp_path: Path) -> None:
    policy, resource, context = _files(tmp_path, steal({"apiVersion": "v1", "kind": "Secret",
                                                        "namespace": "team-b", "name": "db"}))
    code, out, err = run("apply", "--policy", policy, "--resource", resource, "--context", context)
    assert code == 2 and "c2VjcmV0" not in out, out
    assert f"{T}.valueRef.k8s.namespace: namespace team-b is outside this policy's namespace 'team-a'" in err
    code, out, err = run("render", policy)
    assert code == 2 and f"{T}.valueRef.k8s.namespace" in err and RULE in err
    (tmp_path / "kinitiras-test.yaml").write_text(yaml.safe_dump({
        "name": "steal", "policies": ["policy.yaml"], "context": ["context.yaml"],
        "cases": [{"name": "copied", "resource": "cm.yaml", "expect": {"allowed": True}}]}))
    code, out, err = run("test", tmp_path)
    assert code != 0 and f"{T}.valueRef.k8s.namespace" in out + err


def test_a_cluster_policy_still_reads_any_namespace(tmp_path: Path) -> None:
    policy, resource, context = _files(tmp_path, steal({"apiVersion": "v1", "kind": "Secret", "namespace": "team-b",
                                                        "name": "db"}, kind="ClusterOverridePolicy", namespace=None))
    code, out, _ = run("apply", "--policy", policy, "--resource", resource, "--context", context)
    assert code == 0 and "stolen: c2VjcmV0" in out


# --- refused at admission, with the field named --------------------------------------------------


@pytest.mark.parametrize(("k8s", "field", "says"), [
    ({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "kube-system", "name": "c"}, "namespace",
     "namespace kube-system is outside"),
    ({"apiVersion": "v1", "kind": "Node", "name": "n1"}, "kind", "Node is cluster-scoped"),
    ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "admin"}, "kind",
     "ClusterRole is cluster-scoped"),
    ({"apiVersion": "v1", "kind": "Namespace", "name": "team-b"}, "name", "Namespace team-b is not"),
])
def test_literal_reads_outside_are_refused(k8s: Obj, field: str, says: str) -> None:
    problems = refused(steal(k8s))
    assert [p for p, _ in problems] == [f"{T}.valueRef.k8s.{field}"]
    assert says in problems[0][1] and RULE in problems[0][1]


@pytest.mark.parametrize("k8s", [
    {"apiVersion": "v1", "kind": "Secret", "namespace": "team-a", "name": "db"},
    {"apiVersion": "v1", "kind": "Secret", "name": "db"},
    {"apiVersion": "v1", "kind": "Secret", "namespace": "{{metadata.labels.from}}", "name": "db"},
    {"apiVersion": "v1", "kind": "Namespace", "name": "team-a"},
    {"apiVersion": "v1", "kind": "Namespace", "name": "{{metadata.namespace}}"},
])
def test_reads_that_may_stay_inside_are_admitted(k8s: Obj) -> None:
    assert compile_policy(steal(k8s)).namespace == "team-a"


def test_every_reference_site_is_checked() -> None:
    outside = {"from": "k8s", "path": "/data", "k8s": {"apiVersion": "v1", "kind": "ConfigMap",
                                                       "namespace": "team-b", "name": "c"}}
    secret = {"from": "http", "path": "/x", "http": {"url": "https://a.example/",
                                                     "auth": {"secretRef": {"name": "s", "namespace": "team-b"}}}}
    validate: Obj = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ValidatePolicy",
                     "metadata": {"name": "v", "namespace": "team-a"}, "spec": {
                         "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                         "valueRefs": {"shared": outside},
                         "validateRules": [{"template": {"type": "condition", "condition": {
                             "cond": "Equal", "dataRef": outside, "valueRef": secret, "message": "m"}}}]}}
    paths = {p for p, _ in refused(validate)}
    cond = "spec.validateRules[0].template.condition"
    assert paths == {"spec.valueRefs.shared.k8s.namespace", f"{cond}.dataRef.k8s.namespace",
                     f"{cond}.valueRef.http.auth.secretRef.namespace"}
    assert compile_policy({**validate, "kind": "ClusterValidatePolicy",
                           "metadata": {"name": "v"}}).namespace is None


SIDECAR: Obj = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: mesh, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      template:
        type: sidecar
        operation: add
        sidecar:
          configMapRef: {name: proxy, namespace: team-b, key: template}
          valueRefs:
            zone: {from: k8s, path: /metadata/labels/zone, k8s: {apiVersion: v1, kind: Node, name: n1}}
""")


def test_a_sidecar_configmap_and_its_value_refs_outside_are_refused() -> None:
    paths = {p for p, _ in refused(SIDECAR)}
    assert paths == {f"{T}.sidecar.configMapRef.namespace", f"{T}.sidecar.valueRefs[zone].k8s.kind"}


# --- at run time: placeholders, owners, sidecar ConfigMaps, Secrets --------------------------------


async def test_a_placeholder_namespace_outside_is_a_rule_error_naming_the_boundary() -> None:
    store = RecordingStore([SECRET_A, SECRET_B])
    policy = steal({"apiVersion": "v1", "kind": "Secret", "namespace": "{{metadata.labels.from}}", "name": "db"})
    p = mutator(policy, store=store)
    inside = await p.mutate(Request("CREATE", configmap(labels={"from": "team-a"}), namespace="team-a"))
    assert inside.object["metadata"]["annotations"] == {"stolen": "b3Vycw=="}
    outside = await p.mutate(Request("CREATE", configmap(labels={"from": "team-b"}), namespace="team-a"))
    assert not outside.allowed and outside.patch == []
    assert "Secret team-b/db is outside namespace 'team-a'" in str(outside.failure) and RULE in str(outside.failure)
    assert store.reads == [("Secret", "team-a", "db")]  # the read outside never reached the store
    ignored = mutator(steal(policy["spec"]["overrideRules"][0]["overriders"]["template"]["valueRef"]["k8s"],
                            failurePolicy="Ignore"), store=store)
    skipped = await ignored.mutate(Request("CREATE", configmap(labels={"from": "team-b"}), namespace="team-a"))
    assert skipped.allowed and skipped.patch == [] and any("outside namespace" in w for w in skipped.warnings)


async def test_a_reference_without_a_namespace_reads_the_policys_own() -> None:
    store = RecordingStore([SECRET_B, SECRET_A])
    by_label = {"apiVersion": "v1", "kind": "Secret", "labelSelector": {"matchLabels": {}}}
    mutation = await mutator(steal(by_label), store=store).mutate(Request("CREATE", configmap(), namespace="team-a"))
    assert mutation.object["metadata"]["annotations"] == {"stolen": "b3Vycw=="}
    assert store.reads == [("Secret", "team-a", None)]


async def test_the_policys_own_namespace_object_is_the_only_cluster_scoped_read() -> None:
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {"zone": n}}}
                  for n in ("team-a", "team-b", "a-team")]
    store = RecordingStore(namespaces)
    own = steal({"apiVersion": "v1", "kind": "Namespace", "name": "{{metadata.labels.ns}}"})
    own["spec"]["overrideRules"][0]["overriders"]["template"]["valueRef"]["path"] = "/metadata/labels/zone"
    p = mutator(own, store=store)
    mutation = await p.mutate(Request("CREATE", configmap(labels={"ns": "team-a"}), namespace="team-a"))
    assert mutation.object["metadata"]["annotations"] == {"stolen": "team-a"}
    other = await p.mutate(Request("CREATE", configmap(labels={"ns": "team-b"}), namespace="team-a"))
    assert not other.allowed and "Namespace team-b is cluster-scoped" in str(other.failure)
    listed = copy.deepcopy(own)
    listed["spec"]["overrideRules"][0]["overriders"]["template"]["valueRef"]["k8s"] = {
        "apiVersion": "v1", "kind": "Namespace", "labelSelector": {"matchLabels": {}}}
    found = await mutator(listed, store=store).mutate(Request("CREATE", configmap(), namespace="team-a"))
    assert found.object["metadata"]["annotations"] == {"stolen": "team-a"}  # a-team's would come first


OWNED: Obj = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: owner, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      template:
        type: annotations
        operation: add
        path: owner-zone
        valueRef: {from: owner, path: /metadata/labels/zone}
""")


def pod(namespace: str, owner_kind: str, api_version: str = "apps/v1") -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": namespace,
        "ownerReferences": [{"apiVersion": api_version, "kind": owner_kind, "name": "o", "controller": True}]}}


async def test_owner_references_stay_inside() -> None:
    objects = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "o", "namespace": n,
                                                                            "labels": {"zone": n}}}
               for n in ("team-a", "team-b")]
    objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "o", "labels": {"zone": "node"}}})
    store = RecordingStore(objects)
    p = mutator(OWNED, store=store)
    own = await p.mutate(Request("CREATE", pod("team-a", "ReplicaSet"), namespace="team-a"))
    assert own.object["metadata"]["annotations"] == {"owner-zone": "team-a"}
    # A Pod created without metadata.namespace (the API server takes it from the URL): its owner
    # is read in the policy's namespace.
    unnamed = pod("team-a", "ReplicaSet")
    del unnamed["metadata"]["namespace"]
    assert (await p.mutate(Request("CREATE", unnamed, namespace="team-a"))).object["metadata"]["annotations"] == {
        "owner-zone": "team-a"}
    # A static pod's owner is its Node: cluster-scoped, so not readable.
    node = await p.mutate(Request("CREATE", pod("team-a", "Node", "v1"), namespace="team-a"))
    assert not node.allowed and "Node o is cluster-scoped" in str(node.failure)
    assert store.reads == [("ReplicaSet", "team-a", "o")] * 2


async def test_a_sidecar_configmap_outside_is_never_read() -> None:
    rule = sidecars.SidecarRule(policy_ref="OverridePolicy team-a/mesh", policy_name="mesh", path="p", spec_json="{}",
                                config_map=("team-b", "proxy", "template"))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "proxy", "namespace": "team-b"},
          "data": {"template": "containers: []"}}
    store = RecordingStore([cm])
    with pytest.raises(LookupError, match="ConfigMap team-b/proxy is outside namespace 'team-a'"):
        await sidecar_templates.template_text(rule, store, 1.0, "team-a")
    assert store.reads == []
    assert await sidecar_templates.template_text(rule, store, 1.0, None) == "containers: []"


class RecordingHttp:
    def __init__(self) -> None:
        self.specs: list[Obj] = []

    async def fetch(self, spec: Obj, namespaced: bool) -> Obj:
        self.specs.append(spec)
        return {"body": {}, "header": {}}


async def test_a_secret_ref_outside_is_refused_before_any_request() -> None:
    http = RecordingHttp()
    ref = {"from": "http", "http": {"url": "https://a.example/", "auth": {"secretRef": {"name": "s",
                                                                                        "namespace": "team-b"}}}}
    with pytest.raises(resolver.LookupFailure, match="Secret team-b/s is outside namespace 'team-a'"):
        await resolver.resolve(ref, configmap(), StaticStore(), http, "team-a", namespaced=True)
    assert http.specs == []
    await resolver.resolve(ref, configmap(), StaticStore(), http, None, namespaced=False)  # a cluster policy's
    unnamed = {"from": "http", "http": {"url": "https://a.example/", "auth": {"secretRef": {"name": "s"}}}}
    await resolver.resolve(unnamed, configmap(), StaticStore(), http, "team-a", namespaced=True)
    assert [s["auth"]["secretRef"]["namespace"] for s in http.specs] == ["team-b", "team-a"]


class DiscoveryStore(RecordingStore):
    """A store that knows scopes from discovery, as the webhook's does."""

    async def namespaced(self, api_version: str, kind: str) -> bool:
        return kind != "ClusterIssuer"


async def test_a_cluster_scoped_kind_known_only_to_discovery_is_refused() -> None:
    inner = DiscoveryStore([{"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": "ca"}}])
    store = scoped.bound(inner, "team-a")
    with pytest.raises(boundary.Crossing, match="ClusterIssuer ca is cluster-scoped"):
        await store.get("cert-manager.io/v1", "ClusterIssuer", "team-a", "ca")
    with pytest.raises(boundary.Crossing):
        await store.list("cert-manager.io/v1", "ClusterIssuer", None)
    assert inner.reads == []
    assert await scoped.bound(inner, None).get("cert-manager.io/v1", "ClusterIssuer", None, "ca") is not None


async def test_a_refusal_is_never_remembered() -> None:
    policy = steal({"apiVersion": "v1", "kind": "Secret", "namespace": "{{metadata.labels.from}}", "name": "db"},
                   failurePolicy="Ignore")
    p = mutator(policy, store=RecordingStore([SECRET_A, SECRET_B]))
    for source, fingerprint in (("team-a", b"inside"), ("team-a", b"inside"), ("team-b", b"out"), ("team-b", b"out")):
        request = Request("CREATE", configmap(labels={"from": source}), namespace="team-a", fingerprint=fingerprint)
        mutation = await p.mutate(request)
        assert mutation.stamp is None  # nor is the answer remembered (admission/answers.py)
        if source == "team-b":
            assert mutation.patch == [] and any("outside namespace" in w for w in mutation.warnings)
    assert p.mutations.hits == 1  # the read inside, the second time; never the refusal


def test_kubemod_synthetic_references_of_a_namespaced_policy() -> None:
    node_zone = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: zone, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  matchConditions:
  - select: $.syntheticRefs.namespace.metadata.labels.zone
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/labels/zone, valueTemplate: '"{{ namespace }}"'}]
""")
    assert compile_policy(node_zone).namespace == "team-a"  # its own Namespace: allowed
    node_zone["spec"]["valueRefs"] = {"node": kubemod.NODE_REF}
    node_zone["spec"]["matchConditions"] = [{"select": "$.syntheticRefs.node.metadata.labels.zone"}]
    [(path, reason)] = refused(node_zone)
    assert path == "spec.valueRefs.node.k8s.kind" and "Node is cluster-scoped" in reason
