"""Origin overriders: every type on every pod-bearing kind, sequencing, errors and validation."""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import pytest

from kinitiras_py.api.overrides import OverrideRuleOrigin
from kinitiras_py.api.schema import parse_into
from kinitiras_py.base.errors import RuleError
from kinitiras_py.base.ids import PolicyId, RuleId
from kinitiras_py.engine.rules import origin

RULE = RuleId(PolicyId("OverridePolicy", "ns", "pol"), 2)

Obj = dict[str, Any]
TEMPLATE = ("spec", "template", "spec")
CRON = ("spec", "jobTemplate", "spec", "template", "spec")


class Workload(NamedTuple):
    api_version: str
    kind: str
    path: tuple[str, ...]

    def make(self, spec: Obj | None = None, metadata: Obj | None = None) -> Obj:
        leaf: Any = {"containers": [{"name": "app"}]} if spec is None else spec
        for key in reversed(self.path):
            leaf = {key: leaf}
        return {"apiVersion": self.api_version, "kind": self.kind,
                "metadata": {"name": "w"} if metadata is None else metadata, **leaf}

    def spec(self, obj: Obj) -> Obj:
        node = obj
        for key in self.path:
            node = node[key]
        return node


WORKLOADS = [
    Workload("v1", "Pod", ("spec",)),
    Workload("apps/v1", "Deployment", TEMPLATE),
    Workload("apps/v1", "StatefulSet", TEMPLATE),
    Workload("apps/v1", "DaemonSet", TEMPLATE),
    Workload("apps/v1", "ReplicaSet", TEMPLATE),
    Workload("v1", "ReplicationController", TEMPLATE),
    Workload("batch/v1", "Job", TEMPLATE),
    Workload("v1", "PodTemplate", ("template", "spec")),
    Workload("batch/v1", "CronJob", CRON),
    Workload("batch/v1beta1", "CronJob", CRON),
    Workload("extensions/v1beta1", "Deployment", TEMPLATE),
]
CONFIGMAP = Workload("v1", "ConfigMap", ("data",))
P = "spec.overrideRules[0].overriders.origin"
TYPES = ("'annotations', 'labels', 'nodeSelector', 'hostNetwork', 'schedulerName', 'affinity', "
         "'topologySpreadConstraints', 'resourceRequirements', 'resourceOversell', 'tolerations'")


@pytest.fixture(params=WORKLOADS, ids=lambda w: f"{w.api_version}/{w.kind}")
def w(request: pytest.FixtureRequest) -> Workload:
    param: Workload = request.param
    return param


def run(obj: Obj, *entries: Any) -> Obj:
    origin.apply_origin(obj, list(entries), RULE)
    return obj


def fail(obj: Obj, *entries: Any) -> str:
    with pytest.raises(RuleError) as info:
        origin.apply_origin(obj, list(entries), RULE)
    assert info.value.rule == RULE
    assert str(info.value) == f"policy OverridePolicy ns/pol, rule 2: {info.value.reason}"
    return info.value.reason


