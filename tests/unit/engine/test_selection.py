"""Selecting the policies and rules that apply to an object: scope, order, operations,
resource selectors, and the index that keeps non-matching policies out of the way."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.kinds.cel import CelOverrider
from kinitiras_py.engine.kinds.inject import InjectOverrider
from kinitiras_py.engine.kinds.javascript import JavascriptCheck, JavascriptOverrider
from kinitiras_py.engine.kinds.plaintext import PlaintextOverrider
from kinitiras_py.engine.kinds.select import Selected
from kinitiras_py.engine.kinds.sidecar import SidecarOverrider
from kinitiras_py.engine.matching.selection import PolicyIndex, object_group, object_namespace
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.policies.compiled import CompiledPolicy, CompiledValidateRule
from kinitiras_py.engine.policies.compiling import compile_policy

API = "policy.kcloudlabs.io/v1alpha1"
CLUSTER_KINDS = ("ClusterOverridePolicy", "ClusterValidatePolicy")


def pod(name: str = "web-0", namespace: str | None = "team-a", **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "node-1"}}


DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team-a"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}


def policy(kind: str, name: str, namespace: str | None = None, selectors: list[Any] | None = None,
           operations: list[list[str]] | None = None) -> CompiledPolicy:
    """A compiled policy with one rule per entry of ``operations`` (default: one rule, every op)."""
    ops = operations if operations is not None else [[]]
    if kind in ("ClusterValidatePolicy", "ValidatePolicy"):
        rules: list[Any] = [{"cel": "true", "targetOperations": o} for o in ops]
        field = "validateRules"
    else:
        rules = [{"overriders": {"cel": "[]"}, "targetOperations": o} for o in ops]
        field = "overrideRules"
    meta: dict[str, Any] = {"name": name}
    if kind not in CLUSTER_KINDS:
        meta["namespace"] = namespace or "team-a"
    spec: dict[str, Any] = {field: rules}
    if selectors is not None:
        spec["resourceSelectors"] = selectors
    return compile_policy({"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec})


def with_part(rule: Any, part: Any) -> Any:
    """``rule`` with one more overrider (an override rule) or check (a validate rule)."""
    if isinstance(rule, CompiledValidateRule):
        return dataclasses.replace(rule, checks=(*rule.checks, part))
    return dataclasses.replace(rule, overriders=(*rule.overriders, part))


def for_kind(kind: str, api_version: str = "v1", **extra: Any) -> list[dict[str, Any]]:
    return [{"apiVersion": api_version, "kind": kind, **extra}]


def refs(index: PolicyIndex, obj: dict[str, Any], operation: str = "CREATE", namespace: str | None = None
         ) -> list[tuple[str, int]]:
    return [(p.ref, r.index) for p, r in index.matching(obj, operation, namespace)]


# --- targetOperations ---------------------------------------------------------------------------

@pytest.mark.parametrize(("operations", "create", "update", "delete", "connect"), [
    ([], True, True, True, True),
    (["*"], True, True, True, True),              # kinitiras: "*" matched nothing
    (["CREATE", "*"], True, True, True, True),
    (["CREATE"], True, False, False, False),
    (["UPDATE", "DELETE"], False, True, True, False),
    (["CONNECT"], False, False, False, True),
])
def test_target_operations(operations: list[str], create: bool, update: bool, delete: bool, connect: bool) -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "p", operations=[operations])])
    for operation, expected in (("CREATE", create), ("UPDATE", update), ("DELETE", delete), ("CONNECT", connect)):
        assert bool(refs(index, pod(), operation)) is expected, operation


def test_only_the_rules_for_the_operation_are_yielded_in_written_order() -> None:
    p = policy("ClusterValidatePolicy", "p", operations=[["UPDATE"], [], ["CREATE"], ["CREATE", "UPDATE"]])
    index = PolicyIndex([p])
    assert refs(index, pod(), "CREATE") == [("ClusterValidatePolicy p", i) for i in (1, 2, 3)]
    assert refs(index, pod(), "UPDATE") == [("ClusterValidatePolicy p", i) for i in (0, 1, 3)]
    assert refs(index, pod(), "DELETE") == [("ClusterValidatePolicy p", 1)]


# --- order ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True])
def test_cluster_policies_first_then_namespaced_each_by_name(reverse: bool) -> None:
    policies = [
        policy("OverridePolicy", "a-op"),
        policy("ClusterOverridePolicy", "z-cop", operations=[[], []]),
        policy("OverridePolicy", "m-op"),
        policy("ClusterOverridePolicy", "b-cop"),
    ]
    index = PolicyIndex(reversed(policies) if reverse else policies)
    assert refs(index, pod()) == [
        ("ClusterOverridePolicy b-cop", 0),
        ("ClusterOverridePolicy z-cop", 0), ("ClusterOverridePolicy z-cop", 1),
        ("OverridePolicy team-a/a-op", 0),
        ("OverridePolicy team-a/m-op", 0),
    ]
    assert [p.name for p in index] == ["b-cop", "z-cop", "a-op", "m-op"]


def test_validate_kinds_order_the_same_way() -> None:
    index = PolicyIndex([policy("ValidatePolicy", "a"), policy("ClusterValidatePolicy", "b")])
    assert [ref for ref, _ in refs(index, pod())] == ["ClusterValidatePolicy b", "ValidatePolicy team-a/a"]


# --- namespace scope -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["OverridePolicy", "ValidatePolicy"])
def test_namespaced_policy_applies_only_in_its_own_namespace(kind: str) -> None:
    index = PolicyIndex([policy(kind, "p", namespace="a")])
    assert refs(index, pod(namespace="a")) == [(f"{kind} a/p", 0)]
    assert refs(index, pod(namespace="b")) == []
    assert refs(index, NODE) == []        # cluster-scoped objects
    assert refs(index, NAMESPACE | {"metadata": {"name": "a"}}) == []  # not even the Namespace "a"
    assert index.candidates(pod(namespace="b")) == []


@pytest.mark.parametrize("kind", ["OverridePolicy", "ValidatePolicy"])
def test_a_selector_for_another_namespace_does_not_widen_the_scope(kind: str) -> None:
    index = PolicyIndex([policy(kind, "p", namespace="a", selectors=for_kind("Pod", namespace="b"))])
    assert refs(index, pod(namespace="b")) == []
    assert refs(index, pod(namespace="a")) == []


def test_cluster_policies_apply_everywhere() -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "c")])
    for obj in (pod(namespace="a"), pod(namespace="b"), NODE, NAMESPACE):
        assert refs(index, obj) == [("ClusterOverridePolicy c", 0)]


def test_request_namespace_stands_in_when_the_object_has_none() -> None:
    index = PolicyIndex([policy("OverridePolicy", "p", namespace="a", selectors=for_kind("Pod", namespace="a"))])
    bare = pod(namespace=None)
    assert refs(index, bare) == []
    assert refs(index, bare, namespace="a") == [("OverridePolicy a/p", 0)]
    assert refs(index, bare, namespace="b") == []
    assert "namespace" not in bare["metadata"]  # the object itself is left alone
    # The object's own namespace wins over the request's.
    assert refs(index, pod(namespace="b"), namespace="a") == []


def test_a_namespace_object_is_cluster_scoped_whatever_the_request_says() -> None:
    # The API server gives a Namespace's own name as the request namespace.
    index = PolicyIndex([policy("OverridePolicy", "p", namespace="team-a")])
    assert refs(index, NAMESPACE, namespace="team-a") == []
    assert object_namespace(NAMESPACE, "team-a") == ""
    assert object_namespace(pod(namespace=None), "team-a") == "team-a"


# --- resource selectors --------------------------------------------------------------------------

SELECTOR_CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("kind", {"apiVersion": "v1", "kind": "Pod"}, True),
    ("kind-other", {"apiVersion": "v1", "kind": "Service"}, False),
    ("kind-case-sensitive", {"apiVersion": "v1", "kind": "pod"}, False),
    ("api-version-other", {"apiVersion": "apps/v1", "kind": "Pod"}, False),
    ("namespace", {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a"}, True),
    ("name", {"apiVersion": "v1", "kind": "Pod", "name": "web-0"}, True),
    ("name-other", {"apiVersion": "v1", "kind": "Pod", "name": "web-1"}, False),
    ("name-wins-over-labels", {"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                               "labelSelector": {"matchLabels": {"app": "other"}}}, True),
    ("labels", {"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"app": "web"}}}, True),
    ("labels-other", {"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"app": "db"}}}, False),
    ("labels-not-in-absent", {"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["critical"]}]}}, True),
    ("fields", {"apiVersion": "v1", "kind": "Pod", "fieldSelector": {"matchFields": {"spec.nodeName": "node-1"}}},
     True),
    ("fields-other", {"apiVersion": "v1", "kind": "Pod", "fieldSelector": {
        "matchExpressions": [{"field": "spec.nodeName", "operator": "In", "value": ["node-2"]}]}}, False),
    ("labels-and-fields", {"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"app": "web"}},
                           "fieldSelector": {"matchFields": {"spec.nodeName": "node-2"}}}, False),
]


@pytest.mark.parametrize(("selector", "matches"), [c[1:] for c in SELECTOR_CASES], ids=[c[0] for c in SELECTOR_CASES])
def test_resource_selector(selector: dict[str, Any], matches: bool) -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "p", selectors=[selector])])
    assert bool(refs(index, pod(labels={"app": "web"}))) is matches


def test_selectors_are_ored_and_empty_matches_everything() -> None:
    ored = policy("ClusterValidatePolicy", "ored", selectors=for_kind("Service") + for_kind("Pod"))
    everything = policy("ClusterValidatePolicy", "all", selectors=[])
    index = PolicyIndex([ored, everything])
    assert [r for r, _ in refs(index, pod())] == ["ClusterValidatePolicy all", "ClusterValidatePolicy ored"]
    assert [r for r, _ in refs(index, DEPLOY)] == ["ClusterValidatePolicy all"]


def test_an_object_changed_since_the_lookup_is_matched_as_it_is() -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "p", selectors=for_kind(
        "Pod", labelSelector={"matchLabels": {"app": "web"}}))])
    labelled = pod(labels={"app": "web"})
    assert refs(index, labelled)
    assert refs(index, pod()) == []  # same group, kind and namespace: cached candidates, fresh match


# --- the index ---------------------------------------------------------------------------------

def names(policies: list[CompiledPolicy]) -> list[str]:
    return [p.name for p in policies]


def test_a_deployment_policy_is_not_a_candidate_for_a_pod() -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "deploy", selectors=for_kind("Deployment", "apps/v1")),
                         policy("ClusterOverridePolicy", "pod", selectors=for_kind("Pod"))])
    assert names(index.candidates(pod())) == ["pod"]
    assert names(index.candidates(DEPLOY)) == ["deploy"]


@pytest.mark.parametrize(("api_version", "kind", "pod_candidate", "deploy_candidate"), [
    ("v1", "*", True, False),
    ("*", "Pod", True, False),
    ("apps/*", "Deployment", False, True),
    ("apps", "*", False, True),
    ("*", "*", True, True),
    ("", "", True, True),
])
def test_wildcard_selectors_land_in_the_right_buckets(api_version: str, kind: str, pod_candidate: bool,
                                                      deploy_candidate: bool) -> None:
    sel = {k: v for k, v in (("apiVersion", api_version), ("kind", kind)) if v}
    # Built directly: the policy checks insist on apiVersion and kind, the index must not.
    index = PolicyIndex([dataclasses.replace(policy("ClusterOverridePolicy", "p"), selectors=[sel])])
    assert bool(index.candidates(pod())) is pod_candidate
    assert bool(index.candidates(DEPLOY)) is deploy_candidate


def test_put_remove_replace() -> None:
    index = PolicyIndex()
    assert len(index) == 0 and index.candidates(pod()) == []
    first = policy("ClusterOverridePolicy", "p", selectors=for_kind("Pod"))
    index.put(first)
    assert len(index) == 1 and index.candidates(pod()) == [first] and first in index
    # Replace: same kind and name, now for Deployments only.
    second = policy("ClusterOverridePolicy", "p", selectors=for_kind("Deployment", "apps/v1"))
    index.put(second)
    assert len(index) == 1 and first not in index and second in index
    assert index.candidates(pod()) == [] and index.candidates(DEPLOY) == [second]
    assert index.get("ClusterOverridePolicy", None, "p") is second
    # Same name, other kind or namespace: distinct policies.
    op_a = policy("OverridePolicy", "p", namespace="team-a")
    op_b = policy("OverridePolicy", "p", namespace="team-b")
    index.put(op_a)
    index.put(op_b)
    assert len(index) == 3
    index.remove("OverridePolicy", "team-a", "p")
    assert len(index) == 2 and op_a not in index and op_b in index
    index.remove("OverridePolicy", "team-a", "p")  # absent: nothing happens
    index.remove("ClusterOverridePolicy", None, "p")
    assert names(list(index)) == ["p"] and index.candidates(DEPLOY) == []


def test_candidates_cache_is_invalidated_on_every_change() -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "a", selectors=for_kind("Pod"))])
    assert names(index.candidates(pod())) == ["a"]
    index.put(policy("ClusterOverridePolicy", "b", selectors=for_kind("Pod")))
    assert names(index.candidates(pod())) == ["a", "b"]
    index.put(policy("ClusterOverridePolicy", "a", selectors=for_kind("Service")))
    assert names(index.candidates(pod())) == ["b"]
    index.remove("ClusterOverridePolicy", None, "b")
    assert index.candidates(pod()) == []


def test_callers_cannot_corrupt_the_cache() -> None:
    index = PolicyIndex([policy("ClusterOverridePolicy", "a")])
    found = index.candidates(pod())
    found.clear()
    assert names(index.candidates(pod())) == ["a"]


def test_group_of_objects() -> None:
    assert object_group(pod()) == "" and object_group(DEPLOY) == "apps" and object_group({}) == ""


def test_cost_does_not_grow_with_policies_that_cannot_match() -> None:
    config_maps = [policy("ClusterOverridePolicy", f"cm-{i:04}", selectors=for_kind("ConfigMap"))
                   for i in range(1000)]
    other_namespaces = [policy("OverridePolicy", f"pod-{i:03}", namespace=f"ns-{i}", selectors=for_kind("Pod"))
                        for i in range(200)]
    target = policy("ClusterOverridePolicy", "pod-policy", selectors=for_kind("Pod"))
    index = PolicyIndex([*config_maps, *other_namespaces, target])
    assert len(index) == 1201
    # Structural, not timing: the lookup hands back exactly the one policy that can match.
    assert index.candidates(pod(namespace="team-a")) == [target]
    assert len(index.candidates(copy.deepcopy(pod(namespace="ns-7")))) == 2
    assert len(index.candidates({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "x"}})) == 1000


# --- guards: selectors filed under the name, label or namespace they require ------------------

_VALUES = st.sampled_from(["a", "b", "c"])
_KEYS = st.sampled_from(["app", "tier", "team"])
_EXPRESSIONS = st.one_of(
    st.builds(lambda k, vs: {"key": k, "operator": "In", "values": vs}, _KEYS, st.lists(_VALUES, min_size=1)),
    st.builds(lambda k, vs: {"key": k, "operator": "NotIn", "values": vs}, _KEYS, st.lists(_VALUES, min_size=1)),
    st.builds(lambda k: {"key": k, "operator": "Exists"}, _KEYS),
    st.builds(lambda k: {"key": k, "operator": "DoesNotExist"}, _KEYS))
_SELECTORS = st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.sampled_from(["Pod", "*"])}, optional={
    "name": st.sampled_from(["web-0", "web-1", ""]),
    "namespace": st.sampled_from(["team-a", "team-b"]),
    "labelSelector": st.fixed_dictionaries({}, optional={
        "matchLabels": st.dictionaries(_KEYS, _VALUES, max_size=2),
        "matchExpressions": st.lists(_EXPRESSIONS, max_size=2)})})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_SELECTORS, max_size=3), min_size=1, max_size=6),
       st.dictionaries(_KEYS, _VALUES), st.sampled_from(["web-0", "web-1"]), st.sampled_from(["team-a", "team-b"]))
def test_guards_never_hide_a_policy_the_selectors_match(selector_lists: list[list[dict[str, Any]]],
                                                        labels: dict[str, str], name: str, namespace: str) -> None:
    base = policy("ClusterOverridePolicy", "p")
    policies = [dataclasses.replace(base, name=f"p{i}", selectors=sels) for i, sels in enumerate(selector_lists)]
    index = PolicyIndex(policies)
    obj = pod(name, namespace, labels=labels)
    expected = [p.name for p in policies if selectors.match_any(p.selectors, obj)]
    assert [p.name for p, _ in index.matching(obj, "CREATE")] == expected


def test_a_policy_for_other_names_or_labels_of_the_same_kind_is_not_a_candidate() -> None:
    others = [policy("ClusterOverridePolicy", f"other-{i:04}", selectors=for_kind(
        "Pod", **[{"name": f"web-{i}x"}, {"labelSelector": {"matchLabels": {"app": f"db-{i}"}}},
                  {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [f"x{i}"]}]}},
                  {"labelSelector": {"matchExpressions": [{"key": f"k{i}", "operator": "Exists"}]}},
                  {"namespace": f"ns-{i}"}][i % 5])) for i in range(500)]
    for_web = policy("ClusterOverridePolicy", "web", selectors=for_kind(
        "Pod", labelSelector={"matchLabels": {"app": "web"}}))
    unguarded = policy("ClusterOverridePolicy", "any-pod", selectors=for_kind(
        "Pod", labelSelector={"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}))
    index = PolicyIndex([*others, for_web, unguarded])
    assert names(index.candidates(pod(labels={"app": "web"}))) == ["any-pod", "web"]
    assert names(index.candidates(pod())) == ["any-pod"]
    assert names(index.candidates(pod("web-3x", "ns-3", labels={"k3": ""}))) == ["any-pod", "other-0003"]
    index.remove("ClusterOverridePolicy", None, "other-0003")
    assert names(index.candidates(pod("web-3x", "ns-3", labels={"k3": ""}))) == ["any-pod"]


def test_features_are_those_the_matched_policies_use() -> None:
    """What a policy uses beyond plain rules is worked out when it is indexed and follows it out."""
    from kinitiras_py.engine.matching import selection

    plain = policy("ClusterOverridePolicy", "plain")
    scripted = dataclasses.replace(policy("ClusterOverridePolicy", "scripted"),
                                   rules=(with_part(plain.rules[0], JavascriptOverrider(object())),))  # type: ignore[arg-type]
    conditioned = dataclasses.replace(policy("ClusterOverridePolicy", "conditioned"), refs={"x": {}})
    injecting = dataclasses.replace(policy("ClusterOverridePolicy", "injecting"),
                                    rules=(with_part(plain.rules[0], InjectOverrider(compile_program("{}"), "x")),))
    index = PolicyIndex([plain])
    assert index.features([(plain, plain.rules[0])]) == 0
    for added in (scripted, conditioned, injecting):
        index.put(added)
    assert index.features([(plain, plain.rules[0])]) == 0
    # A script may read namespaceObject: the Namespace is then looked up.
    assert index.features([(scripted, scripted.rules[0])]) == selection.JAVASCRIPT | selection.NAMESPACE
    assert index.features([(p, p.rules[0]) for p in (scripted, conditioned, injecting)]) == (
        selection.JAVASCRIPT | selection.CONDITIONS | selection.INJECTS | selection.NAMESPACE)
    index.remove(scripted.kind, scripted.namespace, scripted.name)
    assert index.features([(scripted, scripted.rules[0])]) == 0
    assert selection.policy_features(scripted) == selection.JAVASCRIPT | selection.NAMESPACE


@pytest.mark.parametrize(("source", "reads"), [
    ("[]", False), ("object.metadata.name == '' ? [] : []", False),
    ("namespaceObject == null ? [] : []", True), ("namespaceObject.metadata.labels.x == 'y' ? [] : []", True),
])
def test_the_namespace_is_needed_by_rules_that_read_it(source: str, reads: bool) -> None:
    from kinitiras_py.engine.matching import selection

    plain = policy("ClusterOverridePolicy", "plain")
    ruled = dataclasses.replace(plain, rules=(dataclasses.replace(
        plain.rules[0], overriders=(CelOverrider(compile_program(source)),)),))
    conditioned = dataclasses.replace(plain, conditions=compile_program(source.replace("[]", "true")))
    for made in (ruled, conditioned):
        assert bool(selection.policy_features(made) & selection.NAMESPACE) is reads


def test_features_of_each_rule_family_are_read_from_its_own_fields() -> None:
    """Sidecars, injects and fanned-out operations are override rules' own: a validate rule is
    never asked for them, and an override rule's fanned-out program counts for the Namespace."""
    from kinitiras_py.engine.matching import selection

    checked = policy("ClusterValidatePolicy", "checked")
    scripted = dataclasses.replace(checked, rules=(with_part(checked.rules[0], JavascriptCheck(object())),))  # type: ignore[arg-type]
    assert selection.policy_features(checked) == 0
    assert selection.policy_features(scripted) == selection.JAVASCRIPT | selection.NAMESPACE
    plain = policy("ClusterOverridePolicy", "plain")
    selected = Selected(compile_program("namespaceObject == null ? [] : []"), 1)
    ops = PlaintextOverrider([{"op": "add", "path": "/x", "select": "$"}], {0: selected})
    fanned = dataclasses.replace(plain, rules=(dataclasses.replace(plain.rules[0], overriders=(ops,)),))
    assert selection.policy_features(fanned) == selection.NAMESPACE
    sidecar = dataclasses.replace(plain, rules=(with_part(plain.rules[0], SidecarOverrider(object())),))  # type: ignore[arg-type]
    assert selection.policy_features(sidecar) == selection.SIDECARS | selection.NAMESPACE


def test_a_compiled_policy_names_its_family_and_finds_its_rules_by_index() -> None:
    from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, CompiledValidateRule, validates

    checked = policy("ValidatePolicy", "checked", "team-a", operations=[["CREATE"], ["UPDATE"]])
    changed = policy("OverridePolicy", "changed", "team-a")
    assert validates(checked) and not validates(changed)
    assert isinstance(checked.rule(1), CompiledValidateRule) and checked.rule(1).operations == {"UPDATE"}
    assert isinstance(changed.rule(0), CompiledOverrideRule)
    with pytest.raises(StopIteration):
        checked.rule(2)
