"""The Python helpers rendered CEL calls: the pod spec path, tolerations, affinity, loose comparison."""

from __future__ import annotations

import pytest

from kinitiras_py.engine.evaluation import builtins as b


@pytest.mark.parametrize(("api_version", "kind", "pointer"), [
    ("v1", "Pod", "/spec"),
    ("apps/v1", "Deployment", "/spec/template/spec"),
    ("extensions/v1beta1", "DaemonSet", "/spec/template/spec"),
    ("v1", "PodTemplate", "/template/spec"),
    ("batch/v1", "CronJob", "/spec/jobTemplate/spec/template/spec"),
    ("example.com/v1", "Deployment", ""),  # a CRD named like a built-in kind
    ("apps/v1", "Pod", ""),
    ("v1", "ConfigMap", ""),
    ("", "", ""),
])
def test_pod_spec_path_from_api_version_and_kind(api_version: str, kind: str, pointer: str) -> None:
    assert b.pod_spec_path(api_version, kind) == pointer


T1 = {"key": "k1", "operator": "Exists", "effect": "NoSchedule"}
T2 = {"key": "k2", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5}


def test_tolerations_add_without_duplicates() -> None:
    assert b.tolerations_add([T1], [T1, T2]) == [T1, T2]
    assert b.tolerations_add(None, [T2, T2]) == [T2]
    # tolerationSeconds is not part of identity, and an empty operator means Equal.
    same = {"key": "k2", "value": "v", "effect": "NoExecute", "tolerationSeconds": 9}
    assert b.tolerations_add([T2], [same]) == [T2]


def test_tolerations_replace_matches_key_and_effect_and_adds_new() -> None:
    newer = {"key": "k1", "operator": "Equal", "value": "x", "effect": "NoSchedule"}
    # The replacement keeps the replaced toleration's position.
    assert b.tolerations_replace([T1, T2], [newer]) == [newer, T2]
    other_value = {**newer, "value": "y"}
    assert b.tolerations_replace([T1, T2], [newer, other_value]) == [newer, other_value, T2]
    assert b.tolerations_replace([], [T1]) == [T1]


def test_tolerations_remove_several() -> None:
    t3 = {"key": "k3", "operator": "Exists"}
    assert b.tolerations_remove([T1, T2, t3], [T2, t3]) == [T1]
    assert b.tolerations_remove(None, [T1]) == []


PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
NODE_TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
PREF = {"weight": 10, "preference": NODE_TERM}


def test_affinity_add_wraps_node_selector_terms_and_dedups() -> None:
    policy = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [NODE_TERM]},
                               "preferredDuringSchedulingIgnoredDuringExecution": [PREF]}}
    once = b.affinity_add(None, policy)
    assert once == policy
    assert b.affinity_add(once, policy) == policy


def test_affinity_add_appends_to_existing_terms() -> None:
    other = {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}
    current = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [other]}}}
    policy = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [NODE_TERM]}}}
    got = b.affinity_add(current, policy)
    assert got["nodeAffinity"][REQUIRED]["nodeSelectorTerms"] == [other, NODE_TERM]


def test_affinity_replace_and_remove() -> None:
    pod_term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    current = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]},
               "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [PREF]}}
    policy = {"nodeAffinity": {PREFERRED: [{"weight": 1, "preference": NODE_TERM}]}}
    replaced = b.affinity_replace(current, policy)
    assert replaced["nodeAffinity"] == policy["nodeAffinity"]
    assert replaced["podAntiAffinity"] == current["podAntiAffinity"]
    removed = b.affinity_remove(current, {"nodeAffinity": {PREFERRED: [PREF]}})
    assert removed == {"podAntiAffinity": current["podAntiAffinity"]}


@pytest.mark.parametrize(("a", "b_", "equal"), [
    ("13", 13, True), ("1.4", 1.4, True), ("test", "test", True), ("x", "y", False),
    (True, "true", True), ("01", 1, True), ("a", 1, False),
])
def test_loose_equal(a: object, b_: object, equal: bool) -> None:
    assert b.loose_equal(a, b_) is equal


def test_loose_compare_numbers_strings_and_errors() -> None:
    assert b.loose_compare("13", 12) == 1
    assert b.loose_compare(2, "2.0") == 0
    assert b.loose_compare("abc", "abd") == -1
    with pytest.raises(ValueError, match="cannot order"):
        b.loose_compare({"a": 1}, 2)


def test_loose_in() -> None:
    assert b.loose_in("13", [12, 13, 15])
    assert not b.loose_in("14", [12, 13, 15])


@pytest.mark.parametrize(("value", "op", "operand", "result"), [
    (10, "*", "50%", 5), (10, "+", "2", 12), (10, "-", 2.5, 7.5), (9, "/", "3", 3), ("4", "*", "0.5", 2),
])
def test_arithmetic(value: object, op: str, operand: object, result: object) -> None:
    assert b.arithmetic(value, op, operand) == result


def test_arithmetic_errors() -> None:
    with pytest.raises(ValueError, match="divides by zero"):
        b.arithmetic(1, "/", "0")
    with pytest.raises(ValueError, match="needs a number"):
        b.arithmetic("x", "+", "1")
    with pytest.raises(ValueError, match="percentage"):
        b.arithmetic(1, "+", "abc")
    with pytest.raises(ValueError, match=r"1e300 \* 1e10 is beyond the range of a double"):
        b.arithmetic("1e300", "*", "1e10")


def test_an_arithmetic_result_beyond_int64_is_a_double_cel_can_take() -> None:
    result = b.arithmetic(2**62, "*", 4)
    assert result == 2.0**64 and isinstance(result, float)
    assert b.arithmetic(2**62, "*", 1) == 2**62 and isinstance(b.arithmetic(2**62, "*", 1), int)


@pytest.mark.parametrize(("text", "held"), [("0", True), ("0e-999", True), ("1e308", True), ("-1.7e308", True),
                                            ("5e-324", True), ("1e400", False), ("-1e400", False),
                                            ("1e-400", False)])
def test_representable(text: str, held: bool) -> None:
    assert b.representable(text) is held