def a_pod(*containers: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": list(containers)}}


def req(count: Any = None) -> Obj:
    entry: Obj = {"type": "resourceRequirements", "operation": "add", "resourceRequirements": {}}
    return entry if count is None else {**entry, "containerCount": count}


def oversell(count: Any = None) -> Obj:
    entry: Obj = {"type": "resourceOversell", "operation": "add", "resourcesOversell": {}}
    return entry if count is None else {**entry, "containerCount": count}


def problems(entries: list[Any]) -> list[tuple[str, str]]:
    """What the policy check adds to the model's errors about ``entries`` (partial models, as
    the compiler parses them)."""
    models = [parse_into(OverrideRuleOrigin, entry, "", [], partial=True) for entry in entries]
    return [(e.path, e.reason) for e in origin.validate_origin(models, entries, P)]


def written_problems(entries: list[Any]) -> list[tuple[str, str]]:
    """What is wrong with ``entries`` as written, each on its own (the check before applying one)."""
    return [(e.path, e.reason) for i, entry in enumerate(entries) for e in origin.entry_problems(entry, f"{P}[{i}]")]


# --------------------------------------------------------------- annotations, labels, nodeSelector

MAP_CASES = ([(field, w) for field in ("annotations", "labels", "nodeSelector") for w in WORKLOADS]
             + [("annotations", CONFIGMAP), ("labels", CONFIGMAP)])


def with_map(field: str, w: Workload, current: Obj | None) -> Obj:
    if field == "nodeSelector":
        spec: Obj = {"containers": []} if current is None else {"containers": [], field: current}
        return w.make(spec)
    return w.make(metadata={"name": "w"} if current is None else {"name": "w", field: current})


def holder(field: str, w: Workload, obj: Obj) -> Obj:
    return w.spec(obj) if field == "nodeSelector" else obj["metadata"]


@pytest.mark.parametrize(("field", "w"), MAP_CASES, ids=lambda v: v if isinstance(v, str) else v.kind)
class TestMaps:
    @pytest.mark.parametrize("operation", ["add", "replace"])
    def test_merge_policy_wins(self, field: str, w: Workload, operation: str) -> None:
        obj = run(with_map(field, w, {"a": "1", "b": "2"}),
                  {"type": field, "operation": operation, field: {"b": "20", "c": "3"}})
        assert holder(field, w, obj)[field] == {"a": "1", "b": "20", "c": "3"}

    def test_replace_flag_sets_exactly_the_policy_map(self, field: str, w: Workload) -> None:
        obj = run(with_map(field, w, {"a": "1"}),
                  {"type": field, "operation": "add", "replace": True, field: {"c": "3"}})
        assert holder(field, w, obj)[field] == {"c": "3"}

    def test_replace_flag_with_empty_map_removes_the_field(self, field: str, w: Workload) -> None:
        obj = run(with_map(field, w, {"a": "1"}),
                  {"type": field, "operation": "replace", "replace": True, field: {}})
        assert field not in holder(field, w, obj)

    @pytest.mark.parametrize("replace", [False, True])  # remove ignores the replace flag
    def test_remove_deletes_policy_keys_ignoring_values(self, field: str, w: Workload, replace: bool) -> None:
        obj = run(with_map(field, w, {"a": "1", "b": "2"}),
                  {"type": field, "operation": "remove", "replace": replace, field: {"a": "other", "z": ""}})
        assert holder(field, w, obj)[field] == {"b": "2"}

    def test_remove_everything_removes_the_field(self, field: str, w: Workload) -> None:
        obj = run(with_map(field, w, {"a": "1"}), {"type": field, "operation": "remove", field: {"a": ""}})
        assert field not in holder(field, w, obj)

    def test_add_creates_the_field(self, field: str, w: Workload) -> None:
        obj = run(with_map(field, w, None), {"type": field, "operation": "add", field: {"k": "v"}})
        assert holder(field, w, obj)[field] == {"k": "v"}

    def test_null_current_map_counts_as_empty(self, field: str, w: Workload) -> None:
        obj = run(with_map(field, w, None), {"type": field, "operation": "add", field: {"k": "v"}})
        holder(field, w, obj)[field] = None
        run(obj, {"type": field, "operation": "add", field: {"x": "y"}})
        assert holder(field, w, obj)[field] == {"x": "y"}

    def test_remove_when_absent_changes_nothing(self, field: str, w: Workload) -> None:
        obj = with_map(field, w, None)
        before = copy.deepcopy(obj)
        assert run(obj, {"type": field, "operation": "remove", field: {"a": ""}}) == before


@pytest.mark.parametrize("field", ["annotations", "labels"])
def test_metadata_is_created_for_add_but_not_for_remove(field: str) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap"}
    assert run(obj, {"type": field, "operation": "remove", field: {"a": ""}}) == {
        "apiVersion": "v1", "kind": "ConfigMap"}
    assert run(obj, {"type": field, "operation": "add", field: {"a": "1"}}) == {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {field: {"a": "1"}}}


def test_node_selector_creates_a_missing_pod_spec() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}}
    run(obj, {"type": "nodeSelector", "operation": "add", "nodeSelector": {"zone": "a"}})
    assert obj["spec"] == {"replicas": 1, "template": {"spec": {"nodeSelector": {"zone": "a"}}}}


# --------------------------------------------------------------- hostNetwork, schedulerName, affinity, tsc

AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}
TSC = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}}}]
SET_CASES = [("hostNetwork", True), ("hostNetwork", False), ("schedulerName", "custom"),
             ("affinity", AFFINITY), ("topologySpreadConstraints", TSC)]


@pytest.mark.parametrize("operation", ["add", "replace"])
@pytest.mark.parametrize(("field", "value"), SET_CASES)
def test_set_types_add_and_replace_set_the_field(w: Workload, operation: str, field: str, value: Any) -> None:
    entry = {"type": field, "operation": operation, field: value}
    obj = run(w.make({"containers": [], field: "old" if field == "schedulerName" else None}), entry)
    assert w.spec(obj) == {"containers": [], field: value}
    assert w.spec(obj)[field] is not value or isinstance(value, bool | str)


@pytest.mark.parametrize(("field", "value"), SET_CASES)
def test_set_types_remove_deletes_the_field(w: Workload, field: str, value: Any) -> None:
    obj = run(w.make({"containers": [], field: value}), {"type": field, "operation": "remove"})
    assert w.spec(obj) == {"containers": []}


@pytest.mark.parametrize(("field", "empty"), [("schedulerName", ""), ("affinity", {}),
                                              ("topologySpreadConstraints", [])])
def test_set_types_empty_value_removes_the_field(w: Workload, field: str, empty: Any) -> None:
    obj = run(w.make({"containers": [], field: "x"}), {"type": field, "operation": "add", field: empty})
    assert w.spec(obj) == {"containers": []}


# --------------------------------------------------------------- resourceRequirements

def two_containers() -> Obj:
    return {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1"}}},
                           {"name": "side", "resources": {"requests": {"memory": "1Gi"}}}]}


