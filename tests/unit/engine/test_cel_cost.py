"""CEL cost bounds: the estimate refused at admission, and the bounds enforced at run time."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.base.errors import CelEvalError, PolicyErrors
from kinitiras_py.engine.evaluation import bounds, cel, cost
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding


def _override(expression: str) -> dict[str, Any]:
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
def test_ordinary_programs_are_admitted_for_any_request(expression: str) -> None:
    bound = cel.compile_program(expression).bound
    assert bound.cost <= cost.BUDGET and bound.items is None and bound.bytes is None


def test_loops_side_by_side_share_the_iteration_limit() -> None:
    # All loops together run 10,000 iterations at most: forty of them cost no more than that many
    # iterations of one, not forty times as much.
    one = cel.compile_program("object.spec.l0.all(x, x.name != 'a')").bound.cost
    forty = cel.compile_program(" && ".join(f"object.spec.l{i}.all(x, x.name != 'a')" for i in range(40))).bound
    assert forty.items is None and forty.cost < 4 * one


@pytest.mark.parametrize("expression", [
    # A list read from the element of the enclosing loop: each pass iterates a different part of the request.
    "object.spec.containers.all(c, c.args.all(a, a.startsWith('-') && a.contains('=')))",
    "object.spec.containers.all(c, range(size(c.args)).all(i, c.args[i].startsWith('-') && c.args[i].contains('=')))",
])
def test_parts_of_an_element_are_charged_once_per_pass(expression: str) -> None:
    assert (cel.compile_program(expression).bound.items or cost.MAX_ITERATIONS) >= 1000


def test_what_a_step_adds_through_its_index_counts_once() -> None:
    # Each step maps one element, read by its index: together they are as large as the list.
    bound = cel.compile_program("range(size(object.spec.l)).map(i, object.spec.l[i]).size() > 0").bound
    assert (bound.items or cost.MAX_ITERATIONS) >= 1000


def test_range_beyond_the_list_limit_is_a_rule_error_not_a_stall() -> None:
    program = cel.compile_program("range(size(object.spec.containers) * 100000).size() > 0")
    with pytest.raises(CelEvalError, match="more than the 1000 elements"):
        program.evaluate({"object": {"spec": {"containers": [1]}}})


def test_function_results_are_bounded() -> None:
    program = cel.compile_program("object.text.findAll('a').size() > 0")
    assert program.evaluate({"object": {"text": "a" * 10}}) is True
    with pytest.raises(CelEvalError, match="the limit is 1000"):
        program.evaluate({"object": {"text": "a" * 5000}})


@pytest.mark.parametrize("source", [
    "range(3).size() == 3",  # a list out: the bounds' wrapper
    "quantity('1Gi') == '1Gi'",  # strings in and out: the bridge checks the time itself
    "'4Gi'.scale('0.5', '1') == '2Gi'",
    "'4Gi'.isGreaterThan('1Gi')",
])
def test_an_evaluation_past_its_time_limit_fails(monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    program = cel.compile_program(source)
    assert program.evaluate({}, remember=False) is True
    monkeypatch.setattr(bounds, "TIME_LIMIT", -1.0)  # already over when the first function runs
    with pytest.raises(CelEvalError, match="ran longer than its"):
        program.evaluate({}, remember=False)


def test_cel_cpp_stops_after_its_iteration_budget() -> None:
    # What lets the estimate cap loop nesting at MAX_ITERATIONS iterations in all.
    program = cel.compile_program("object.all(x, object.all(y, true))")
    with pytest.raises(CelEvalError, match="Iteration budget exceeded"):
        program.evaluate({"object": list(range(101))})


MAPPING = 'object.spec.containers.map(c, c.name).size() > 100000 ? [{"op": "add", "path": "/x", "value": 1}] : []'


def _pod(containers: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": f"c{i}", "image": "nginx"} for i in range(containers)]}}


def test_a_program_over_budget_for_the_largest_requests_is_admitted_for_smaller_ones() -> None:
    # map copies its result at every step: over 10,000 containers it would run for seconds.
    bound = cel.compile_program(MAPPING).bound
    assert bound.items == 1000 and bound.cost <= cost.BUDGET
    assert cel.compile_program("object.spec.containers.all(c, c.image != '')").bound.items is None


@pytest.mark.parametrize(("failure_policy", "denied"), [("Fail", True), ("Ignore", False)])
def test_a_request_beyond_the_bound_is_a_rule_error_under_failure_policy(failure_policy: str, denied: bool) -> None:
    policy_obj = _override(MAPPING)
    policy_obj["spec"]["overrideRules"][0]["failurePolicy"] = failure_policy
    policy = compile_policy(policy_obj)
    rule = policy.rules[0]
    variables = {"oldObject": None, "request": {"operation": "CREATE"}}
    assert overriding.mutate([(policy, rule)], _pod(3), variables).failure is None
    mutation = overriding.mutate([(policy, rule)], _pod(1500), variables)
    assert (mutation.failure is not None) is denied
    reason = str(mutation.failure) if denied else " ".join(mutation.warnings)
    assert "too large for this expression's cost bound" in reason and "1500 entries" in reason


def test_offline_apply_refuses_the_range_bomb_within_bounded_memory(tmp_path: Path) -> None:
    # The process may not map more than 1.5 GiB: range(50000000) once took 3 GB.
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump(_override("range(50000000).size() > 0 ? [] : []")))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(_pod(1)))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**29, 3 * 2**29))

    command = [sys.executable, "-m", "kinitiras_py", "apply", "--policy", str(policy), "--resource", str(pod)]
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=limit, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "spec.overrideRules[0].overriders.cel" in done.stderr and "estimated cost" in done.stderr


def test_only_requests_that_may_run_long_leave_the_event_loop() -> None:
    cheap = cel.compile_program("has(object.metadata.labels)")
    dear_by_itself = cel.compile_program("range(1000).exists(i, range(6).exists(j, quantity(string(i * 6 + j) + 'Mi')"
                                         ".scale('0.5', '1') == 'x'))")
    dear_on_large_objects = cel.compile_program("workload.podSpecPath(object.apiVersion, object.kind) == ''")
    assert dear_by_itself.bound.base > cel.INLINE_COST > dear_on_large_objects.bound.base
    assert dear_on_large_objects.bound.cost > cel.INLINE_COST
    small, large = _pod(3), _pod(3)
    large["metadata"]["annotations"] = {"pad": "x" * cel.INLINE_BYTES}
    assert not cel.runs_long([cheap, None], large)
    assert cel.runs_long([cheap, dear_by_itself], small)
    assert not cel.runs_long([dear_on_large_objects], small)
    assert cel.runs_long([dear_on_large_objects], large)
    # The size of the review that carried the object, when given, is what counts.
    assert cel.runs_long([dear_on_large_objects], small, cel.INLINE_BYTES + 1)
    assert not cel.runs_long([dear_on_large_objects], large, cel.INLINE_BYTES)
