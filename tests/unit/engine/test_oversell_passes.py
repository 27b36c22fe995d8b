"""resourcesOversell chooses and describes the containers in one pass (``map(i, chosen, entry)``)
when adding or replacing: the same operations and errors as two passes (``filter`` then ``map``),
and the cost estimate admits Pods of the same sizes as before it did."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation.cel import compile_program
from tests.compiling import render_override

FACTORS = {"cpuFactor": "0.5", "memoryFactor": "0.25", "diskFactor": "0.1"}
NAMES = [None, ["app"], ["a", "b", "c", "d"]]
TWO_PASSES = "range(size(items))\n      .filter(i, {chosen})\n      .map(i, cel.bind(resources"
ONE_PASS = "range(size(items))\n      .map(i, {chosen},\n        cel.bind(resources"


def _template(operation: str, factors: tuple[str, ...], names: list[str] | None) -> dict[str, Any]:
    return {"type": "resourcesOversell", "operation": operation, "resourcesOversell": {k: FACTORS[k] for k in factors},
            **({"containerNames": names} if names else {})}


def _admitted(operation: str, factors: tuple[str, ...]) -> int:
    """The longest container lists the estimate admitted before the one pass (main at 340f1f4)."""
    if operation == "remove":
        return 512 if factors in (("cpuFactor",), ("memoryFactor",)) else 256
    return 256 if len(factors) == 3 else 512


@pytest.mark.parametrize("operation", ["add", "replace", "remove"])
@pytest.mark.parametrize("names", NAMES, ids=["all", "one", "four"])
def test_the_estimate_admits_the_sizes_it_did(operation: str, names: list[str] | None) -> None:
    for n in (1, 2, 3):
        for factors in itertools.combinations(FACTORS, n):
            bound = compile_program(render_override(_template(operation, factors, names), "t")).bound
            assert (bound.items, factors) == (_admitted(operation, factors), factors)


def _both(names: list[str] | None) -> tuple[Any, Any]:
    one = render_override(_template("replace", ("cpuFactor", "memoryFactor"), names), "t")
    chosen = "type(items[i]) == map" + (f' && items[i].?name.orValue("") in {names}'.replace("'", '"')
                                         if names else "")
    assert one.count(ONE_PASS.format(chosen=chosen)) == 2  # containers and init containers
    two = one.replace(ONE_PASS.format(chosen=chosen), TWO_PASSES.format(chosen=chosen))
    return compile_program(one), compile_program(two)


def _outcome(program: Any, pod: dict[str, Any]) -> Any:
    try:
        return program.evaluate({"object": pod}, remember=False)
    except CelEvalError as e:
        return f"error: {e}"


LIMIT = st.one_of(st.none(), st.sampled_from(["2", "1500m", "4Gi", "x", ""]), st.integers(-3, 5), st.booleans(),
                  st.just([1]), st.just({"a": 1}))
RESOURCES = st.one_of(st.none(), st.just("text"), st.fixed_dictionaries(
    {}, optional={"limits": st.one_of(st.none(), st.just(3), st.dictionaries(
        st.sampled_from(["cpu", "memory", "ephemeral-storage"]), LIMIT, max_size=3)),
                  "requests": st.one_of(st.none(), st.just([]), st.dictionaries(
                      st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "750m", "1Gi"]), max_size=2))}))
CONTAINER = st.one_of(st.none(), st.integers(), st.just("c"), st.fixed_dictionaries(
    {}, optional={"name": st.one_of(st.sampled_from(["app", "a", "b", "side"]), st.integers()),
                  "resources": RESOURCES}))
CONTAINERS = st.one_of(st.none(), st.just("x"), st.lists(CONTAINER, max_size=4))


@settings(max_examples=150, deadline=None)
@given(containers=CONTAINERS, init=CONTAINERS, names=st.sampled_from(NAMES))
def test_one_pass_gives_what_two_passes_gave(containers: Any, init: Any, names: list[str] | None) -> None:
    one, two = _both(names)
    spec = {k: v for k, v in (("containers", containers), ("initContainers", init)) if v is not None}
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec}
    assert _outcome(one, pod) == _outcome(two, pod)
