"""What a CEL program reads of its variables, and that the parts read give the same results."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from kinitiras_py.engine.evaluation import cel, celreads

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "team", "labels": {"app": "web", "a/b": "x"}, "annotations": {}},
    "spec": {"containers": [{"name": "app", "image": "r/app:1", "resources": {"limits": {"cpu": "2"}}},
                            {"name": "side", "image": "r/side:1"}],
             "tolerations": [], "priority": 3},
    "status": {"phase": "Pending"},
}


def reads(source: str) -> celreads.Reads | None:
    return cel.compile_program(source).reads


@pytest.mark.parametrize(("source", "expected"), [
    ("true", ()),
    ("object.metadata.name", (("object", (("metadata", "name"),)),)),
    ("object.?metadata.?labels.orValue({})", (("object", (("metadata", "labels"),)),)),
    ('object["spec"][?"containers"].orValue([])', (("object", (("spec", "containers"),)),)),
    ("has(object.status.phase)", (("object", (("status", "phase"),)),)),
    ("object.spec.containers[0].name", (("object", (("spec", "containers"),)),)),
    ("object.spec.containers.all(c, c.name != '')", (("object", (("spec", "containers"),)),)),
    ("object.metadata.name + object.metadata.namespace",
     (("object", (("metadata", "name"), ("metadata", "namespace"))),)),
    ("object.metadata.name == '' || object.metadata == {}", (("object", (("metadata",),)),)),
    ("size(object) > 0", (("object", ((),)),)),
    ("object.metadata.labels[object.kind] == ''", (("object", (("kind",), ("metadata", "labels"))),)),
    ("oldObject == null || oldObject.spec == object.spec",  # `oldObject == null` compares it whole
     (("object", (("spec",),)), ("oldObject", ((),)))),
    ("request.operation == 'CREATE' && params.x == 1", (("params", (("x",),)), ("request", (("operation",),)))),
    # A loop or binding variable named like a request variable is not that variable.
    ("[1].map(object, object) == [1]", ()),
    ("cel.bind(object, {'a': 1}, object.a) == 1", ()),
    ("[object.kind].map(x, x + object.apiVersion)", (("object", (("apiVersion",), ("kind",))),)),
])
def test_reads(source: str, expected: celreads.Reads) -> None:
    assert reads(source) == expected


def test_a_path_below_another_is_covered_by_it() -> None:
    assert reads("object.spec.priority > 1 && size(object.spec) > 1") == (("object", (("spec",),)),)


@pytest.mark.parametrize("source", [
    "object.metadata.labels.map(k, k + '=' + object.metadata.labels[k])",
    "object.metadata.?missing.orValue('none')",
    "has(object.spec.nothing) ? 1 : 2",
    "object.spec.containers.map(c, c.?resources.?limits.?cpu.orValue('-'))",
    "object.status",
    "object.spec.priority.missing",
    "object.kind.size()",
    "object.metadata.labels['a/b']",
    "object",
    "[object.spec.tolerations, object.metadata.annotations]",
    "object.spec.containers[1].?resources.hasValue()",
])
def test_the_parts_read_give_the_same_result_as_the_whole(source: str) -> None:
    program = cel.compile_program(source)
    whole = program._expression.eval(data={"object": POD})
    try:
        expected: Any = cel._result(whole)
    except cel.CelEvalError as e:
        expected = str(e)
    try:
        got: Any = program.evaluate({"object": POD})
    except cel.CelEvalError as e:
        got = str(e)
    assert got == expected
    try:
        shared: Any = program.evaluate(cel.Bindings({"object": POD}))
    except cel.CelEvalError as e:
        shared = str(e)
    assert shared == expected


def test_project_keeps_only_the_paths_in_the_value_order() -> None:
    part, taken = celreads.project(POD, (("metadata", "labels"), ("metadata", "uid"), ("spec", "containers"),
                                         ("spec", "priority", "x")))
    assert part == {"metadata": {"labels": POD["metadata"]["labels"]},
                    "spec": {"containers": POD["spec"]["containers"], "priority": 3}}
    assert list(part["spec"]) == ["containers", "priority"]
    assert part["spec"]["containers"] is POD["spec"]["containers"]  # shared, not copied
    # Cut at the first value that is not a map, and at missing keys.
    assert sorted(taken) == [("metadata", "labels"), ("metadata", "uid"), ("spec", "containers"),
                             ("spec", "priority")]


def test_project_of_everything_or_of_no_map_is_the_value() -> None:
    assert celreads.project(POD, ((),)) == (POD, ((),))
    assert celreads.project([1], (("a",),)) == ([1], ((),))


@pytest.mark.parametrize(("changed", "touched"), [
    ([("metadata", "labels", "x")], True),  # below a path taken
    ([("metadata",)], True),  # above one
    ([()], True),  # the whole value
    ([("metadata", "uid")], True),  # a key that was missing
    ([("metadata", "annotations", "x")], False),
    ([("spec", "tolerations"), ("status",)], False),
    ([("spec", "priority", "x")], True),  # inside a value taken whole
])
def test_touches(changed: list[tuple[str, ...]], touched: bool) -> None:
    _, taken = celreads.project(POD, (("metadata", "labels"), ("metadata", "uid"), ("spec", "priority")))
    assert celreads.touches(taken, changed) is touched


def test_bindings_keep_what_a_change_did_not_touch() -> None:
    labels = cel.compile_program("object.metadata.labels.app")
    spec = cel.compile_program("object.spec.priority")
    bound = cel.Bindings({"object": POD})
    assert (labels.evaluate(bound), spec.evaluate(bound)) == ("web", 3)
    changed = copy.deepcopy(POD)
    changed["metadata"]["labels"]["app"] = "db"
    later = bound.changed("object", changed, [("metadata", "labels", "app")])
    assert later.activation(spec.reads) is bound.activation(spec.reads)
    assert later.activation(labels.reads) is not bound.activation(labels.reads)
    assert (labels.evaluate(later), spec.evaluate(later)) == ("db", 3)


def test_a_changed_variable_is_measured_again_only_when_its_bound_may_not_hold() -> None:
    bound = cel.Bindings({"object": POD})
    size = bound.largest(("object",))
    grown = copy.deepcopy(POD)
    grown["metadata"]["labels"] = {"new": "x" * 100}  # a parent created on the way too
    grown["spec"]["priority"] = 4
    later = bound.changed("object", grown, [("metadata", "labels", "new"), ("spec", "priority")])
    exact = len(orjson.dumps(grown))
    estimate = later.largest(("object",), within=10**6)
    assert size < exact <= estimate  # an upper bound, without measuring
    assert later.largest(("object",), within=exact - 1) == exact  # measured once it matters
    assert later.largest(("object",), within=10**6) == exact  # and exact from then on


def test_an_upper_bound_is_measured_when_it_exceeds_a_later_bound() -> None:
    bound = cel.Bindings({"object": POD})
    bound.largest(("object",))
    grown = copy.deepcopy(POD)
    grown["spec"]["priority"] = 4
    later = bound.changed("object", grown, [("spec", "priority")])
    estimate = later.largest(("object",), within=10**6)
    exact = len(orjson.dumps(grown))
    assert estimate > exact
    assert later.largest(("object",), within=exact) == exact