def test_requirements_set_canonical_quantities_at_the_index(w: Workload) -> None:
    obj = run(w.make(two_containers()), {
        "type": "resourceRequirements", "operation": "add", "containerCount": 1,
        "resourceRequirements": {"limits": {"cpu": "0.5", "memory": "1024Mi"},
                                 "requests": {"cpu": 1, "memory": "1.5Gi", "ephemeral-storage": "2000000"},
                                 "claims": [{"name": "gpu"}]}})
    assert w.spec(obj)["containers"] == [
        {"name": "app", "resources": {"limits": {"cpu": "1"}}},
        {"name": "side", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"},
                                       "requests": {"cpu": "1", "memory": "1536Mi",
                                                    "ephemeral-storage": "2M"},
                                       "claims": [{"name": "gpu"}]}}]


def test_requirements_replace_the_whole_resources_of_container_0(w: Workload) -> None:
    obj = run(w.make(two_containers()), {"type": "resourceRequirements", "operation": "replace",
                                         "resourceRequirements": {"requests": {"cpu": "100m"}}})
    assert w.spec(obj)["containers"][0] == {"name": "app", "resources": {"requests": {"cpu": "100m"}}}


def test_requirements_remove_deletes_resources(w: Workload) -> None:
    obj = run(w.make(two_containers()), {"type": "resourceRequirements", "operation": "remove",
                                         "containerCount": 1})
    assert w.spec(obj)["containers"][1] == {"name": "side"}


@pytest.mark.parametrize("type_", ["resourceRequirements", "resourceOversell"])
def test_container_count_out_of_range(w: Workload, type_: str) -> None:
    entry = {"type": type_, "operation": "add", "containerCount": 3,
             "resourceRequirements": {}, "resourcesOversell": {}}
    assert fail(w.make(two_containers()), entry) == (
        "origin[0]: containerCount 3 out of range: the pod spec has 2 containers")


def test_init_containers_are_not_indexed() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"initContainers": [{"name": "init"}]}}
    assert fail(pod, {"type": "resourceRequirements", "operation": "remove"}) == (
        "origin[0]: containerCount 0 out of range: the pod spec has 0 containers")


# --------------------------------------------------------------- resourceOversell

