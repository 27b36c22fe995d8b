"""KubeMod functions over selects with several values, gval's comparisons, and '..' with a filter
within the cost budget (issue 23, items 5 and 6)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation import cel, cost
from kinitiras_py.engine.evaluation.kubemodlib import go_number, gval_compare
from tests.compiling import render_criterion

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "café", "labels": {"release": "3", "version": "1.0", "tier": "web"}},
    "spec": {
        "containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}, {"containerPort": 8080}]},
            {"name": "b", "image": "busybox", "securityContext": {}},
            {"name": "c", "image": "redis", "ports": [{"containerPort": 6379}]},
        ],
        "initContainers": [{"name": "i", "image": "init", "securityContext": {"runAsNonRoot": True}}],
        "nothing": None,
    },
}


def holds(select: str, obj: dict[str, Any] = POD, **condition: Any) -> Any:
    program = cel.compile_program(render_criterion({"select": select, **condition}, "spec.matchConditions[0]"))
    return program.evaluate({"object": obj})


@pytest.mark.parametrize(("select", "expected"), [
    # KubeMod's own example: the array a filter gives, compared with a string literal.
    ("length($.spec.containers[? isUndefined(@.securityContext)]) == '2'", True),
    ("length($.spec.containers[? isUndefined(@.securityContext)]) == 2", True),
    ("length($.spec.containers[? isUndefined(@.securityContext)]) != '2'", False),
    ("length($.spec.containers[? isUndefined(@.securityContext)]) > '1.5'", True),
    ("length($.spec.containers[*].ports[*]) == 3", True),  # values of nested fan-outs, all counted
    ("length($.spec.containers[0, 2, 7]) == 2", True),  # a union: the keys present
    ("length($.metadata.labels.*) == 3", True),  # a map's values
    ("length($.spec..containerPort) == 3", True),
    ("length($.spec.missing[*]) == 0", True),  # an empty array, not undefined
    ("length($.spec.containers[*].missing) == 0", True),  # undefined values are left out
    ("length($.spec.containers[*].nothing) == 0", True),
    ("isEmpty($.spec.containers[? @.image == 'nope'])", True),
    ("isEmpty($.spec.containers[? @.image == 'redis'])", False),
    ("isNotEmpty($.spec..securityContext)", True),
    ("isNotEmpty($.spec.containers[*].ports[? @.containerPort < 80])", False),
    ("isDefined($.spec.missing[*]) && !isUndefined($.spec.missing[*])", True),  # an array is always defined
    # length of one value: 0 when undefined or null, a string's bytes, a list's or map's entries
    ("length($.missing) == 0 && length($.spec.nothing) == 0", True),
    ("length($.metadata.name) == 5", True),  # "café": UTF-8 bytes, as Go's len
])
def test_functions_over_the_array_of_values(select: str, expected: bool) -> None:
    assert holds(select) is expected


def test_a_count_inside_a_filter() -> None:
    select = "$.spec.containers[? length(@.ports[? @.containerPort >= 1024]) == 1].name"
    assert holds(select, matchFor="All", matchValues=["a", "c"]) is True
    assert holds(select, matchValue="b") is False


def test_a_length_alone_is_matched_in_decimal() -> None:
    # length() is a Go int, printed "1000000"; a JSON number prints as a float64 ("1e+06").
    long = {**POD, "spec": {"s": "x" * 1_000_000}}
    assert holds("length($.spec.s)", long, matchValue="1000000") is True
    assert holds("length($.spec.containers[*])", matchValue="3") is True
    assert holds("length($.spec.containers[*])", matchValue="3", negate=True) is False


@pytest.mark.parametrize(("select", "expected"), [
    ("$.metadata.labels.release == 3", True),  # a string that reads as a number: as numbers
    ("$.metadata.labels.release > 2", True),
    ("$.metadata.labels.version == '1'", True),  # two such strings: as numbers
    ("$.metadata.labels.version != '1'", False),
    ("$.metadata.labels.version < '1.5'", True),  # ordering two strings: by their bytes
    ("$.metadata.labels.release < '10'", False),  # "3" > "10" as text
    ("$.metadata.labels.tier == 'web'", True),
    ("$.metadata.labels.tier > 5", True),  # no number: printed, then as text ("web" > "5")
    ("$.metadata.labels.tier == 5", False),
    ("$.spec.nothing < 5 || $.spec.nothing >= 5", False),  # null does not order
    ("$.spec.containers[0].ports[0].containerPort == '80'", True),
    ("$.spec.containers[0].ports[0].containerPort == $.spec.containers[0].ports[0].containerPort", True),
    ("$.spec.containers[0].ports == $.spec.containers[0].ports", True),  # as a whole
    ("$.metadata.labels.release == $.spec.containers[2].ports[0].containerPort", False),
])
def test_comparisons_as_kubemod_makes_them(select: str, expected: bool) -> None:
    assert holds(select) is expected


@pytest.mark.parametrize(("op", "a", "b", "expected"), [
    ("==", 2, "2", True), ("==", "2.0", "2", True), ("==", "0x10p0", 16, True), ("==", "1_000", 1000, True),
    ("==", " 1", 1, False), ("==", "1e400", "1e400", True),  # out of range: no number, equal as strings
    ("==", "NaN", "NaN", False), ("!=", "NaN", "NaN", True), ("==", True, 1, False), ("==", [1], [1.0], True),
    ("==", [True], [1], False), ("==", {"a": 1}, {"a": 1.0}, True), ("==", None, None, True),
    ("<", "10", "9", True), ("<", 10, "9", False), ("<", True, "u", True), ("<", None, 1, False),
    (">=", [1], "[0]", True),
])
def test_gval_compare(op: str, a: Any, b: Any, expected: bool) -> None:
    assert gval_compare(op, a, b) is expected


@pytest.mark.parametrize(("text", "number"), [
    ("2", 2.0), ("-1.5e3", -1500.0), (".5", 0.5), ("5.", 5.0), ("1_000", 1000.0), ("0x1.8p1", 3.0),
    ("Inf", math.inf), ("-infinity", -math.inf), ("1__0", None), ("_1", None), ("0x10", None), ("+nan", None),
    ("1e400", None), ("", None), ("1 ", None), ("abc", None), ("infin", None),
])
def test_go_number(text: str, number: float | None) -> None:
    assert go_number(text) == number


def _deployment(ports: list[int]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "ports": [
                {"containerPort": p} for p in ports]}]}}}}


@pytest.mark.parametrize("select", [
    "$.spec..ports[? @.containerPort < 1024]",  # the select
    "$.spec.containers..ports[?@.containerPort >= 80]",  # the form KubeMod's own tests use
    "$..ports[? @.containerPort < 1024 && @.protocol != 'UDP']",
    "isNotEmpty($.spec..ports[? @.containerPort < 1024])",  # needs one value, not a count
])
def test_descent_with_a_filter_fits_the_budget_for_any_request(select: str) -> None:
    program = cel.compile_program(render_criterion({"select": select}, "m"))
    assert program.bound.cost <= cost.BUDGET
    assert program.bound.items is None  # no request is too large for it


def test_descent_with_a_filter_decides_as_kubemod() -> None:
    assert holds("$.spec..ports[? @.containerPort < 1024]", _deployment([8080, 80])) is True
    assert holds("$.spec..ports[? @.containerPort < 1024]", _deployment([8080, 9090])) is False
    assert holds("$.spec..ports[? @.containerPort < 1024]", _deployment([8080]), negate=True) is True


def test_a_hostile_object_meets_the_iteration_limit_not_the_deadline() -> None:
    # Far more values than any loop may visit: the evaluation stops early with an error.
    program = cel.compile_program(render_criterion({"select": "$.spec..ports[? @.containerPort < 1024]"}, "m"))
    hostile = {"spec": {f"k{i}": [{"x": [j]} for j in range(20)] for i in range(2000)}}
    started = time.monotonic()
    with pytest.raises(CelEvalError, match="Iteration budget exceeded"):
        program.evaluate({"object": hostile})
    assert time.monotonic() - started < 1.0
