"""CEL cost bounds: the estimate refused at admission, and the bounds enforced at run time."""

from __future__ import annotations

import pytest

from kinitiras_py.base.errors import CelEvalError, PolicyErrors
from kinitiras_py.engine.compiling import compile_policy
from kinitiras_py.engine.evaluation import cel, cost


def _override(expression: str) -> dict[str, object]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "overrideRules": [{"overriders": {"cel": expression}}]}}


def test_issue_repro_is_refused_at_admission_with_path_and_estimate() -> None:
    with pytest.raises(PolicyErrors) as refused:
        compile_policy(_override("range(12000000).size() > 0 ? [] : []"))
    error = refused.value.errors[0]
    assert error.path == "spec.overrideRules[0].overriders.cel"
    assert "estimated cost" in error.reason and f"budget of {cost.BUDGET:,}" in error.reason


@pytest.mark.parametrize("expression", [
    "range(50000000).size() > 0",
    "range(9000).map(i, i).size() > 0",  # map copies its growing result: quadratic
    "cel.bind(a, range(1000), " + "cel.bind(a, a + a, " * 16 + "a.size() > 0" + ")" * 17,  # doubling
])
def test_expensive_programs_are_refused(expression: str) -> None:
    with pytest.raises(Exception, match="estimated cost"):
        cel.compile_program(expression)


@pytest.mark.parametrize("expression", [
    "object.spec.containers.all(c, c.image.contains('latest'))",
    "range(100).map(i, i * 2).size() == 100",
    "has(object.metadata.labels) && 'team' in object.metadata.labels",
])
def test_ordinary_programs_are_admitted(expression: str) -> None:
    assert cel.compile_program(expression).cost <= cost.BUDGET


def test_range_beyond_the_list_limit_is_a_rule_error_not_a_stall() -> None:
    program = cel.compile_program("range(size(object.spec.containers) * 100000).size() > 0")
    with pytest.raises(CelEvalError, match="more than the 1000 elements"):
        program.evaluate({"object": {"spec": {"containers": [1]}}})


def test_function_results_are_bounded() -> None:
    program = cel.compile_program("object.text.findAll('a').size() > 0")
    assert program.evaluate({"object": {"text": "a" * 10}}) is True
    with pytest.raises(CelEvalError, match="the limit is 1000"):
        program.evaluate({"object": {"text": "a" * 5000}})


def test_an_evaluation_past_its_time_limit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "TIME_LIMIT", -1.0)  # already over when the first function runs
    program = cel.compile_program("range(3).size() == 3")
    with pytest.raises(CelEvalError, match="ran longer than its"):
        program.evaluate({})


def test_cel_cpp_stops_after_its_iteration_budget() -> None:
    # What lets the estimate cap loop nesting at MAX_ITERATIONS iterations in all.
    program = cel.compile_program("object.all(x, object.all(y, true))")
    with pytest.raises(CelEvalError, match="Iteration budget exceeded"):
        program.evaluate({"object": list(range(101))})
