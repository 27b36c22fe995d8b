"""Partial parsing (``parse_policy_partial``): the same problems as ``parse_policy``, and a typed
model of everything that did not fail, for the compiler's semantic checks."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.overrides import OverrideRule
from kinitiras_py.api.policies import (
    API_VERSION,
    ClusterOverridePolicy,
    ClusterValidatePolicy,
    parse_policy,
    parse_policy_partial,
)
from kinitiras_py.api.schema import parse_into
from kinitiras_py.base.errors import PolicyError, PolicyErrors


def _override(*rules: Any, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
            "spec": {"overrideRules": list(rules), **spec}}


def _strict_errors(obj: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyErrors) as caught:
        parse_policy(obj)
    return [(e.path, e.reason) for e in caught.value.errors]


def test_a_field_that_fails_is_reported_and_left_at_its_default() -> None:
    policy = _override({"failurePolicy": "Sometimes", "overriders": {"cel": 5, "plaintext": "x"}},
                       {"overriders": {"cel": "[]"}}, executionTier="high")
    model, errors = parse_policy_partial(policy)
    assert [(e.path, e.reason) for e in errors] == _strict_errors(policy) == [
        ("spec.overrideRules[0].failurePolicy", 'unsupported value "Sometimes": must be one of Fail, Ignore'),
        ("spec.overrideRules[0].overriders.cel", "must be of type string, got integer"),
        ("spec.overrideRules[0].overriders.plaintext", "must be of type array, got string"),
        ("spec.executionTier", "must be of type integer, got string"),
    ]
    assert isinstance(model, ClusterOverridePolicy) and model.spec is not None
    first, second = model.spec.override_rules
    assert isinstance(first, OverrideRule) and first.failure_policy == "Fail"
    assert first.overriders.cel is None and first.overriders.plaintext == []
    assert second.overriders.cel == "[]" and model.spec.execution_tier == 0
    assert first.raw is policy["spec"]["overrideRules"][0]


def test_items_keep_their_places_and_a_missing_required_field_is_absent() -> None:
    policy = {"apiVersion": API_VERSION, "kind": "ClusterValidatePolicy", "metadata": {"name": "p"},
              "spec": {"validateRules": [7, {"cel": "true"}],
                       "resourceSelectors": [{"kind": "Pod"}],
                       "valueRefs": {"a": "no", "b": {"from": "current", "path": "x"}}}}
    model, errors = parse_policy_partial(policy)
    assert [e.path for e in errors] == ["spec.validateRules[0]", "spec.resourceSelectors[0].apiVersion",
                                        "spec.valueRefs[a]"]
    assert isinstance(model, ClusterValidatePolicy) and model.spec is not None
    assert model.spec.validate_rules[0] is None and model.spec.validate_rules[1].cel == "true"
    (selector,) = model.spec.resource_selectors
    assert selector.kind == "Pod" and selector.api_version is None
    assert model.spec.value_refs["a"] is None and model.spec.value_refs["b"].path == "x"


def test_a_required_list_that_fails_is_empty() -> None:
    model, errors = parse_policy_partial(_override())
    assert [(e.path, e.reason) for e in errors] == [("spec.overrideRules", "must have at least 1 item")]
    policy = _override()
    policy["spec"]["overrideRules"] = "none"
    model, errors = parse_policy_partial(policy)
    assert [e.path for e in errors] == ["spec.overrideRules"]
    assert model is not None and model.spec is not None and model.spec.override_rules == []


def test_cross_field_problems_are_checked_only_on_a_model_without_errors() -> None:
    both = {"expression": "true", "select": "$.a"}
    errors: list[PolicyError] = []
    assert parse_into(MatchCondition, both, "c", errors, partial=True) is not None
    assert [e.path for e in errors] == ["c.expression"]  # set exactly one of expression and select
    errors = []
    condition = parse_into(MatchCondition, {**both, "bogus": 1}, "c", errors, partial=True)
    assert condition is not None and condition.expression == "true"
    assert [(e.path, e.reason) for e in errors] == [("c.bogus", "unknown field")]


@pytest.mark.parametrize("obj", [None, [], {"apiVersion": "v1", "kind": "ClusterOverridePolicy"},
                                 {"apiVersion": API_VERSION, "kind": "Widget"}])
def test_what_is_not_one_of_our_kinds_has_no_model(obj: Any) -> None:
    model, errors = parse_policy_partial(obj)
    assert model is None and [(e.path, e.reason) for e in errors] == _strict_errors(obj)


def test_a_valid_policy_parses_alike_both_ways() -> None:
    policy = _override({"overriders": {"cel": "[]"}, "targetOperations": ["CREATE"]})
    model, errors = parse_policy_partial(policy)
    assert errors == [] and model == parse_policy(policy)