def test_oversell_scales_each_field_exactly(w: Workload) -> None:
    spec = {"containers": [{"name": "app"}, {"name": "big", "resources": {
        "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi", "nvidia.com/gpu": "3"},
        "requests": {"cpu": "333m", "memory": "1G", "hugepages-2Mi": "0"}}}]}
    obj = run(w.make(spec), {
        "type": "resourceOversell", "operation": "add", "containerCount": 1, "resourcesOversell": {
            "limits": {"cpu": "0.5", "memory": "0.2", "ephemeral-storage": "0.1", "nvidia.com/gpu": "0.5"},
            "requests": {"cpu": "0.5", "memory": "0.5", "hugepages-2Mi": "0.5", "storage": "0.5"}}})
    assert w.spec(obj)["containers"] == [{"name": "app"}, {"name": "big", "resources": {
        "limits": {"cpu": "1", "memory": "858993459", "ephemeral-storage": "1Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "166m", "memory": "500M", "hugepages-2Mi": "0"}}}]


@pytest.mark.parametrize(("current", "factor", "expected"), [
    ("3", "0.3333333333333333333333333333333", "999m"),  # exact: no float or 28-digit rounding
    ("1", "0.0001", "0"),  # 0.1m rounds down to 0
    ("1500m", "1", "1500m"),
    ("1000m", "1", "1"),  # canonical form
    ("0.5", "1e-1", "50m"),
    ("0m", "0.5", "0m"),  # zero is left as written
])
def test_oversell_cpu_rounds_down_to_millicores(current: str, factor: str, expected: str) -> None:
    pod = a_pod({"resources": {"requests": {"cpu": current}}})
    run(pod, {"type": "resourceOversell", "operation": "replace",
              "resourcesOversell": {"requests": {"cpu": factor}}})
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": expected}}


@pytest.mark.parametrize("container", [{"name": "app"}, {"name": "app", "resources": {}},
                                       {"name": "app", "resources": {"limits": {"memory": "1Gi"}}},
                                       {"name": "app", "resources": {"limits": None, "requests": "x"}}])
def test_oversell_skips_absent_values(w: Workload, container: Obj) -> None:
    obj = w.make({"containers": [container]})
    before = copy.deepcopy(obj)
    run(obj, {"type": "resourceOversell", "operation": "add",
              "resourcesOversell": {"limits": {"cpu": "0.5"}, "requests": {"memory": "0.5"}}})
    assert obj == before


def test_oversell_invalid_quantity_in_object() -> None:
    pod = a_pod({"resources": {"limits": {"cpu": "lots"}}})
    assert fail(pod, {"type": "resourceOversell", "operation": "add",
                      "resourcesOversell": {"limits": {"cpu": "0.5"}}}) == (
        "origin[0]: resources.limits.cpu: invalid quantity 'lots': expected a number ([+-]digits[.digits]) "
        "at the start")


def test_oversell_absurd_factor_is_a_rule_error() -> None:
    pod = a_pod({"resources": {"limits": {"cpu": "1"}}})
    assert fail(pod, {"type": "resourceOversell", "operation": "add",
                      "resourcesOversell": {"limits": {"cpu": "1e-99999"}}}) == (
        "origin[0]: resources.limits.cpu: quantity magnitude 1E-99999 is too large or too fine to convert "
        "exactly")


# --------------------------------------------------------------- tolerations

A = {"key": "a", "operator": "Equal", "value": "v1", "effect": "NoSchedule"}
B = {"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
C = {"key": "c", "value": "x", "effect": "NoSchedule"}
B60 = {"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
C_EQUAL = {"key": "c", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
D = {"key": "d", "operator": "Exists"}
A_EXECUTE = {"key": "a", "operator": "Equal", "value": "v1", "effect": "NoExecute"}


def tolerating(w: Workload, *items: Obj) -> Obj:
    return w.make({"containers": [], "tolerations": [dict(t) for t in items]})


@pytest.mark.parametrize("operation", ["add", "replace"])
def test_tolerations_policy_first_then_unmatched_current(w: Workload, operation: str) -> None:
    obj = run(tolerating(w, A, B, C), {"type": "tolerations", "operation": operation,
                                      "tolerations": [B60, D, C_EQUAL, A_EXECUTE]})
    # B60 takes B's place with the policy's tolerationSeconds; C_EQUAL matches C (empty == Equal).
    assert w.spec(obj)["tolerations"] == [B60, D, C_EQUAL, A_EXECUTE, A]


def test_tolerations_add_to_none(w: Workload) -> None:
    obj = run(w.make({"containers": []}), {"type": "tolerations", "operation": "add", "tolerations": [D, B]})
    assert w.spec(obj)["tolerations"] == [D, B]


def test_tolerations_duplicate_policy_items_are_added_once(w: Workload) -> None:
    d_again = {"key": "d", "operator": "Exists", "effect": ""}
    obj = run(tolerating(w, A), {"type": "tolerations", "operation": "add",
                                 "tolerations": [B60, D, B, d_again]})
    assert w.spec(obj)["tolerations"] == [B60, D, A]


def test_tolerations_replace_flag_is_exactly_the_policy(w: Workload) -> None:
    obj = run(tolerating(w, A, B), {"type": "tolerations", "operation": "replace", "replace": True,
                                    "tolerations": [D]})
    assert w.spec(obj)["tolerations"] == [D]


@pytest.mark.parametrize("replace", [False, True])  # remove ignores the replace flag
def test_tolerations_remove_matched(w: Workload, replace: bool) -> None:
    b_any_seconds = {"key": "b", "operator": "Exists", "effect": "NoExecute"}
    obj = run(tolerating(w, A, B, C), {"type": "tolerations", "operation": "remove", "replace": replace,
                                      "tolerations": [b_any_seconds, D, A_EXECUTE]})
    assert w.spec(obj)["tolerations"] == [A, C]


def test_tolerations_remove_all_removes_the_field(w: Workload) -> None:
    obj = run(tolerating(w, C), {"type": "tolerations", "operation": "remove", "tolerations": [C_EQUAL]})
    assert w.spec(obj) == {"containers": []}


def test_tolerations_replace_flag_with_empty_list_removes_the_field(w: Workload) -> None:
    obj = run(tolerating(w, A), {"type": "tolerations", "operation": "add", "replace": True,
                                 "tolerations": []})
    assert w.spec(obj) == {"containers": []}


# --------------------------------------------------------------- sequencing and copies

def test_each_entry_sees_the_previous_result(w: Workload) -> None:
    obj = run(w.make({"containers": [{"name": "app"}]}),
              {"type": "annotations", "operation": "add", "annotations": {"a": "1"}},
              {"type": "annotations", "operation": "add", "annotations": {"b": "2"}},
              {"type": "nodeSelector", "operation": "add", "replace": True, "nodeSelector": {"x": "1"}},
              {"type": "nodeSelector", "operation": "add", "nodeSelector": {"y": "2"}},
              {"type": "tolerations", "operation": "add", "tolerations": [A, D]},
              {"type": "tolerations", "operation": "remove", "tolerations": [A]},
              {"type": "hostNetwork", "operation": "add", "hostNetwork": True},
              {"type": "hostNetwork", "operation": "remove"},
              {"type": "resourceRequirements", "operation": "add",
               "resourceRequirements": {"limits": {"cpu": "2", "memory": "1Gi"}}},
              {**oversell(), "resourcesOversell": {"limits": {"cpu": "0.25"}}},
              {**oversell(), "resourcesOversell": {"limits": {"cpu": "0.5"}}})
    assert obj["metadata"] == {"name": "w", "annotations": {"a": "1", "b": "2"}}
    assert w.spec(obj) == {
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "250m", "memory": "1Gi"}}}],
        "nodeSelector": {"x": "1", "y": "2"}, "tolerations": [D]}


def test_policy_values_are_copied_never_shared() -> None:
    claims = [{"name": "c"}]
    labels = {"a": "1"}
    entries: list[Obj] = [
        {"type": "affinity", "operation": "add", "affinity": AFFINITY},
        {"type": "topologySpreadConstraints", "operation": "add", "topologySpreadConstraints": TSC},
        {"type": "tolerations", "operation": "add", "tolerations": [B60]},
        {"type": "labels", "operation": "add", "labels": labels},
        {**req(), "resourceRequirements": {"limits": {"cpu": "1"}, "claims": claims}},
        {**oversell(), "resourcesOversell": {"limits": {"cpu": "0.5"}}}]
    snapshot = copy.deepcopy(entries)
    first = run(a_pod({"name": "app"}), *entries)
    second = run(a_pod({"name": "app"}), *entries)
    assert entries == snapshot  # oversell scaled the object's copy, not the policy's quantities
    assert first == second
    resources = first["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "500m"}, "claims": [{"name": "c"}]}
    for key, policy_value in (("affinity", AFFINITY), ("topologySpreadConstraints", TSC)):
        assert first["spec"][key] is not second["spec"][key]
        assert first["spec"][key] is not policy_value
    assert first["spec"]["tolerations"][0] is not second["spec"]["tolerations"][0]
    assert first["spec"]["tolerations"][0] is not B60
    assert first["metadata"]["labels"] is not labels
    assert resources["claims"] is not claims


# --------------------------------------------------------------- runtime errors

POD_LEVEL_ENTRIES = [
    {"type": "nodeSelector", "operation": "add", "nodeSelector": {"a": "b"}},
    {"type": "hostNetwork", "operation": "add", "hostNetwork": True},
    {"type": "schedulerName", "operation": "remove"},
    {"type": "affinity", "operation": "replace", "affinity": {}},
    {"type": "topologySpreadConstraints", "operation": "add", "topologySpreadConstraints": []},
    {"type": "resourceRequirements", "operation": "add", "resourceRequirements": {}},
    {"type": "resourceOversell", "operation": "add", "resourcesOversell": {}},
    {"type": "tolerations", "operation": "remove", "tolerations": []},
]


@pytest.mark.parametrize("entry", POD_LEVEL_ENTRIES, ids=lambda e: e["type"])
def test_pod_level_types_need_a_pod_bearing_kind(entry: Obj) -> None:
    assert fail({"apiVersion": "v1", "kind": "ConfigMap"}, entry) == (
        f"origin[0]: origin type '{entry['type']}' needs a pod-bearing kind; got ConfigMap")
    assert fail({"apiVersion": "example.com/v1", "kind": "Deployment"}, entry) == (
        f"origin[0]: origin type '{entry['type']}' needs a pod-bearing kind; got Deployment (example.com/v1)")
    assert fail({}, entry) == (
        f"origin[0]: origin type '{entry['type']}' needs a pod-bearing kind; got an object without kind")


LABEL_A = {"type": "labels", "operation": "add", "labels": {"a": "1"}}


@pytest.mark.parametrize(("entry", "reason"), [
    ({"type": "image", "operation": "add"},
     f"origin[1].type: unsupported value 'image'; supported values: {TYPES}"),
    ({"operation": "add"}, f"origin[1].type: required; supported values: {TYPES}"),
    ({"type": "labels", "operation": "merge", "labels": {}},
     "origin[1].operation: unsupported value 'merge'; supported values: 'add', 'replace', 'remove'"),
    ({"type": "resourceOversell", "operation": "remove", "resourcesOversell": {}},
     "origin[1].operation: operation 'remove' is not supported for type 'resourceOversell'; "
     "supported: 'add', 'replace'"),
    ({"type": "tolerations", "operation": "add"},
     "origin[1].tolerations: required for type 'tolerations' with operation 'add'"),
    ({"type": "resourceOversell", "operation": "add", "resourcesOversell": {"limits": {"cpu": "1.5"}}},
     "origin[1].resourcesOversell.limits.cpu: factor '1.5' is out of range: must be > 0 and <= 1"),
    ("labels", "origin[1]: must be an object"),
])
def test_invalid_entries_are_rule_errors_naming_the_entry(entry: Any, reason: str) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": [{}]}}
    assert fail(obj, LABEL_A, entry) == reason


@pytest.mark.parametrize(("obj", "entry", "reason"), [
    ({"kind": "ConfigMap", "metadata": "x"}, LABEL_A, "origin[0]: metadata is not an object"),
    ({"kind": "ConfigMap", "metadata": {"labels": ["a"]}}, LABEL_A, "origin[0]: labels is not an object"),
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"tolerations": {"key": "a"}}},
     {"type": "tolerations", "operation": "add", "tolerations": [D]}, "origin[0]: tolerations is not a list"),
    ({"apiVersion": "v1", "kind": "Pod", "spec": {"tolerations": ["a"]}},
     {"type": "tolerations", "operation": "add", "tolerations": [D]},
     "origin[0]: tolerations holds an item that is not an object"),
    ({"apiVersion": "v1", "kind": "Pod", "spec": "x"},
     {"type": "hostNetwork", "operation": "add", "hostNetwork": True},
     "origin[0]: the pod spec at /spec is not an object"),
    ({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": []}},
     {"type": "schedulerName", "operation": "add", "schedulerName": "s"},
     "origin[0]: the pod spec at /spec/jobTemplate/spec/template/spec is not an object"),
])
def test_malformed_objects_are_rule_errors(obj: Obj, entry: Obj, reason: str) -> None:
    assert fail(obj, entry) == reason


def test_no_entries_change_nothing() -> None:
    assert run({"kind": "ConfigMap"}) == {"kind": "ConfigMap"}


# --------------------------------------------------------------- validation

VALID = [
    {"type": "annotations", "operation": "add", "annotations": {"a": "1"}},
    {"type": "labels", "operation": "remove", "labels": {"a": ""}},
    {"type": "nodeSelector", "operation": "replace", "replace": True, "nodeSelector": {}},
    {"type": "hostNetwork", "operation": "replace", "hostNetwork": False},
    {"type": "hostNetwork", "operation": "remove"},
    {"type": "schedulerName", "operation": "add", "schedulerName": ""},
    {"type": "affinity", "operation": "add", "affinity": AFFINITY},
    {"type": "affinity", "operation": "remove"},
    {"type": "topologySpreadConstraints", "operation": "replace", "topologySpreadConstraints": TSC},
    {"type": "resourceRequirements", "operation": "add", "containerCount": 1,
     "resourceRequirements": {"limits": {"cpu": 2, "memory": 0.5}, "requests": {"cpu": "1e3"}, "claims": []}},
    {"type": "resourceRequirements", "operation": "remove", "containerCount": 2},
    {"type": "resourceOversell", "operation": "add", "containerCount": 0,
     "resourcesOversell": {"limits": {"cpu": "1", "memory": ".5"},
                           "requests": {"x": "1e-1", "y": "0.000001"}}},
    {"type": "tolerations", "operation": "add", "tolerations": [
        A, B, C, D, {"operator": "Exists"}, {"key": "example.com/x-y_z.1", "value": "v.1-_2"},
        {"key": "x" * 63, "value": "y" * 63, "effect": "PreferNoSchedule"},
        {"key": "k", "operator": "Equal", "effect": "NoExecute", "tolerationSeconds": 0},
        {"key": "k", "value": None, "effect": None, "tolerationSeconds": None}]},
]


def test_valid_entries_have_no_problems() -> None:
    assert problems(VALID) == []
    assert problems([]) == []


def test_valid_entries_apply() -> None:
    pod = run(a_pod({}, {}, {}), *VALID)
    assert pod["spec"]["containers"][1] == {"resources": {
        "limits": {"cpu": "2", "memory": "500m"}, "requests": {"cpu": "1e3"}, "claims": []}}


@pytest.mark.parametrize(("entries", "expected"), [
    (["x", None], [(f"{P}[0]", "must be an object"), (f"{P}[1]", "must be an object")]),
    ([{}], [(f"{P}[0].type", f"required; supported values: {TYPES}"),
            (f"{P}[0].operation", "required; supported values: 'add', 'replace', 'remove'")]),
    ([{"type": "Labels", "operation": "add"}],
     [(f"{P}[0].type", f"unsupported value 'Labels'; supported values: {TYPES}")]),
    ([{"type": ["labels"], "operation": "add"}],
     [(f"{P}[0].type", f"unsupported value ['labels']; supported values: {TYPES}")]),
    ([{"type": "labels", "operation": "patch", "labels": {}}],
     [(f"{P}[0].operation", "unsupported value 'patch'; supported values: 'add', 'replace', 'remove'")]),
    ([{"type": "resourceOversell", "operation": "remove"}],
     [(f"{P}[0].operation", "operation 'remove' is not supported for type 'resourceOversell'; "
                            "supported: 'add', 'replace'")]),
    ([{"type": "labels", "operation": "add", "replace": "yes", "labels": {}}],
     [(f"{P}[0].replace", "must be a boolean")]),
    ([{"type": "resourceRequirements", "operation": "remove", "containerCount": -1},
      {"type": "resourceRequirements", "operation": "remove", "containerCount": "0"},
      {"type": "resourceRequirements", "operation": "remove", "containerCount": True}],
     [(f"{P}[{i}].containerCount", "must be a non-negative integer") for i in range(3)]),
])
def test_entry_shape_problems(entries: Any, expected: list[tuple[str, str]]) -> None:
    assert written_problems(entries) == expected


@pytest.mark.parametrize(("type_", "payload", "operation"), [
    ("annotations", "annotations", "add"), ("labels", "labels", "replace"),
    ("nodeSelector", "nodeSelector", "remove"), ("annotations", "annotations", "remove"),
    ("hostNetwork", "hostNetwork", "add"), ("schedulerName", "schedulerName", "replace"),
    ("affinity", "affinity", "add"), ("topologySpreadConstraints", "topologySpreadConstraints", "add"),
    ("resourceRequirements", "resourceRequirements", "replace"),
    ("resourceOversell", "resourcesOversell", "add"),
    ("tolerations", "tolerations", "add"), ("tolerations", "tolerations", "remove"),
])
def test_missing_payload(type_: str, payload: str, operation: str) -> None:
    bare: Obj = {"type": type_, "operation": operation}
    for entry in (bare, {**bare, payload: None}):
        assert problems([entry]) == [
            (f"{P}[0].{payload}", f"required for type '{type_}' with operation '{operation}'")]


@pytest.mark.parametrize(("type_", "value", "expected"), [
    ("annotations", {"a": 1, "b": "2", "c": None}, [("annotations.a", "must be a string"),
                                                    ("annotations.c", "must be a string")]),
    ("labels", "a=b", [("labels", "must be a map of strings")]),
    ("nodeSelector", ["a"], [("nodeSelector", "must be a map of strings")]),
    ("hostNetwork", "true", [("hostNetwork", "must be a boolean")]),
    ("schedulerName", 1, [("schedulerName", "must be a string")]),
    ("affinity", [], [("affinity", "must be an object")]),
    ("topologySpreadConstraints", {}, [("topologySpreadConstraints", "must be a list of objects")]),
    ("topologySpreadConstraints", [{}, 1], [("topologySpreadConstraints[1]", "must be an object")]),
    ("resourceRequirements", "1Gi", [("resourceRequirements", "must be an object")]),
    ("resourceRequirements", {"limits": {"cpu": "lots", "memory": True, "gpu": "1"}, "requests": [],
                              "claims": {}, "extra": 1},
     [("resourceRequirements.limits.cpu", "invalid quantity 'lots'"),
      ("resourceRequirements.limits.memory", "invalid quantity True"),
      ("resourceRequirements.requests", "must be a map of quantities"),
      ("resourceRequirements.claims", "must be a list of objects"),
      ("resourceRequirements.extra", "unknown field; expected limits, requests or claims")]),
    ("resourceOversell", ["0.5"], [("resourcesOversell", "must be an object with requests and/or limits")]),
    ("resourceOversell", {"burst": {}, "limits": "0.5"},
     [("resourcesOversell.burst", "unknown field; expected limits or requests"),
      ("resourcesOversell.limits", "must be a map of resource name to factor")]),
    ("resourceOversell", {"limits": {"a": "0", "b": "1.01", "c": "-0.5", "d": "abc", "e": 0.5, "f": "NaN",
                                     "g": " 0.5", "h": "", "i": "1e1"}},
     [("resourcesOversell.limits.a", "factor '0' is out of range: must be > 0 and <= 1"),
      ("resourcesOversell.limits.b", "factor '1.01' is out of range: must be > 0 and <= 1"),
      ("resourcesOversell.limits.c", "factor '-0.5' is out of range: must be > 0 and <= 1"),
      ("resourcesOversell.limits.d", "factor 'abc' is not a decimal number"),
      ("resourcesOversell.limits.e", "factor 0.5 must be a decimal string, e.g. \"0.5\""),
      ("resourcesOversell.limits.f", "factor 'NaN' is not a decimal number"),
      ("resourcesOversell.limits.g", "factor ' 0.5' is not a decimal number"),
      ("resourcesOversell.limits.h", "factor '' is not a decimal number"),
      ("resourcesOversell.limits.i", "factor '1e1' is out of range: must be > 0 and <= 1")]),
    ("tolerations", "a", [("tolerations", "must be a list of objects")]),
    ("tolerations", [D, 1], [("tolerations[1]", "must be an object")]),
])
def test_payload_problems(type_: str, value: Any, expected: list[tuple[str, str]]) -> None:
    payload = "resourcesOversell" if type_ == "resourceOversell" else type_
    assert written_problems([{"type": type_, "operation": "add", payload: value}]) == [
        (f"{P}[0].{path}", reason) for path, reason in expected]


NAME_PROBLEM = ("the name part must be at most 63 characters of alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric")
PREFIX_PROBLEM = "the prefix must be a DNS subdomain (lowercase alphanumerics, '-' and '.')"
BAD_VALUE = "must be a valid label value"
OPERATORS = "supported values: 'Equal', 'Exists'"
EFFECTS = "supported values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
SECONDS_NEED_NO_EXECUTE = "must be 'NoExecute' when tolerationSeconds is set"


@pytest.mark.parametrize(("toleration", "expected"), [
    ({}, [("operator", "must be 'Exists' when key is empty")]),
    ({"key": "", "operator": "Equal"}, [("operator", "must be 'Exists' when key is empty")]),
    ({"key": "k", "operator": "In"}, [("operator", f"unsupported value 'In'; {OPERATORS}")]),
    ({"operator": "exists"}, [("operator", f"unsupported value 'exists'; {OPERATORS}")]),
    ({"key": "k", "operator": "Exists", "value": "v"},
     [("value", "must be empty when operator is 'Exists'")]),
    ({"key": "k", "effect": "NoRun"}, [("effect", f"unsupported value 'NoRun'; {EFFECTS}")]),
    ({"key": "k", "effect": "NoSchedule", "tolerationSeconds": 10}, [("effect", SECONDS_NEED_NO_EXECUTE)]),
    ({"key": "k", "tolerationSeconds": 10}, [("effect", SECONDS_NEED_NO_EXECUTE)]),
    ({"key": "k", "effect": "NoExecute", "tolerationSeconds": "10"},
     [("tolerationSeconds", "must be an integer")]),
    ({"key": "k", "effect": "NoExecute", "tolerationSeconds": True},
     [("tolerationSeconds", "must be an integer")]),
    ({"key": "bad key!"}, [("key", f"invalid key 'bad key!': {NAME_PROBLEM}")]),
    ({"key": "-k"}, [("key", f"invalid key '-k': {NAME_PROBLEM}")]),
    ({"key": "x" * 64}, [("key", f"invalid key '{'x' * 64}': {NAME_PROBLEM}")]),
    ({"key": "a/b/c"}, [("key", "invalid key 'a/b/c': a qualified name has at most one '/'")]),
    ({"key": "Example.com/x"}, [("key", f"invalid key 'Example.com/x': {PREFIX_PROBLEM}")]),
    ({"key": "/x"}, [("key", f"invalid key '/x': {PREFIX_PROBLEM}")]),
    ({"key": "example.com/"}, [("key", f"invalid key 'example.com/': {NAME_PROBLEM}")]),
    ({"key": "k", "value": "bad value!"}, [("value", f"invalid value 'bad value!': {BAD_VALUE}")]),
    ({"key": "k", "value": "v" * 64}, [("value", f"invalid value '{'v' * 64}': {BAD_VALUE}")]),
    ({"key": 1, "operator": ["Exists"], "value": 2, "effect": {}},
     [("key", "must be a string"), ("operator", "must be a string"), ("value", "must be a string"),
      ("effect", "must be a string")]),
    ({"operator": "Equal", "value": "v", "effect": "Never", "tolerationSeconds": 1},
     [("operator", "must be 'Exists' when key is empty"),
      ("effect", f"unsupported value 'Never'; {EFFECTS}"), ("effect", SECONDS_NEED_NO_EXECUTE)]),
])
def test_toleration_problems(toleration: Obj, expected: list[tuple[str, str]]) -> None:
    assert problems([{"type": "tolerations", "operation": "add", "tolerations": [D, toleration]}]) == [
        (f"{P}[0].tolerations[1].{field}", reason) for field, reason in expected]


def conflict(i: int, other: str, j: int, count: int) -> tuple[str, str]:
    return (f"{P}[{i}].containerCount",
            f"container {count} is already changed by {other} entry {P}[{j}]; "
            "resourceRequirements and resourceOversell may not target the same container in one rule")


@pytest.mark.parametrize(("entries", "expected"), [
    ([req(), oversell()], [conflict(1, "resourceRequirements", 0, 0)]),
    ([oversell(0), LABEL_A, req()], [conflict(2, "resourceOversell", 0, 0)]),
    ([req(1), oversell(0), oversell(1), req(0)],
     [conflict(2, "resourceRequirements", 0, 1), conflict(3, "resourceOversell", 1, 0)]),
    ([req(0), req(0), oversell(1), oversell(1)], []),
    # The model reports a count that is not an integer; the entry is left out of the conflicts.
    ([req(True), oversell(0)], []), ([req("1"), oversell(0), req(0)], [conflict(2, "resourceOversell", 1, 0)]),
    ([req(-1), oversell(-1)], [(f"{P}[0].containerCount", "must be a non-negative integer"),
                               (f"{P}[1].containerCount", "must be a non-negative integer"),
                               conflict(1, "resourceRequirements", 0, -1)]),
    ([{**req(), "resourceRequirements": {"limits": {"cpu": "x"}}}, oversell()],
     [(f"{P}[0].resourceRequirements.limits.cpu", "invalid quantity 'x'"),
      conflict(1, "resourceRequirements", 0, 0)]),
    ([{**req(), "operation": "remove"}, oversell()], [conflict(1, "resourceRequirements", 0, 0)]),
])
def test_requirements_and_oversell_of_one_container_conflict(entries: list[Obj],
                                                             expected: list[tuple[str, str]]) -> None:
    assert problems(entries) == expected


def test_sequential_apply_allows_what_validation_forbids() -> None:
    # apply_origin checks entries one by one; the conflict rule is for policy admission only.
    pod = run(a_pod({}), {**req(), "resourceRequirements": {"limits": {"memory": "1Gi"}}},
              {**oversell(), "resourcesOversell": {"limits": {"memory": "0.5"}}})
    assert pod["spec"]["containers"] == [{"resources": {"limits": {"memory": "512Mi"}}}]


def test_the_check_reads_the_model_and_checks_payloads_as_written() -> None:
    """Which fields an entry has comes from its model: a payload that failed the model is absent
    there (the compiler leaves out the "required" this gives: the model's error is at that path),
    and is not checked again as written; one the model holds is checked as written."""
    wrong = {"type": "labels", "operation": "add", "labels": "a=b"}
    assert written_problems([wrong]) == [(f"{P}[0].labels", "must be a map of strings")]
    assert problems([wrong]) == [(f"{P}[0].labels", "required for type 'labels' with operation 'add'")]
    bad_quantity = {**req(), "resourceRequirements": {"limits": {"cpu": "lots"}}}
    assert problems([bad_quantity]) == [(f"{P}[0].resourceRequirements.limits.cpu", "invalid quantity 'lots'")]
    assert problems([{"type": "labels", "operation": "add", "labels": {}}]) == []
