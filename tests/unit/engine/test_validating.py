"""The validate engine: conditions, value references, valueProcess, affectMode, CEL rules,
validationActions, deterministic ordering, failurePolicy, and kinitiras' §6.2 verdict table."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import PolicyId, RuleId, Verdict
from kinitiras_py.engine.running import validating
from kinitiras_py.engine.running.validating import validate

API = "policy.kcloudlabs.io/v1alpha1"
EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"

DEPLOY: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web-1", "namespace": "team-a",
                 "annotations": {"max": "5", "ratio": "1.4", "owner": "alice"},
                 "labels": {"app": "web"}},
    "spec": {"replicas": 3, "maxReplicas": 5, "paused": False},
}


def cvp(name: str, *rules: dict[str, Any], kind: str = "ClusterValidatePolicy",
        namespace: str | None = None) -> CompiledPolicy:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return compile_policy({"apiVersion": API, "kind": kind, "metadata": meta,
                           "spec": {"validateRules": list(rules)}})


def condition(cond: str, data: str = "/spec/replicas", message: str = "denied by condition",
              **extra: Any) -> dict[str, Any]:
    """A condition rule; ``data`` is a path in the current object, unless dataRef is given."""
    extra.setdefault("dataRef", {"from": "current", "path": data})
    return {"template": {"type": "condition", "condition": {"cond": cond, "message": message, **extra}}}


def run(policy: CompiledPolicy, obj: dict[str, Any] = DEPLOY, old: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None, lookup_errors: dict[int, str] | None = None) -> Verdict:
    """Every rule of ``policy`` on ``obj``; params and lookup errors by rule index."""
    return validate([(policy, rule) for rule in policy.rules], {"object": obj, "oldObject": old},
                    {RuleId(policy.identity, i): p for i, p in (params or {}).items()},
                    {RuleId(policy.identity, i): e for i, e in (lookup_errors or {}).items()})


def rejects(rule: dict[str, Any], obj: dict[str, Any] = DEPLOY, **kw: Any) -> bool:
    verdict = run(cvp("p", rule), obj, **kw)
    assert verdict.warnings == [] and verdict.audit == []
    if not verdict.allowed:
        assert verdict.message == "ClusterValidatePolicy p: denied by condition"
    return not verdict.allowed


# --- every condition, with a constant ------------------------------------------------------------

CONSTANT_CASES = [
    ("Equal", "/spec/replicas", {"integer": 3}, True),
    ("Equal", "/spec/replicas", {"integer": 4}, False),
    ("Equal", "/metadata/annotations/owner", {"string": "alice"}, True),
    ("Equal", "/spec/paused", {"boolean": False}, True),
    ("NotEqual", "/spec/replicas", {"integer": 4}, True),
    ("NotEqual", "/spec/replicas", {"integer": 3}, False),
    ("NotEqual", "/spec/absent", {"integer": 3}, False),  # data must exist
    ("Exist", "/metadata/annotations/owner", None, True),
    ("Exist", "/metadata/annotations/nobody", None, False),
    ("NotExist", "/metadata/annotations/nobody", None, True),
    ("NotExist", "/metadata/annotations/owner", None, False),
    ("In", "/metadata/annotations/owner", {"stringSlice": ["bob", "alice"]}, True),
    ("In", "/metadata/annotations/owner", {"stringSlice": ["bob"]}, False),
    ("NotIn", "/metadata/annotations/owner", {"stringSlice": ["bob"]}, True),
    ("NotIn", "/metadata/annotations/owner", {"stringSlice": ["alice"]}, False),
    ("NotIn", "/metadata/annotations/nobody", {"stringSlice": ["alice"]}, False),  # data must exist
    ("Gt", "/spec/replicas", {"integer": 2}, True),
    ("Gt", "/spec/replicas", {"integer": 3}, False),
    ("Gte", "/spec/replicas", {"integer": 3}, True),
    ("Gte", "/spec/replicas", {"integer": 4}, False),
    ("Lt", "/spec/replicas", {"float": "3.5"}, True),
    ("Lt", "/spec/replicas", {"integer": 3}, False),
    ("Lte", "/spec/replicas", {"integer": 3}, True),
    ("Lte", "/spec/replicas", {"integer": 2}, False),
    ("Gt", "/metadata/name", {"string": "web-0"}, True),  # two strings compare as text
    ("Regex", "/metadata/name", {"string": "^web-[0-9]+$"}, True),
    ("Regex", "/metadata/name", {"string": "^api-"}, False),
    ("Regex", "/spec/replicas", {"string": "^[0-9]$"}, True),  # a number is matched as its text
]


@pytest.mark.parametrize(("cond", "path", "value", "rejected"), CONSTANT_CASES)
def test_condition_with_a_constant(cond: str, path: str, value: dict[str, Any] | None, rejected: bool) -> None:
    extra = {"value": value} if value is not None else {}
    assert rejects(condition(cond, path, **extra)) is rejected


# --- numeric strings: annotations hold text, constants may be numbers --------------------------

@pytest.mark.parametrize(("cond", "path", "value", "rejected"), [
    ("In", "/metadata/annotations/max", {"integerSlice": [4, 5, 6]}, True),
    ("In", "/metadata/annotations/max", {"integerSlice": [4, 6]}, False),
    ("Equal", "/metadata/annotations/max", {"integer": 5}, True),
    ("Gt", "/metadata/annotations/max", {"integer": 4}, True),
    ("Lt", "/metadata/annotations/max", {"integer": 10}, True),  # 5 < 10 as numbers ("5" > "10" as text)
    ("In", "/metadata/annotations/ratio", {"floatSlice": ["1.2", "1.40"]}, True),  # 1.4 == 1.40
    ("Equal", "/spec/replicas", {"string": "3"}, True),
])
def test_numeric_strings_compare_as_numbers(cond: str, path: str, value: dict[str, Any], rejected: bool) -> None:
    assert rejects(condition(cond, path, value=value)) is rejected


# --- value references ---------------------------------------------------------------------------

CURRENT_MAX = {"from": "current", "path": "/spec/maxReplicas"}


@pytest.mark.parametrize(("cond", "replicas", "rejected"), [
    ("Equal", 5, True), ("Equal", 3, False), ("NotEqual", 3, True), ("Gt", 6, True), ("Gt", 5, False),
    ("Gte", 5, True), ("Lt", 3, True), ("Lt", 5, False), ("Lte", 5, True), ("Lte", 6, False),
])
def test_condition_with_a_current_value_ref(cond: str, replicas: int, rejected: bool) -> None:
    obj = copy.deepcopy(DEPLOY)
    obj["spec"]["replicas"] = replicas
    assert rejects(condition(cond, valueRef=CURRENT_MAX), obj) is rejected


def test_in_and_regex_with_a_current_value_ref() -> None:
    obj = copy.deepcopy(DEPLOY)
    obj["spec"]["allowed"] = ["alice", "bob"]
    obj["spec"]["pattern"] = "^web-"
    allowed = {"from": "current", "path": "/spec/allowed"}
    assert rejects(condition("In", "/metadata/annotations/owner", valueRef=allowed), obj)
    assert not rejects(condition("NotIn", "/metadata/annotations/owner", valueRef=allowed), obj)
    assert rejects(condition("Regex", "/metadata/name", valueRef={"from": "current", "path": "/spec/pattern"}), obj)


def test_in_with_a_value_ref_holding_a_string_is_not_character_membership() -> None:
    obj = copy.deepcopy(DEPLOY)
    obj["spec"]["allowed"] = "xaliceybob"
    rule = condition("In", "/metadata/annotations/owner", valueRef={"from": "current", "path": "/spec/allowed"})
    obj["metadata"]["annotations"]["owner"] = "a"
    verdict = run(cvp("p", rule), obj)
    assert verdict.message != "ClusterValidatePolicy p: denied by condition"


def test_absent_value_ref_never_rejects() -> None:
    for cond in ("Equal", "NotEqual", "Gt", "Lt", "In", "NotIn"):
        assert not rejects(condition(cond, valueRef={"from": "current", "path": "/spec/nothing"}))


def test_old_value_ref() -> None:
    old = copy.deepcopy(DEPLOY)
    old["spec"]["replicas"] = 2
    grew = condition("Gt", valueRef={"from": "old", "path": "/spec/replicas"})
    assert rejects(grew, old=old)
    assert not rejects(grew, old=DEPLOY)
    assert not rejects(grew, old=None)  # CREATE: there is no old object, the reference is absent
    assert rejects(condition("NotExist", dataRef={"from": "old", "path": "/spec/replicas"}), old=None)


@pytest.mark.parametrize("source", ["k8s", "owner", "http"])
def test_value_ref_from_params(source: str) -> None:
    ref: dict[str, Any] = {"from": source, "path": "/spec/limit" if source != "http" else "body.limit"}
    if source == "k8s":
        ref["k8s"] = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "limits"}
    if source == "http":
        ref["http"] = {"url": "https://limits.example/api"}
    rule = condition("Gt", valueRef=ref)
    found = {"spec": {"limit": 2}} if source != "http" else {"body": {"limit": 2}, "header": {}}
    assert rejects(rule, params={0: {"valueRef": found}})
    found = {"spec": {"limit": 3}} if source != "http" else {"body": {"limit": 3}, "header": {}}
    assert not rejects(rule, params={0: {"valueRef": found}})
    assert not rejects(rule, params={0: {}})  # resolved to nothing (null): absent


def test_data_ref_from_k8s_params() -> None:
    data = {"from": "k8s", "path": "/data/frozen",
            "k8s": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "flags"}}
    rule = condition("Equal", dataRef=data, value={"string": "true"})
    assert rejects(rule, params={0: {"dataRef": {"data": {"frozen": "true"}}}})
    assert not rejects(rule, params={0: {"dataRef": {"data": {"frozen": "false"}}}})
    both = condition("Lt", dataRef=data | {"path": "/data/max"},
                     valueRef={"from": "k8s", "path": "/data/min", "k8s": data["k8s"]})
    assert rejects(both, params={0: {"dataRef": {"data": {"max": "1"}}, "valueRef": {"data": {"min": "2"}}}})
    assert not rejects(both, params={0: {"dataRef": {"data": {"max": "3"}}, "valueRef": {"data": {"min": "2"}}}})


def test_http_paths_without_body_are_read_under_body() -> None:
    # kinitiras wrapped answers as {body, header, trailer}, so "result.x" never matched.
    data = {"from": "http", "path": "result.reject", "http": {"url": "https://approver.example/check"}}
    rule = condition("Equal", dataRef=data, value={"boolean": True})
    assert rejects(rule, params={0: {"dataRef": {"body": {"result": {"reject": True}}, "header": {}}}})


# --- valueProcess ---------------------------------------------------------------------------------

OLD_REPLICAS = {"from": "old", "path": "/spec/replicas"}


@pytest.mark.parametrize(("new", "rejected"), [(4, True), (5, False), (9, False)])
def test_replicas_below_half_of_old_replicas(new: int, rejected: bool) -> None:
    old = copy.deepcopy(DEPLOY)
    old["spec"]["replicas"] = 10
    obj = copy.deepcopy(DEPLOY)
    obj["spec"]["replicas"] = new
    rule = condition("Lt", valueRef=OLD_REPLICAS, valueProcess={"operation": "*", "operationWith": "50%"})
    assert rejects(rule, obj, old=old) is rejected


@pytest.mark.parametrize(("operation", "operand", "cond", "value", "rejected"), [
    ("+", 1, "Equal", {"integer": 2}, True),        # 3 == 2 + 1
    ("-", 2, "Equal", {"integer": 5}, True),        # 3 == 5 - 2
    ("*", 2, "Lt", {"integer": 2}, True),           # 3 < 2 * 2
    ("/", 2, "Gt", {"integer": 5}, True),           # 3 > 5 / 2 (2.5, not 2)
    ("/", "4", "Gt", {"integer": 12}, False),       # 3 > 3
    ("+", "10%", "Gte", {"integer": 3}, False),     # 3 >= 3.1
    ("*", "150%", "Equal", {"integer": 2}, True),   # 3 == 2 * 1.5
    ("-", "0.5", "Gt", {"float": "3.4"}, True),     # 3 > 2.9
    ("+", 1, "Equal", {"string": "2"}, True),       # a numeric string constant
])
def test_value_process_with_a_constant(operation: str, operand: Any, cond: str, value: dict[str, Any],
                                       rejected: bool) -> None:
    rule = condition(cond, value=value, valueProcess={"operation": operation, "operationWith": operand})
    assert rejects(rule) is rejected


# --- affectMode --------------------------------------------------------------------------------

def test_affect_mode_reject_and_allow_both_keep_the_message() -> None:
    named = condition("Regex", "/metadata/name", value={"string": "^web-"}, message="names must start with web-")
    allow = copy.deepcopy(named)
    allow["template"]["condition"]["affectMode"] = "allow"
    reject = copy.deepcopy(named)
    reject["template"]["condition"]["affectMode"] = "reject"
    other = copy.deepcopy(DEPLOY)
    other["metadata"]["name"] = "api-1"
    # allow: admitted only when the condition holds; a refusal keeps the message (kinitiras: empty).
    assert run(cvp("p", allow)).allowed
    verdict = run(cvp("p", allow), other)
    assert not verdict.allowed
    assert verdict.message == "ClusterValidatePolicy p: names must start with web-"
    # reject (and the default): refused when the condition holds.
    for rule in (reject, named):
        verdict = run(cvp("p", rule))
        assert verdict.message == "ClusterValidatePolicy p: names must start with web-"
        assert run(cvp("p", rule), other).allowed


def test_allow_mode_refuses_when_the_data_is_absent() -> None:
    rule = condition("Equal", "/metadata/labels/team", value={"string": "a"}, affectMode="allow")
    verdict = run(cvp("p", rule))
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy p: denied by condition"


# --- cel rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("rule", "message"), [
    ({"cel": "object.spec.replicas <= 2", "message": "at most 2 replicas"}, "at most 2 replicas"),
    ({"cel": "object.spec.replicas <= 2"}, "rejected by validate rule 0"),
    ({"cel": "{'valid': object.spec.replicas <= 2, 'reason': 'too many: ' + string(object.spec.replicas)}",
      "message": "unused"}, "too many: 3"),
    ({"cel": "{'valid': false}", "message": "from the rule"}, "from the rule"),
    ({"cel": "{'valid': false, 'reason': ''}"}, "rejected by validate rule 0"),
])
def test_cel_rule_rejects_with_its_reason(rule: dict[str, Any], message: str) -> None:
    verdict = run(cvp("p", rule))
    assert not verdict.allowed
    assert verdict.message == f"ClusterValidatePolicy p: {message}"
    assert str(verdict.policy) == "ClusterValidatePolicy p"


@pytest.mark.parametrize("source", ["object.spec.replicas > 2", "{'valid': true, 'reason': 'ignored'}",
                                    "{'reason': 'valid defaults to true'}"])
def test_cel_rule_admits(source: str) -> None:
    verdict = run(cvp("p", {"cel": source}))
    assert verdict.allowed and (verdict.message, verdict.policy, verdict.warnings, verdict.audit) == ("", None, [], [])


def test_default_message_names_the_rule_index() -> None:
    verdict = run(cvp("p", {"cel": "true"}, {"cel": "false"}))
    assert verdict.message == "ClusterValidatePolicy p: rejected by validate rule 1"


def test_template_and_cel_in_one_rule_both_must_pass() -> None:
    rule = condition("Gt", value={"integer": 10}) | {"cel": "object.metadata.name != 'web-1'", "message": "name"}
    verdict = run(cvp("p", rule))
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy p: name"


def test_rules_without_params_share_one_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []
    real = validating.Bindings

    def spy(variables: dict[str, Any]) -> Any:
        made.append(variables)
        return real(variables)

    monkeypatch.setattr(validating, "Bindings", spy)
    policy = cvp("p", {"cel": "params == {}"}, {"cel": "params.?x.orValue('') == 'y'"},
                 {"cel": "object.spec.replicas == 3"})
    verdict = run(policy, params={1: {"x": "y"}})
    assert verdict.allowed, verdict.message
    assert [v["params"] for v in made] == [{}]


def test_an_object_cel_cannot_take_is_a_rule_error_not_a_crash() -> None:
    verdict = run(cvp("p", {"cel": "object.spec != null"}), {**DEPLOY, "spec": {"replicas": 10**400}})
    assert not verdict.allowed and "too large for CEL" in verdict.message


def test_a_value_cel_cannot_take_matters_only_where_a_rule_reads() -> None:
    verdict = run(cvp("p", {"cel": "object.metadata.name != ''"}), {**DEPLOY, "spec": {"replicas": 10**400}})
    assert verdict.allowed, verdict.message


# --- validationActions -----------------------------------------------------------------------------

FAIL = {"cel": "false", "message": "nope"}


def test_warn_admits_with_a_warning_naming_the_policy() -> None:
    verdict = run(cvp("warn-me", FAIL | {"validationActions": ["Warn"]}))
    assert verdict.allowed and verdict.message == ""
    assert verdict.warnings == ["ClusterValidatePolicy warn-me: nope"]
    assert verdict.audit == []


def test_audit_admits_and_records() -> None:
    verdict = run(cvp("audit-me", FAIL | {"validationActions": ["Audit"]}))
    assert verdict.allowed and verdict.warnings == []
    assert verdict.audit == ["ClusterValidatePolicy audit-me: nope"]


def test_deny_with_audit_denies_and_records() -> None:
    verdict = run(cvp("p", FAIL | {"validationActions": ["Deny", "Audit"]}))
    assert not verdict.allowed
    assert verdict.audit == [verdict.message] == ["ClusterValidatePolicy p: nope"]


def test_warn_and_audit_then_deny_keeps_the_earlier_warnings() -> None:
    policy = cvp("p", FAIL | {"validationActions": ["Warn", "Audit"]}, {"cel": "false", "message": "second"})
    verdict = run(policy)
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy p: second"
    assert verdict.warnings == verdict.audit == ["ClusterValidatePolicy p: nope"]


def test_passing_rules_leave_no_trace() -> None:
    verdict = run(cvp("p", {"cel": "true", "validationActions": ["Warn"]}, {"cel": "true"}))
    assert verdict.allowed and verdict.warnings == verdict.audit == [] and verdict.message == ""
    assert set(verdict.timings) == {PolicyId("ClusterValidatePolicy", None, "p")}


# --- order: the first Deny wins, deterministically ----------------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
def test_first_deny_is_the_policy_sorting_first_by_name(reverse: bool) -> None:
    alpha = cvp("alpha", {"cel": "false", "message": "from alpha"})
    beta = cvp("beta", {"cel": "false", "message": "from beta"})
    policies = [beta, alpha] if reverse else [alpha, beta]
    index = PolicyIndex(policies)
    verdict = validate(list(index.matching(DEPLOY, "CREATE")), {"object": DEPLOY})
    assert verdict.message == "ClusterValidatePolicy alpha: from alpha"
    # validate() itself orders what it is given, whatever the caller's order.
    matches = [(p, r) for p in policies for r in p.rules]
    assert str(validate(matches, {"object": DEPLOY}).policy) == "ClusterValidatePolicy alpha"
    assert str(validate(reversed(matches), {"object": DEPLOY}).policy) == "ClusterValidatePolicy alpha"


def test_cluster_policies_run_before_namespaced_ones() -> None:
    namespaced = cvp("aaa", {"cel": "false", "message": "namespaced"}, kind="ValidatePolicy", namespace="team-a")
    cluster = cvp("zzz", {"cel": "false", "message": "cluster"})
    for order in ([namespaced, cluster], [cluster, namespaced]):
        verdict = validate(PolicyIndex(order).matching(DEPLOY, "UPDATE"), {"object": DEPLOY})
        assert verdict.message == "ClusterValidatePolicy zzz: cluster"


def test_rules_of_one_policy_run_in_written_order() -> None:
    policy = cvp("p", {"cel": "false", "message": "first"}, {"cel": "false", "message": "second"})
    matches = [(policy, r) for r in reversed(policy.rules)]
    assert validate(matches, {"object": DEPLOY}).message == "ClusterValidatePolicy p: first"


# --- errors and failurePolicy ----------------------------------------------------------------

BROKEN = condition("Gt", "/metadata/annotations/owner", value={"integer": 1})  # "alice" > 1: cannot order


def test_runtime_error_with_fail_denies_naming_policy_rule_and_reason() -> None:
    verdict = run(cvp("p", {"cel": "true"}, BROKEN))
    assert not verdict.allowed
    assert verdict.message.startswith("policy ClusterValidatePolicy p, rule 1: ")
    assert "cannot order 'alice' and 1" in verdict.message
    assert str(verdict.policy) == "ClusterValidatePolicy p"


def test_runtime_error_with_ignore_is_skipped_with_a_warning() -> None:
    verdict = run(cvp("p", BROKEN | {"failurePolicy": "Ignore"}, {"cel": "false", "message": "next rule"}))
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy p: next rule"
    [warning] = verdict.warnings
    assert warning.startswith("policy ClusterValidatePolicy p, rule 0: ")
    assert warning.endswith("(failurePolicy Ignore: rule skipped)")


def test_a_result_of_the_wrong_shape_is_an_error() -> None:
    verdict = run(cvp("p", {"cel": "dyn(object.metadata.name)"}))
    assert not verdict.allowed
    assert "the cel rule must return a bool or a map {valid, reason}, got 'web-1'" in verdict.message


@pytest.mark.parametrize(("failure_policy", "allowed"), [("Fail", False), ("Ignore", True)])
def test_lookup_errors_follow_failure_policy(failure_policy: str, allowed: bool) -> None:
    ref = {"from": "owner", "path": "/spec/replicas"}
    policy = cvp("p", condition("Gt", valueRef=ref) | {"failurePolicy": failure_policy})
    verdict = run(policy, lookup_errors={0: "the object has no owner"})
    assert verdict.allowed is allowed
    text = verdict.message if not allowed else verdict.warnings[0]
    assert text.startswith("policy ClusterValidatePolicy p, rule 0: the object has no owner")


def test_a_failing_warn_only_rule_warns_instead_of_denying() -> None:
    # As the API server does for ValidatingAdmissionPolicy: failurePolicy Fail makes an error a
    # failed check, and validationActions decide what a failed check does.
    verdict = run(cvp("p", BROKEN | {"validationActions": ["Warn"]}))
    assert verdict.allowed
    assert verdict.warnings[0].startswith("policy ClusterValidatePolicy p, rule 0: cannot order")
    verdict = run(cvp("p", BROKEN | {"validationActions": ["Audit"]}), lookup_errors={0: "down"})
    assert verdict.allowed and verdict.audit == ["policy ClusterValidatePolicy p, rule 0: down"]


# --- kinitiras §6.2: validate-multi against Namespace team-a ------------------------------------

TEAM_A = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
    "name": "team-a", "labels": {"kinitiras.kcloudlabs.io/webhook": "enabled"},
    "annotations": {"owned-by": "test", "no-delete": "true", "integer": "13", "float": "1.4"}}}


def multi() -> CompiledPolicy:
    return compile_policy(yaml.safe_load((EXAMPLES / "templates" / "validate-multi.yaml").read_text()))


def one_rule(index: int, obj: dict[str, Any] = TEAM_A, params: dict[str, Any] | None = None,
             error: str | None = None) -> Verdict:
    """Rule ``index`` of validate-multi alone on ``obj`` (DELETE: no old object)."""
    policy = multi()
    key = RuleId(policy.identity, index)
    return validate([(policy, policy.rules[index])], {"object": obj, "oldObject": None},
                    {key: params} if params is not None else {}, {key: error} if error is not None else {})


DENIED = "ClusterValidatePolicy test-multi-validate: cannot delete this ns"


def test_multi_rule_0_exist_no_delete_rejects() -> None:
    assert one_rule(0).message == DENIED  # as kinitiras


def test_multi_rule_1_equal_owned_by_test_rejects() -> None:
    assert one_rule(1).message == DENIED  # as kinitiras


def test_multi_rule_2_http_path_is_read_under_body() -> None:
    # DIFFERENCE: kinitiras never rejected (the answer is {body, header, trailer} and the path
    # lacked "body."); a path that does not start with body/header is read under body here.
    answer = {"body": {"data": {"result": {"reject": True}}}, "header": {}}
    verdict = one_rule(2, params={"dataRef": answer})
    assert verdict.message == "ClusterValidatePolicy test-multi-validate: api reject deletion"
    assert one_rule(2, params={"dataRef": {"body": {"data": {"result": {"reject": False}}}}}).allowed
    # DIFFERENCE: an unreachable approver is the rule's failurePolicy (Fail by default: deny,
    # naming the rule); kinitiras answered 500 for the whole request.
    verdict = one_rule(2, error="GET https://deletion-approver.example.invalid/check: connection refused")
    assert verdict.message.startswith("policy ClusterValidatePolicy test-multi-validate, rule 2: GET")


def test_multi_rule_3_k8s_lookup_failure_denies_naming_the_rule() -> None:
    # DIFFERENCE: kinitiras failed with a GVK mapping error and a bare 500; here the resolver's
    # error becomes a denial naming the policy, the rule and the reason.
    verdict = one_rule(3, error="no kind deployment in v1")
    assert not verdict.allowed
    assert verdict.message == "policy ClusterValidatePolicy test-multi-validate, rule 3: no kind deployment in v1"
    # With a resolved Deployment the rule compares its replicas with an absent value: admitted.
    assert one_rule(3, params={"dataRef": {"spec": {"replica": 3}}}).allowed


def test_multi_rule_4_in_string_slice_rejects() -> None:
    assert one_rule(4).message == DENIED  # as kinitiras


def test_multi_rule_5_in_integer_slice_on_a_numeric_annotation_rejects() -> None:
    # DIFFERENCE: kinitiras compared the string "13" with the integers and never rejected.
    assert one_rule(5).message == DENIED


def test_multi_rule_6_in_float_slice_rejects() -> None:
    # As kinitiras, but compared as numbers: "1.40" would match too (kinitiras compared text).
    assert one_rule(6).message == DENIED
    other = copy.deepcopy(TEAM_A)
    other["metadata"]["annotations"]["float"] = "1.40"
    assert one_rule(6, other).message == DENIED


def test_multi_rule_7_not_in() -> None:
    assert one_rule(7).allowed  # as kinitiras: "test" is in the list
    other = copy.deepcopy(TEAM_A)
    other["metadata"]["annotations"]["owned-by"] = "other"
    assert one_rule(7, other).message == DENIED  # as kinitiras


def test_multi_whole_policy_first_rejection_wins() -> None:
    index = PolicyIndex([multi()])
    verdict = validate(index.matching(TEAM_A, "DELETE"), {"object": TEAM_A, "oldObject": None})
    assert verdict.message == DENIED and str(verdict.policy) == "ClusterValidatePolicy test-multi-validate"
    # Every rule targets DELETE only.
    assert list(index.matching(TEAM_A, "CREATE")) == []
    # A namespace none of the constant rules reject: the http rule's lookup decides.
    quiet = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quiet", "annotations": {
        "owned-by": "leap-x"}}}
    policy = multi()
    matches = list(PolicyIndex([policy]).matching(quiet, "DELETE"))
    verdict = validate(matches, {"object": quiet}, {}, {RuleId(policy.identity, 2): "approver down"})
    assert verdict.message == "policy ClusterValidatePolicy test-multi-validate, rule 2: approver down"
    verdict = validate(matches, {"object": quiet}, {RuleId(policy.identity, 2): {"dataRef": {"body": {}}}},
                       {RuleId(policy.identity, 3): "no kind deployment in v1"})
    assert verdict.message.endswith("rule 3: no kind deployment in v1")
    verdict = validate(matches, {"object": quiet}, {RuleId(policy.identity, 2): {"dataRef": {"body": {}}}})
    assert verdict.message == DENIED  # rule 7: "leap-x" is not in [test, leap, ecp]
