"""CEL results remembered by the parts of the variables a program reads."""

from __future__ import annotations

import contextvars
import copy
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.evaluation.celbindings import Bindings

LABELS = "object.metadata.labels.map(k, k + '=' + object.metadata.labels[k])"


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "labels": labels}}


RESULTS = celmemo.Results()
"""The cache each test evaluates with (made afresh and active for each test)."""


@pytest.fixture(autouse=True)
def active() -> Iterator[None]:
    RESULTS.configure(celmemo.DEFAULT_BYTES)
    with celmemo.using(RESULTS):
        yield


def test_nothing_is_remembered_outside_an_active_cache() -> None:
    program = compile_program(LABELS)
    with celmemo.using(celmemo.Results()):
        pass  # entered and left: the test's cache is active again
    assert celmemo.key({"object": {}}) is not None
    before = (RESULTS.hits, RESULTS.misses, len(RESULTS))

    def outside() -> None:
        assert celmemo.key({"object": {}}) is None
        for _ in range(2):
            assert program.evaluate({"object": pod("a", app="web")}) == ["app=web"]

    contextvars.Context().run(outside)  # a context where no engine made a cache active
    assert (RESULTS.hits, RESULTS.misses, len(RESULTS)) == before


def test_a_second_object_with_the_same_parts_is_looked_up_and_gets_its_own_copy() -> None:
    program = compile_program(LABELS)
    first = program.evaluate({"object": pod("a", app="web")})
    hits = RESULTS.hits
    second = program.evaluate(Bindings({"object": pod("b", app="web")}))  # the name is not read
    assert RESULTS.hits == hits + 1
    assert second == first == ["app=web"]
    assert second is not first
    second.append("changed by a caller")
    assert program.evaluate({"object": pod("c", app="web")}) == ["app=web"]


def test_the_counters_of_an_engine_are_exported_as_metrics() -> None:
    from kinitiras_py.admission.engine import Engine
    from kinitiras_py.webhook.handlers import Handlers
    from kinitiras_py.webhook.metrics import Metrics

    engine = Engine()
    metrics = Handlers(engine, Metrics()).metrics
    program = compile_program(LABELS)
    with celmemo.using(engine.cel_results):
        for name in ("a", "b", "c"):
            program.evaluate({"object": pod(name, app="web")})
    text = metrics.render().decode()
    assert "kinitiras_cel_results_looked_up_total 2.0" in text
    assert "kinitiras_cel_results_evaluated_total 1.0" in text
    size = engine.cel_results.size
    assert f"kinitiras_cel_results_bytes {float(size)}" in text and size > 0


def test_different_parts_are_evaluated() -> None:
    program = compile_program(LABELS)
    assert program.evaluate({"object": pod("a", app="web")}) == ["app=web"]
    assert program.evaluate({"object": pod("a", app="db")}) == ["app=db"]
    assert RESULTS.hits == 0


KIND = ("object.x == null ? 'null' : type(object.x) == list ? 'list' : string(object.x) + ':' + "
        "(type(object.x) == int ? 'int' : type(object.x) == double ? 'double' : type(object.x) == bool ? 'bool' : "
        "'string')")


@pytest.mark.parametrize(("a", "b"), [(1, 1.0), (1, True), (1, "1"), (None, []), (0.0, -0.0)])
def test_values_cel_tells_apart_are_kept_apart(a: Any, b: Any) -> None:
    program = compile_program(KIND)
    looked_up = [program.evaluate({"object": {"x": value}}) for value in (a, b, a, b)]
    RESULTS.configure(0)
    evaluated = [program.evaluate({"object": {"x": value}}) for value in (a, b)]
    assert looked_up == evaluated * 2
    assert evaluated[0] != evaluated[1]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_json_cannot_write_is_never_mistaken_for_null(value: float) -> None:
    program = compile_program("object.x == null ? 'null' : 'number'")
    assert celmemo.key({"object": {"x": value}}) is None
    assert program.evaluate({"object": {"x": None}}) == "null"
    assert program.evaluate({"object": {"x": value}}) == "number"
    results = celmemo.Results()
    results.put("p", b"{}", [value])
    assert len(results) == 0


def test_failures_are_not_kept() -> None:
    program = compile_program("object.missing.field == 1")
    for _ in range(2):
        with pytest.raises(CelEvalError):
            program.evaluate({"object": {"kind": "Pod"}})
    assert len(RESULTS) == 0


def test_switched_off_nothing_is_kept() -> None:
    RESULTS.configure(0)
    program = compile_program(LABELS)
    for _ in range(2):
        assert program.evaluate(Bindings({"object": pod("a", app="web")})) == ["app=web"]
    assert (len(RESULTS), RESULTS.hits) == (0, 0)


def test_the_cache_stays_within_its_bytes_and_the_oldest_leave_first() -> None:
    results = celmemo.Results(max_bytes=2_000)
    for n in range(100):
        results.put("program", f'{{"n":{n}}}'.encode(), {"result": "x" * 50})
        assert results.size <= 2_000
    assert 0 < len(results) < 100
    assert results.get("program", b'{"n":99}') == {"result": "x" * 50}
    assert results.get("program", b'{"n":0}') is celmemo.MISSING
    results.put("program", b'{"big":1}', "y" * (celmemo.MAX_ENTRY_BYTES + 1))
    assert results.get("program", b'{"big":1}') is celmemo.MISSING


# -- whatever the objects, a looked-up result is the one evaluation gives -------------------------

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, -0.0]),
                     st.sampled_from(["", "a", "1", "500m", "1Gi"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["cpu", "memory", "a"]), inner, max_size=3), max_leaves=6)
_CONTAINER = st.fixed_dictionaries({"name": st.sampled_from(["app", "side"])},
                                   optional={"resources": st.fixed_dictionaries(
                                       {}, optional={"limits": _VALUES, "requests": _VALUES})})
_OBJECTS = st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.just("Pod"),
                                  "metadata": st.fixed_dictionaries({"labels": st.dictionaries(
                                      st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2)}),
                                  "spec": st.fixed_dictionaries({"containers": st.lists(_CONTAINER, max_size=3)})})


def _templates() -> list[str]:
    from tests.compiling import render_override
    from tests.unit.engine.test_render import EVERY_TEMPLATE

    where = "spec.overrideRules[0].overriders.template"
    return [render_override({**t, "operation": operation}, where) for t in EVERY_TEMPLATE if "valueRef" not in t
            for operation in ("add", "replace", "remove")]


def _outcome(program: Any, variables: Any) -> Any:
    try:
        return program.evaluate(variables)
    except CelEvalError as e:
        return f"error: {e}"


@settings(max_examples=60, deadline=None)
@given(st.lists(_OBJECTS, min_size=2, max_size=6))
def test_looked_up_results_equal_evaluated_ones(objects: list[dict[str, Any]]) -> None:
    programs = [compile_program(source) for source in _templates()]
    RESULTS.configure(0)
    expected = [[_outcome(p, {"object": o}) for p in programs] for o in objects]
    RESULTS.configure(celmemo.DEFAULT_BYTES)
    for _ in range(2):  # the second pass looks every result up
        assert [[_outcome(p, Bindings({"object": copy.deepcopy(o)})) for p in programs] for o in objects] == expected
