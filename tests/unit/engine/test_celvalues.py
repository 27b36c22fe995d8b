"""celvalues.ordered_json, the one-pass check and ordering of CEL results, against the two passes
it stands for (plain_json, else check_json; then ordered)."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from kinitiras_py.engine.evaluation import celvalues

_KEYS = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans(), st.floats(allow_nan=False))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                     st.floats(), st.text(max_size=6), st.binary(max_size=2))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4),
    st.dictionaries(st.text(max_size=4), inner, max_size=4)), max_leaves=12)


def _two_passes(value: Any) -> Any:
    if not celvalues.plain_json(value):
        celvalues.check_json(value)
    return celvalues.ordered(value)


def _outcome(run: Any, value: Any) -> tuple[str, str]:
    try:
        result = run(value)
    except celvalues.NotJSON as e:
        return "refused", str(e)
    return "kept", repr(result)  # repr tells 1 from 1.0 and True, and shows the order of keys


@given(_VALUES)
@example({"b": 1, "a": {"d": [float("nan")], "c": None}})
@example([{"z": 1, "y": "{"}, "{null}"])
@example({1: "x"})
@example(2**65)
@example(float("nan"))
@example(b"x")
def test_ordered_json_gives_what_the_two_passes_give(value: Any) -> None:
    assert _outcome(celvalues.ordered_json, value) == _outcome(_two_passes, value)


def test_ordered_json_orders_nested_maps() -> None:
    result = celvalues.ordered_json([{"op": "add", "value": {"b": 1, "a": 2}, "path": "/x"}])
    assert repr(result) == "[{'op': 'add', 'path': '/x', 'value': {'a': 2, 'b': 1}}]"
