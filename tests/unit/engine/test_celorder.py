"""Maps are iterated and returned in the order of their keys, every time (issue 21)."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.engine.evaluation import cel, celorder

LABELS = {key: f"v-{key}" for key in "jihgfedcbaZ0é"}
"""More keys than cel-cpp's small tables hold: their order changed from one evaluation to the next."""
OBJECT: dict[str, Any] = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "b"}, {"name": "a"}]}}
IN_ORDER = sorted(LABELS)


def outcomes(source: str, times: int = 200) -> set[str]:
    """The distinct results of ``source`` over ``times`` evaluations, none from the result cache
    (no engine's is active)."""
    program = cel.compile_program(source)
    return {repr(program.evaluate({"object": OBJECT})) for _ in range(times)}


@pytest.mark.parametrize(("source", "expected"), [
    ("object.metadata.labels.map(k, k)", IN_ORDER),
    ("object.metadata.labels.filter(k, k != 'c')", [k for k in IN_ORDER if k != "c"]),
    ("object.metadata.labels.map(k, object.metadata.labels[k])", [LABELS[k] for k in IN_ORDER]),
    ("cel.bind(m, object.metadata.labels, m.map(k, k + '=' + m[k]).join(','))",
     ",".join(f"{k}={LABELS[k]}" for k in IN_ORDER)),
    ("object.metadata.labels.map(k, object.metadata.labels.map(j, k + j)[0])", [k + IN_ORDER[0] for k in IN_ORDER]),
    ("[object.metadata.labels].map(m, m.map(k, k))", [IN_ORDER]),
    ("object.metadata.labels", {k: LABELS[k] for k in IN_ORDER}),
    ("{'z': 1, 'y': {'b': 2, 'a': [{'d': 3, 'c': 4}]}, 'x': object.metadata.labels}",
     {"x": {k: LABELS[k] for k in IN_ORDER}, "y": {"a": [{"c": 4, "d": 3}], "b": 2}, "z": 1}),
    ("template.text(object.metadata.labels)", "{" + ",".join(f'"{k}":"{LABELS[k]}"' for k in IN_ORDER) + "}"),
    # Lists keep their own order.
    ("object.spec.containers.map(c, c.name)", ["b", "a"]),
    ("[3, 1, 2].filter(x, x > 0)", [3, 1, 2]),
    ("object.metadata.labels.exists_one(k, k == 'a')", True),
])
def test_maps_run_and_come_out_in_key_order_every_time(source: str, expected: Any) -> None:
    assert outcomes(source) == {repr(expected)}


def test_the_order_of_keys_of_several_kinds() -> None:
    assert celorder.sorted_keys(["b", 2, True, "a", 0, False]) == [False, True, 0, 2, "a", "b"]
    assert outcomes("{2: 'x', 1: 'y'}.map(k, k)", 20) == {"[1, 2]"}


@pytest.mark.parametrize("source", [
    "[1, 2].map(x, x)",  # typed a list: left as it is
    "cel.bind(x, object, x.kind)",  # no loop at all
    "object.metadata.name",
])
def test_programs_without_a_loop_over_a_possible_map_are_left_as_they_are(source: str) -> None:
    assert celorder.ordered(cel.compile_program(source)._expression.serialize()) is None


def test_the_rewritten_program_keeps_what_was_read_and_estimated() -> None:
    program = cel.compile_program("object.metadata.labels.map(k, k)")
    assert program.reads == (("object", ((("metadata", "labels"), "size"), (("metadata", "labels", "*"), "all"))),)
    assert program.result_type == "LIST<DYN>"
