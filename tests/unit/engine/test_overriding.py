"""overriding.mutate end to end: every template type x operation x kind, the order of the
overriders within a rule, plaintext leniency, failure policies and label/annotation values.

Policies go through compile_policy and PolicyIndex.matching exactly as in the webhook.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from kinitiras_py.engine.evaluation import celenv
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import Mutation, PolicyId, RuleId
from kinitiras_py.engine.running import overriding

Obj = dict[str, Any]
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def policy(*overriders: Obj, name: str = "p", api_version: str = "v1", kind: str = "Pod",
           failure_policy: str | None = None) -> Obj:
    """A ClusterOverridePolicy selecting ``api_version``/``kind`` with one rule per overriders."""
    rules = [{"overriders": o, **({"failurePolicy": failure_policy} if failure_policy else {})} for o in overriders]
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind}], "overrideRules": rules}}


def run(policies: list[Obj], obj: Obj, variables: Obj | None = None, params: dict[Any, Obj] | None = None,
        lookup_errors: dict[Any, str] | None = None) -> Mutation:
    compiled = [compile_policy(p) for p in policies]
    matches = list(PolicyIndex(compiled).matching(obj, "CREATE"))
    assert matches, "the policy must select the object"
    before = json.loads(json.dumps(obj))  # no shared sub-objects, as JSON from the wire
    mutation = overriding.mutate(matches, obj, variables or {}, params, lookup_errors)
    assert obj == before, "mutate must not change its input"
    if mutation.failure is None:  # the patch must replay under strict RFC 6902 semantics
        assert jsonpatch.apply_patch(before, mutation.patch) == mutation.object
    return mutation


def template(type_: str, operation: str, **fields: Any) -> Obj:
    return {"template": {"type": type_, "operation": operation, **fields}}


# -- every template type x operation x pod-bearing kind --------------------------------------------

KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Pod": ("v1", ("spec",)),
    "Deployment": ("apps/v1", ("spec", "template", "spec")),
    "StatefulSet": ("apps/v1", ("spec", "template", "spec")),
    "DaemonSet": ("apps/v1", ("spec", "template", "spec")),
    "ReplicaSet": ("apps/v1", ("spec", "template", "spec")),
    "ReplicationController": ("v1", ("spec", "template", "spec")),
    "Job": ("batch/v1", ("spec", "template", "spec")),
    "CronJob": ("batch/v1", ("spec", "jobTemplate", "spec", "template", "spec")),
    "PodTemplate": ("v1", ("template", "spec")),
}
META: Obj = {"name": "obj", "namespace": "default", "labels": {"app": "web", "tier": "old"},
        "annotations": {"note": "keep", "owner": "old"}}
T_OLD = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
T_OTHER = {"key": "zone", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
OLD_PREF = {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}
KEEP_PREF = {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
NEW_PREF = {"weight": 1, "preference": {"matchExpressions": [{"key": "gen", "operator": "In", "values": ["7"]}]}}
PAA_TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
DEBUG = {"name": "debug", "image": "busybox"}
BASE_SPEC: Obj = {
    "containers": [{"name": "app", "image": "nginx", "resources": {
        "limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}}}],
    "initContainers": [{"name": "init", "image": "busybox", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}],
    "ephemeralContainers": [DEBUG],
    "tolerations": [T_OLD, T_OTHER],
    "affinity": {"nodeAffinity": {PREF: [OLD_PREF, KEEP_PREF]}},
}


def make(kind: str, spec: Obj, api_version: str | None = None) -> Obj:
    """An object of ``kind`` with ``spec`` as its pod spec (and a pod template label)."""
    version, path = KINDS[kind]
    obj: Obj = {"apiVersion": api_version or version, "kind": kind, "metadata": copy.deepcopy(META)}
    node = obj
    for key in path[:-1]:
        node = node.setdefault(key, {})
        if key == "template":
            node["metadata"] = {"labels": {"app": "web"}}
    node[path[-1]] = copy.deepcopy(spec)
    return obj


OVERSELL = {"cpuFactor": "0.5", "memoryFactor": "0.25"}
TOLERATIONS = [{**T_OLD, "tolerationSeconds": 60}, {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
AFFINITY = {"nodeAffinity": {PREF: [OLD_PREF, NEW_PREF]}, "podAntiAffinity": {REQ: [PAA_TERM]}}
RESOURCES = {"requests": {"cpu": "250m"}, "limits": {"memory": "2Gi"}}

POD_TEMPLATES: dict[str, Obj] = {
    "resources": {"resources": RESOURCES}, "resourcesOversell": {"resourcesOversell": OVERSELL},
    "tolerations": {"tolerations": TOLERATIONS}, "affinity": {"affinity": AFFINITY}}
SET_RESOURCES = {
    "containers": [{"name": "app", "image": "nginx", "resources": {
        "limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "250m", "memory": "4Gi"}}}],
    "initContainers": [{"name": "init", "image": "busybox", "resources": {
        "limits": {"cpu": "500m", "memory": "2Gi"}, "requests": {"cpu": "250m"}}}]}
SET_OVERSELL = {
    "containers": [{"name": "app", "image": "nginx", "resources": {
        "limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}],
    "initContainers": [{"name": "init", "image": "busybox", "resources": {
        "limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}}]}
# The pod spec fields each (type, operation) changes, with their expected new values.
SPEC_CHANGES: dict[tuple[str, str], Obj] = {
    ("resources", "add"): SET_RESOURCES,
    ("resources", "replace"): SET_RESOURCES,
    ("resources", "remove"): {
        "containers": [{"name": "app", "image": "nginx", "resources": {
            "limits": {"cpu": "2"}, "requests": {"memory": "4Gi"}}}],
        "initContainers": [{"name": "init", "image": "busybox", "resources": {"limits": {"cpu": "500m"}}}]},
    ("resourcesOversell", "add"): SET_OVERSELL,
    ("resourcesOversell", "replace"): SET_OVERSELL,
    ("resourcesOversell", "remove"): {  # the init container has no requests: nothing to remove
        "containers": [{"name": "app", "image": "nginx", "resources": {
            "limits": {"cpu": "2", "memory": "4Gi"}, "requests": {}}}]},
    ("tolerations", "add"): {"tolerations": [T_OLD, T_OTHER, TOLERATIONS[1]]},
    ("tolerations", "replace"): {"tolerations": [TOLERATIONS[0], T_OTHER, TOLERATIONS[1]]},  # in place
    ("tolerations", "remove"): {"tolerations": [T_OTHER]},
    ("affinity", "add"): {"affinity": {"nodeAffinity": {PREF: [OLD_PREF, KEEP_PREF, NEW_PREF]},
                                       "podAntiAffinity": {REQ: [PAA_TERM]}}},
    ("affinity", "replace"): {"affinity": {"nodeAffinity": {PREF: [OLD_PREF, NEW_PREF]},
                                           "podAntiAffinity": {REQ: [PAA_TERM]}}},
    ("affinity", "remove"): {"affinity": {"nodeAffinity": {PREF: [KEEP_PREF]}}},
}
METADATA_TEMPLATES: dict[tuple[str, str], tuple[Obj, Obj]] = {
    ("annotations", "add"): ({"path": "example.com/team", "value": {"string": "payments"}},
                             {"note": "keep", "owner": "old", "example.com/team": "payments"}),
    ("annotations", "replace"): ({"path": "owner", "value": {"string": "new"}}, {"note": "keep", "owner": "new"}),
    ("annotations", "remove"): ({"path": "owner"}, {"note": "keep"}),
    ("labels", "add"): ({"path": "app.kubernetes.io/name", "value": {"string": "web"}},
                        {"app": "web", "tier": "old", "app.kubernetes.io/name": "web"}),
    ("labels", "replace"): ({"path": "tier", "value": {"string": "new"}}, {"app": "web", "tier": "new"}),
    ("labels", "remove"): ({"path": "tier"}, {"app": "web"}),
}
OPERATIONS = ("add", "replace", "remove")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("type_", list(POD_TEMPLATES))
def test_pod_spec_templates_on_every_pod_bearing_kind(type_: str, operation: str, kind: str) -> None:
    obj = make(kind, BASE_SPEC)
    mutation = run([policy(template(type_, operation, **POD_TEMPLATES[type_]),
                           api_version=KINDS[kind][0], kind=kind)], obj)
    assert mutation.failure is None and mutation.warnings == []
    assert mutation.object == make(kind, {**BASE_SPEC, **SPEC_CHANGES[(type_, operation)]})
    assert [str(rule) for rule in mutation.applied] == ["ClusterOverridePolicy p rule 0"]
    again = run([policy(template(type_, operation, **POD_TEMPLATES[type_]), kind=kind,
                        api_version=KINDS[kind][0])], mutation.object)
    assert again.patch == [], "every template is idempotent"


@pytest.mark.parametrize("kind", [*KINDS, "ConfigMap"])
@pytest.mark.parametrize(("type_", "operation"), list(METADATA_TEMPLATES))
def test_metadata_templates_on_every_kind(type_: str, operation: str, kind: str) -> None:
    obj: Obj = make(kind, BASE_SPEC) if kind in KINDS else {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": copy.deepcopy(META), "data": {"k": "v"}}
    fields, expected = METADATA_TEMPLATES[(type_, operation)]
    mutation = run([policy(template(type_, operation, **fields), api_version=obj["apiVersion"], kind=kind)], obj)
    assert mutation.failure is None
    assert mutation.object == {**obj, "metadata": {**obj["metadata"], type_: expected}}


NON_POD: list[Obj] = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    # A CRD that happens to be called Deployment in another group is not a workload.
    {"apiVersion": "example.com/v1", "kind": "Deployment", "metadata": {"name": "d"},
     "spec": {"template": {"spec": copy.deepcopy(BASE_SPEC)}}},
]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("type_", list(POD_TEMPLATES))
@pytest.mark.parametrize("obj", NON_POD, ids=lambda o: f"{o['apiVersion']}-{o['kind']}")
def test_pod_spec_templates_leave_other_kinds_alone(obj: Obj, type_: str, operation: str) -> None:
    mutation = run([policy(template(type_, operation, **POD_TEMPLATES[type_]),
                           api_version=obj["apiVersion"], kind=obj["kind"])], obj)
    assert (mutation.failure, mutation.warnings, mutation.patch, mutation.applied) == (None, [], [], [])
    assert mutation.object == obj


# -- label and annotation values ------------------------------------------------------------------

POD: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"},
       "spec": {"restartPolicy": "Always", "priority": 7, "hostNetwork": False, "containers": [{"name": "app"}]}}


CONSTANTS = [({"string": "payments"}, "payments"), ({"integer": 5}, "5"), ({"integer": 0}, "0"),
             ({"boolean": True}, "true"), ({"boolean": False}, "false"), ({"float": "1.50"}, "1.50"),
             ({"string": ""}, "")]


@pytest.mark.parametrize(("type_", "value", "text"), [
    *[("labels", v, t) for v, t in CONSTANTS], *[("annotations", v, t) for v, t in CONSTANTS],
    # A comma is not allowed in a label value (refused at compile time), so slices are for annotations.
    ("annotations", {"stringSlice": ["a", "b"]}, "a,b"),
])
def test_constant_values_become_strings_and_the_map_is_created(type_: str, value: Obj, text: str) -> None:
    mutation = run([policy(template(type_, "add", path="example.com/team", value=value))], POD)
    assert mutation.object["metadata"] == {"name": "web-1", "namespace": "default", type_: {"example.com/team": text}}
    assert mutation.patch == [{"op": "add", "path": f"/metadata/{type_}", "value": {"example.com/team": text}}]


def test_string_map_sets_every_pair_and_ignores_path() -> None:
    obj = {**POD, "metadata": {**POD["metadata"], "annotations": {"key1": "old", "keep": "x"}}}
    mutation = run([policy(template("annotations", "replace", path="ignored",
                                    value={"stringMap": {"key1": "value1", "app.kubernetes.io/part-of": "shop"}}))],
                   obj)
    assert mutation.object["metadata"]["annotations"] == {"key1": "value1", "keep": "x",
                                                          "app.kubernetes.io/part-of": "shop"}


@pytest.mark.parametrize(("path", "text"), [
    ("/spec/restartPolicy", "Always"), ("spec.restartPolicy", "Always"), ("/spec/priority", "7"),
    ("/spec/hostNetwork", "false"), ("/metadata/name", "web-1"), ("/spec/containers/0/name", "app"),
])
def test_value_ref_current_copies_the_value_as_text(path: str, text: str) -> None:
    mutation = run([policy(template("labels", "replace", path="copied",
                                    valueRef={"from": "current", "path": path}))], POD)
    assert mutation.object["metadata"]["labels"] == {"copied": text}


def test_value_ref_to_a_missing_field_changes_nothing() -> None:
    mutation = run([policy(template("labels", "add", path="copied", valueRef={"from": "current", "path": "/spec/x"}))],
                   POD)
    assert (mutation.patch, mutation.failure) == ([], None)


def test_value_ref_old_reads_the_old_object_and_is_skipped_without_one() -> None:
    rule = template("annotations", "replace", path="previous", valueRef={"from": "old", "path": "/spec/restartPolicy"})
    old = {**POD, "spec": {**POD["spec"], "restartPolicy": "Never"}}
    assert run([policy(rule)], POD, {"oldObject": old}).object["metadata"]["annotations"] == {"previous": "Never"}
    assert run([policy(rule)], POD, {"oldObject": None}).patch == []


@pytest.mark.parametrize(("ref", "resolved", "text"), [
    ({"from": "owner", "path": "/metadata/ownerReferences/0/name"},
     {"metadata": {"name": "web-abc", "ownerReferences": [{"kind": "Deployment", "name": "web"}]}}, "web"),
    ({"from": "k8s", "path": "metadata.name", "k8s": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
     {"metadata": {"name": "web"}}, "web"),
    ({"from": "http", "path": "/body/team", "http": {"url": "https://teams.example.com/lookup"}},
     {"body": {"team": "payments"}, "header": {}}, "payments"),
    # kinitiras made users write body. first; a path without it is read under body.
    ({"from": "http", "path": "team", "http": {"url": "https://teams.example.com/lookup"}},
     {"body": {"team": "payments"}, "header": {}}, "payments"),
], ids=["owner", "k8s", "http", "http-without-body"])
def test_value_ref_from_resolved_params(ref: Obj, resolved: Obj, text: str) -> None:
    rules = [template("labels", "add", path="x", value={"string": "first"}),
             template("annotations", "add", path="resolved", valueRef=ref)]
    second = RuleId(PolicyId("ClusterOverridePolicy", None, "p"), 1)
    mutation = run([policy(*rules)], POD, params={second: {"valueRef": resolved}})
    assert mutation.object["metadata"]["annotations"] == {"resolved": text}
    # Without a resolved value (null lookup) the rule changes nothing.
    assert run([policy(*rules)], POD).object["metadata"].get("annotations") is None


# -- overrider order within one rule ----------------------------------------------------------------

def test_template_then_cel_then_plaintext_then_origin_each_seeing_the_previous() -> None:
    overriders = {
        "template": {"type": "labels", "operation": "add", "path": "stage", "value": {"string": "template"}},
        "cel": '[{"op": "add", "path": "/metadata/labels/seen-by-cel", "value": object.metadata.labels["stage"]}]',
        "plaintext": [{"op": "replace", "path": "/metadata/labels/stage", "value": "plaintext"},
                      {"op": "add", "path": "/metadata/labels/last", "value": "plaintext"}],
        "origin": [{"type": "labels", "operation": "add", "labels": {"last": "origin", "from-origin": "yes"}}],
    }
    obj = {**POD, "metadata": {**POD["metadata"], "labels": {"app": "web"}}}
    mutation = run([policy(overriders)], obj)
    assert mutation.failure is None
    assert mutation.object["metadata"]["labels"] == {
        "app": "web", "stage": "plaintext", "seen-by-cel": "template", "last": "origin", "from-origin": "yes"}


def test_plaintext_is_lenient_and_decodes_pointer_escapes() -> None:
    obj = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "1"}}}
    plaintext = [
        {"op": "replace", "path": "/metadata/annotations/new", "value": "added"},  # replace of a missing key adds
        {"op": "remove", "path": "/metadata/annotations/absent"},  # remove of a missing key: no-op
        {"op": "remove", "path": "/spec/nothing/here"},  # remove under a missing parent: no-op
        {"op": "add", "path": "/metadata/annotations/example.com~1team", "value": "slash"},
        {"op": "add", "path": "/metadata/annotations/tilde~0key", "value": "tilde"},
    ]
    mutation = run([policy({"plaintext": plaintext})], obj)
    assert mutation.failure is None
    assert mutation.object["metadata"]["annotations"] == {
        "a": "1", "new": "added", "example.com/team": "slash", "tilde~key": "tilde"}


# -- errors and failure policies -------------------------------------------------------------------

BROKEN = {"template": {"type": "labels", "operation": "add", "path": "half", "value": {"string": "done"}},
          "plaintext": [{"op": "add", "path": "/metadata/name/x", "value": 1}]}
GOOD = template("annotations", "add", path="later", value={"string": "ran"})


def test_fail_keeps_the_original_object_and_names_policy_rule_and_reason() -> None:
    policies = [policy(GOOD, name="a-first"), policy(GOOD, BROKEN, name="b-second", failure_policy="Fail")]
    mutation = run(policies, POD)
    assert mutation.failure is not None and not mutation.allowed
    assert (mutation.failure.policy, mutation.failure.rule, mutation.failure.ignored) == (
        PolicyId("ClusterOverridePolicy", None, "b-second"),
        RuleId(PolicyId("ClusterOverridePolicy", None, "b-second"), 1), False)
    assert str(mutation.failure) == ("policy ClusterOverridePolicy b-second, rule 1: "
                                     "patch op 0 ('/metadata/name/x'): parent is a str, not an object or array")
    assert mutation.object == POD and mutation.patch == []


def test_ignore_skips_the_failing_rule_atomically_and_later_rules_run() -> None:
    mutation = run([policy(BROKEN, GOOD, failure_policy="Ignore")], POD)
    assert mutation.failure is None
    assert mutation.object["metadata"] == {**POD["metadata"], "annotations": {"later": "ran"}}  # no "half" label
    assert mutation.warnings == ["policy ClusterOverridePolicy p, rule 0: patch op 0 ('/metadata/name/x'): "
                                 "parent is a str, not an object or array (failurePolicy Ignore: rule skipped)"]
    assert [str(rule) for rule in mutation.applied] == ["ClusterOverridePolicy p rule 1"]


def test_a_rule_setting_what_is_already_there_leaves_the_object_itself() -> None:
    # As a reinvoked webhook's rules do: the object, and every conversion made of it, is kept.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web", "n": 1}}}
    same = {"plaintext": [{"op": "add", "path": "/metadata/labels/app", "value": "web"}]}
    mutation = overriding.mutate(list(PolicyIndex([compile_policy(policy(same))]).matching(pod, "CREATE")), pod, {})
    assert mutation.object is pod and mutation.patch == [] and mutation.applied == []
    # 1.0 is not 1 in JSON: that is a change, however Python compares them.
    other = {"plaintext": [{"op": "replace", "path": "/metadata/labels/n", "value": 1.0}]}
    changed = run([policy(other)], pod)
    assert changed.patch == [{"op": "replace", "path": "/metadata/labels/n", "value": 1.0}]
    assert [str(rule) for rule in changed.applied] == ["ClusterOverridePolicy p rule 0"]


def test_cel_errors_and_lookup_errors_are_rule_failures() -> None:
    bad_cel = run([policy({"cel": 'object.metadata.labels["absent"] == "x" ? [] : []'})], POD)
    assert bad_cel.failure is not None and bad_cel.failure.rule.rule == 0
    assert str(bad_cel.failure).startswith("policy ClusterOverridePolicy p, rule 0: ")
    assert bad_cel.object == POD
    ref = {"from": "owner", "path": "/metadata/name"}
    lookup = run([policy(template("labels", "add", path="o", valueRef=ref))], POD,
                 lookup_errors={RuleId(PolicyId("ClusterOverridePolicy", None, "p"), 0):
                                "Pod default/web-1 has no owner reference"})
    assert str(lookup.failure) == "policy ClusterOverridePolicy p, rule 0: Pod default/web-1 has no owner reference"
    assert lookup.object == POD


# -- tolerations and affinity in detail (on a Pod; every kind is covered above) --------------------

def _pod(spec: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _mutated(template_: Obj, obj: Obj) -> Obj:
    mutation = run([policy({"template": template_})], obj)
    assert mutation.failure is None, mutation.failure
    return mutation.object


K1 = {"key": "k1", "operator": "Exists", "effect": "NoSchedule"}
K2 = {"key": "k2", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}
K3 = {"key": "k3", "operator": "Exists"}


def _tolerations(operation: str, wanted: list[Obj], current: list[Obj] | None) -> Obj:
    spec = {"containers": [{"name": "a"}], **({"tolerations": current} if current is not None else {})}
    return _mutated({"type": "tolerations", "operation": operation, "tolerations": wanted}, _pod(spec))["spec"]


def test_tolerations_add_skips_ones_already_present() -> None:
    # tolerationSeconds is not part of a toleration's identity; an empty operator means Equal.
    same_k2 = {"key": "k2", "value": "v", "effect": "NoExecute", "tolerationSeconds": 99}
    assert _tolerations("add", [K1, same_k2, K3, K3], [K1, K2])["tolerations"] == [K1, K2, K3]
    assert _tolerations("add", [K1, K3], None)["tolerations"] == [K1, K3]


def test_tolerations_replace_matches_on_key_and_effect() -> None:
    # A policy toleration takes the place of the existing one with the same key and effect;
    # policy tolerations that match nothing are appended (kinitiras dropped those).
    new_k1 = {"key": "k1", "operator": "Equal", "value": "x", "effect": "NoSchedule", "tolerationSeconds": 5}
    other_effect = {"key": "k1", "operator": "Exists", "effect": "NoExecute"}
    got = _tolerations("replace", [new_k1, K3], [K1, other_effect, K2])
    assert got["tolerations"] == [new_k1, other_effect, K2, K3]


@pytest.mark.parametrize(("unwanted", "left"), [
    ([K2, K3], [K1]), ([K1, K3], [K2]), ([K3, K1], [K2]), ([K2], [K1, K3]),
    ([{**K2, "tolerationSeconds": 1}], [K1, K3]),  # seconds do not matter
    ([{**K1, "effect": "NoExecute"}], [K1, K2, K3]),  # the effect does
])
def test_tolerations_remove_several_removes_exactly_those(unwanted: list[Obj], left: list[Obj]) -> None:
    # Regression for kinitiras' stale indexes: removing k2 and k3 from [k1, k2, k3] failed.
    assert _tolerations("remove", unwanted, [K1, K2, K3])["tolerations"] == left


def test_tolerations_remove_without_tolerations_changes_nothing() -> None:
    # Regression: the rendered program used to add `tolerations: []`.
    assert _tolerations("remove", [K1], None) == {"containers": [{"name": "a"}]}
    # An empty (or null) list is an absent one: the result is the same object without the field.
    assert _tolerations("remove", [K1], []) == {"containers": [{"name": "a"}]}


def test_tolerations_remove_of_the_last_one_drops_the_field() -> None:
    assert _tolerations("remove", [K1], [K1]) == {"containers": [{"name": "a"}]}


NODE_TERM_A = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
NODE_TERM_B = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
POD_TERM_A = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
POD_TERM_B = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}
# (sub-affinity, field, term a, term b, how a list of terms is written in that field)
AFFINITY_FIELDS = [
    ("nodeAffinity", REQ, NODE_TERM_A, NODE_TERM_B, lambda terms: {"nodeSelectorTerms": terms}),
    ("nodeAffinity", PREF, {"weight": 1, "preference": NODE_TERM_A}, {"weight": 2, "preference": NODE_TERM_B},
     lambda terms: terms),
    ("podAffinity", REQ, POD_TERM_A, POD_TERM_B, lambda terms: terms),
    ("podAffinity", PREF, {"weight": 1, "podAffinityTerm": POD_TERM_A}, {"weight": 2, "podAffinityTerm": POD_TERM_B},
     lambda terms: terms),
    ("podAntiAffinity", REQ, POD_TERM_A, POD_TERM_B, lambda terms: terms),
    ("podAntiAffinity", PREF, {"weight": 1, "podAffinityTerm": POD_TERM_A},
     {"weight": 2, "podAffinityTerm": POD_TERM_B}, lambda terms: terms),
]
# Another sub-affinity the object already has, which the policy must leave alone.
OTHER_NODE = {"nodeAffinity": {PREF: [{"weight": 9, "preference": NODE_TERM_B}]}}
OTHER_POD = {"podAffinity": {PREF: [{"weight": 9, "podAffinityTerm": {**POD_TERM_A, "topologyKey": "rack"}}]}}


@pytest.mark.parametrize(("sub", "field", "a", "b", "wrap"), AFFINITY_FIELDS,
                         ids=[f"{s}-{f[:3]}" for s, f, *_ in AFFINITY_FIELDS])
def test_affinity_add_replace_remove_per_field(sub: str, field: str, a: Obj, b: Obj, wrap: Any) -> None:
    def affinity(operation: str, policy_terms: list[Obj], current: Obj | None) -> Obj | None:
        spec = {"containers": [{"name": "c"}], **({"affinity": current} if current is not None else {})}
        got = _mutated({"type": "affinity", "operation": operation, "affinity": {sub: {field: wrap(policy_terms)}}},
                       _pod(spec))["spec"]
        return got.get("affinity")

    current = {sub: {field: wrap([a])}}
    assert affinity("add", [a, b], None) == {sub: {field: wrap([a, b])}}
    assert affinity("add", [b, a, b], current) == {sub: {field: wrap([a, b])}}  # no duplicates
    other = OTHER_POD if sub == "nodeAffinity" else OTHER_NODE
    assert affinity("add", [b], {**other, **current}) == {**other, sub: {field: wrap([a, b])}}
    assert affinity("remove", [a], {**other, **current}) == other
    assert affinity("replace", [b], current) == {sub: {field: wrap([b])}}
    assert affinity("replace", [b], None) == {sub: {field: wrap([b])}}
    assert affinity("remove", [a], {sub: {field: wrap([a, b])}}) == {sub: {field: wrap([b])}}
    assert affinity("remove", [a], current) is None  # nothing left: the field goes
    assert affinity("remove", [b], current) == current  # absent term: no change, no error
    assert affinity("remove", [a], None) is None


def test_affinity_remove_without_affinity_changes_nothing() -> None:
    # Regression: the rendered program used to add `affinity: {}`.
    spec = {"containers": [{"name": "c"}]}
    template = {"type": "affinity", "operation": "remove", "affinity": {"nodeAffinity": {PREF: [
        {"weight": 1, "preference": NODE_TERM_A}]}}}
    assert _mutated(template, _pod(spec))["spec"] == spec
    spec_null = {"containers": [{"name": "c"}], "affinity": {"nodeAffinity": None}}
    # Regression: a null sub-affinity crashed the helper.
    assert _mutated({**template, "operation": "add"}, _pod(spec_null))["spec"]["affinity"] == template["affinity"]


def test_malformed_pod_spec_fields_fail_the_rule_clearly_or_are_overwritten() -> None:
    tolerate = {"type": "tolerations", "operation": "add", "tolerations": [K1]}
    bad = run([policy({"template": tolerate})], _pod({"tolerations": "abc"}))
    assert str(bad.failure).endswith("the pod spec's tolerations must be a list of objects")
    # A null field inside a toleration is the same as an absent one.
    nulls = {"key": "k1", "operator": "Exists", "effect": "NoSchedule", "value": None}
    assert _mutated(tolerate, _pod({"tolerations": [nulls]}))["spec"]["tolerations"] == [nulls]
    # Regression: a string where a term list belongs was spread into one term per character.
    affinity = {"nodeAffinity": {PREF: [{"weight": 1, "preference": NODE_TERM_A}]}}
    got = _mutated({"type": "affinity", "operation": "add", "affinity": affinity},
                   _pod({"affinity": {"nodeAffinity": {PREF: "zz"}}}))
    assert got["spec"]["affinity"] == affinity


# -- the working object is converted for CEL once while rules leave it unchanged ------------------

def count_bindings(monkeypatch: pytest.MonkeyPatch) -> list[Obj]:
    """Record the object of every Bindings that overriding makes."""
    made: list[Obj] = []
    real = overriding.Bindings

    def spy(variables: Obj, measured: Any = None, record: Any = None) -> Any:
        made.append(variables["object"])
        return real(variables, measured, record)

    monkeypatch.setattr(overriding, "Bindings", spy)
    return made


def count_conversions(monkeypatch: pytest.MonkeyPatch) -> list[Obj | None]:
    """Record the object (the part of it converted) of every activation made for CEL."""
    converted: list[Obj | None] = []
    real = celenv.projected

    def spy(variables: Obj, reads: Any) -> Any:
        data, taken = real(variables, reads)
        converted.append(data.get("object"))
        return data, taken

    monkeypatch.setattr(celenv, "projected", spy)
    return converted


def test_rules_that_change_nothing_share_one_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    made = count_bindings(monkeypatch)
    converted = count_conversions(monkeypatch)
    noop = {"cel": "object.spec.containers == [] ? [] : []"}
    mutation = run([policy(noop, noop, name=f"p{i}") for i in range(3)], POD)
    assert mutation.failure is None and mutation.patch == []
    assert made == [POD]
    assert [c for c in converted if c is not None] == [{"spec": {"containers": POD["spec"]["containers"]}}]


def test_a_change_keeps_the_conversions_it_did_not_touch(monkeypatch: pytest.MonkeyPatch) -> None:
    converted = count_conversions(monkeypatch)
    reads_spec = {"cel": "object.spec.containers == [] ? [] : []"}
    rules = [
        reads_spec,
        {"cel": '[{"op": "add", "path": "/metadata/labels", "value": {"x": "1"}}]'},
        reads_spec,  # the labels are not what it read: its conversion is kept
        {"cel": '[{"op": "add", "path": "/metadata/annotations", "value": {"seen": object.metadata.labels["x"]}}]'},
        {"cel": '[{"op": "add", "path": "/spec/priority", "value": 3}]'},
        reads_spec,  # nor the priority
        {"cel": '[{"op": "add", "path": "/spec/containers/-", "value": {"name": "b"}}]'},
        reads_spec,  # the containers changed: converted again
    ]
    mutation = run([policy(*rules)], POD)
    assert mutation.failure is None, mutation.failure
    assert mutation.object["metadata"]["annotations"] == {"seen": "1"}
    containers = POD["spec"]["containers"]
    # Rules reading nothing of the object convert none of it (None; so does compiling).
    assert [c for c in converted if c is not None] == [
        {"spec": {"containers": containers}}, {"metadata": {"labels": {"x": "1"}}},
        {"spec": {"containers": [*containers, {"name": "b"}]}}]


def test_a_failed_rule_keeps_the_sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    made = count_bindings(monkeypatch)
    rules = [{"cel": "[]"}, {"cel": '[{"op": "add", "path": "/metadata/labels", "value": {"x": "1"}}]',
                             "plaintext": [{"op": "add", "path": "/metadata/name/x", "value": 1}]},
             {"cel": 'has(object.metadata.labels) ? [{"op": "add", "path": "/spec/x", "value": 1}] : []'}]
    mutation = run([policy(*rules, failure_policy="Ignore")], POD)
    assert mutation.failure is None and mutation.patch == []  # rule 1 was rolled back, rule 2 saw that
    assert made == [POD]

