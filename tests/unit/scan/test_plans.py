"""Which rules a background scan evaluates, and which it reports as skip, and why."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.scan.plans import plan
from tests.compiling import compile_all

GROUP = "policy.kcloudlabs.io/v1alpha1"


def validate(*rules: dict[str, Any], conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "validateRules": list(rules)}
    if conditions:
        spec["matchConditions"] = conditions
    return {"apiVersion": GROUP, "kind": "ClusterValidatePolicy", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(("cel", "reason"), [
    ("has(object.metadata.labels)", None),
    ("request.namespace == 'a'", None),
    ("request.operation == 'CREATE'", "cel reads request.operation"),
    ("request.userInfo.username != 'x'", "cel reads request.userInfo"),
    ("!request.dryRun", "cel reads request.dryRun"),
    ("has(request.userInfo)", "cel reads request.userInfo"),
    ("request != null", "cel reads the whole request"),
    ("oldObject == null || object.metadata.name == oldObject.metadata.name", "cel reads oldObject"),
])
def test_rules_reading_request_only_data_are_skipped_with_the_reason(cel: str, reason: str | None) -> None:
    found = plan(compile_all([validate({"cel": cel, "message": "m"})])[0])
    assert found.skipped == ({} if reason is None else {0: reason})
    assert (found.running is None) == (reason is not None)
    assert found.selecting is not None and [r.index for r in found.selecting.rules] == [0]


def test_run_rules_keep_going_and_report_with_their_own_actions() -> None:
    policy = compile_all([validate({"cel": "false", "message": "a", "validationActions": ["Deny"]},
                                  {"cel": "request.operation == 'x'"},
                                  {"cel": "true", "targetOperations": ["DELETE"]},
                                  {"cel": "true", "targetOperations": ["UPDATE"]})])[0]
    found = plan(policy)
    assert found.skipped == {1: "cel reads request.operation"}
    assert [r.index for r in found.selecting.rules] == [0, 1, 3]  # type: ignore[union-attr]
    running = found.running.rules  # type: ignore[union-attr]
    assert [(r.index, r.operations, r.failure_policy, r.actions) for r in running] == [
        (0, None, "Ignore", frozenset({"Audit"})), (3, None, "Ignore", frozenset({"Audit"}))]
    assert found.original(0).actions == frozenset({"Deny"}) and found.original(0).failure_policy == "Fail"


def test_match_conditions_reading_the_request_skip_every_rule() -> None:
    users = [{"name": "users", "expression": "request.userInfo.username == 'a'"}]
    policy = compile_all([validate({"cel": "true"}, {"cel": "false"}, conditions=users)])[0]
    found = plan(policy)
    assert found.skipped == {0: "matchConditions reads request.userInfo", 1: "matchConditions reads request.userInfo"}
    assert found.running is None


def test_javascript_taking_op_or_old_is_skipped() -> None:
    script = "function jsa_validate(op, obj) { return {Allowed: op !== 'DELETE'}; }"
    found = plan(compile_all([validate({"javascript": {"source": script}})])[0])
    assert found.skipped == {0: "javascript jsa_validate takes op, known only in an admission request"}
    plain = "function jsa_validate(obj) { return {Allowed: !!obj.metadata.labels}; }"
    assert plan(compile_all([validate({"javascript": {"source": plain}})])[0]).skipped == {}
