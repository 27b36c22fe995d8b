"""What a CEL program reads of its variables, and that the parts read give the same results."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kinitiras_py.engine.evaluation import cel, celenv, celreads
from kinitiras_py.engine.evaluation.celbindings import Bindings

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


def whole(*paths: tuple[str, ...]) -> tuple[celreads.Read, ...]:
    return tuple((path, "all") for path in paths)


@pytest.mark.parametrize(("source", "expected"), [
    ("true", ()),
    ("object.metadata.name", (("object", whole(("metadata", "name"))),)),
    ("object.?metadata.?labels.orValue({})", (("object", whole(("metadata", "labels"))),)),
    ('object["spec"][?"containers"].orValue([])', (("object", whole(("spec", "containers"))),)),
    ("has(object.status.phase)", (("object", ((("status", "phase"), "kind"),)),)),
    ("object.spec.containers[0].name", (("object", whole(("spec", "containers", "*", "name"))),)),
    ("object.spec.containers.all(c, c.name != '')",
     (("object", ((("spec", "containers"), "size"), (("spec", "containers", "*", "name"), "all"))),)),
    ("object.metadata.name + object.metadata.namespace",
     (("object", whole(("metadata", "name"), ("metadata", "namespace"))),)),
    ("object.metadata.name == '' || object.metadata == {}", (("object", whole(("metadata",))),)),
    ("size(object) > 0", (("object", (((), "size"),)),)),
    ("object.metadata.labels[object.kind] == ''", (("object", whole(("kind",), ("metadata", "labels", "*"))),)),
    ("oldObject == null || oldObject.spec == object.spec",  # `oldObject == null` compares it whole
     (("object", whole(("spec",))), ("oldObject", whole(()))),),
    ("request.operation == 'CREATE' && params.x == 1",
     (("params", whole(("x",))), ("request", whole(("operation",))))),
    # A loop or binding variable named like a request variable is not that variable.
    ("[1].map(object, object) == [1]", ()),
    ("cel.bind(object, {'a': 1}, object.a) == 1", ()),
    ("[object.kind].map(x, x + object.apiVersion)", (("object", whole(("apiVersion",), ("kind",))),)),
    # Through bindings, optionals, dyn() and the branches of a conditional.
    ("cel.bind(m, object.metadata, type(m) == map ? dyn(m[?'labels'].orValue({}).?x.orValue(0)) : 0)",
     (("object", ((("metadata",), "kind"), (("metadata", "labels", "x"), "all"))),)),
    ("object.?spec.optFlatMap(s, s[?'template'].?spec).hasValue()",
     (("object", ((("spec",), "kind"), (("spec", "template", "spec"), "kind"))),)),
    # A map only looked up by constant keys is read whole: programs differing in the keys read alike.
    ("type(object.metadata.labels) == map && object.metadata.labels[?'a'] == optional.of('1')",
     (("object", whole(("metadata", "labels"))),)),
    ("object.?spec.optFlatMap(s, s[?'replicas']).orValue(1) > 2", (("object", whole(("spec",))),)),
    ("size(object.spec.containers) > 1", (("object", ((("spec", "containers"), "size"),)),)),
    ("range(size(object.spec.containers)).map(i, type(object.spec.containers[i]) == map)",
     (("object", ((("spec", "containers"), "size"), (("spec", "containers", "*"), "kind"))),)),
])
def test_reads(source: str, expected: celreads.Reads) -> None:
    assert reads(source) == expected


def test_a_read_inside_a_whole_read_is_covered_by_it() -> None:
    assert reads("object.spec.priority > 1 && object.spec != {}") == (("object", whole(("spec",))),)


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
        shared: Any = program.evaluate(Bindings({"object": POD}))
    except cel.CelEvalError as e:
        shared = str(e)
    assert shared == expected


def test_project_keeps_only_what_is_read_in_the_value_order() -> None:
    part, taken = celreads.project(POD, whole(("metadata", "labels"), ("metadata", "uid"), ("spec", "containers"),
                                              ("spec", "priority", "x")))
    assert part == {"metadata": {"labels": POD["metadata"]["labels"]},
                    "spec": {"containers": POD["spec"]["containers"], "priority": 3}}
    assert list(part["spec"]) == ["containers", "priority"]
    assert part["spec"]["containers"] is POD["spec"]["containers"]  # shared, not copied
    assert (("metadata", "uid"), True) in taken  # a missing key matters once it appears


def test_project_by_kind_size_and_element() -> None:
    found = ((("spec",), "kind"), (("spec", "containers"), "size"), (("spec", "containers", "*"), "kind"),
             (("spec", "containers", "*", "image"), "all"), (("spec", "tolerations"), "kind"),
             (("metadata",), "size"))
    part, taken = celreads.project(POD, found)
    assert part == {"metadata": {"name": None, "namespace": None, "labels": None, "annotations": None},
                    "spec": {"containers": [{"image": "r/app:1"}, {"image": "r/side:1"}], "tolerations": []}}
    assert (("spec", "containers"), False) in taken and (("spec", "containers", "*", "image"), True) in taken


def test_project_of_everything_or_of_no_container_is_the_value() -> None:
    assert celreads.project(POD, whole(())) == (POD, (((), True),))
    assert celreads.project("x", whole(("a",))) == ("x", (((), True),))


@pytest.mark.parametrize(("changed", "touched"), [
    ([("metadata", "labels", "x")], True),  # below a path read whole
    ([("metadata",)], True),  # above one
    ([()], True),  # the whole value
    ([("metadata", "uid")], True),  # a key that was missing
    ([("metadata", "annotations", "x")], False),
    ([("spec", "tolerations"), ("status",)], False),
    ([("spec", "priority", "x")], True),  # inside a value read whole
    ([("spec", "containers")], True),  # an element added or removed
    ([("spec", "containers", "1", "image")], True),  # what every element's image is
    ([("spec", "containers", "1", "env")], False),  # not read
    ([("spec", "containers", "1")], True),  # an element replaced
])
def test_touches(changed: list[tuple[str, ...]], touched: bool) -> None:
    found = (*whole(("metadata", "labels"), ("metadata", "uid"), ("spec", "priority"),
                    ("spec", "containers", "*", "image")), (("spec", "containers"), "size"))
    _, taken = celreads.project(POD, found)
    assert celreads.touches(taken, changed) is touched


def test_a_map_read_through_a_computed_key_depends_on_every_key_even_when_empty() -> None:
    found = reads('object.spec.selector[?("zone-" + object.metadata.name)].orValue("none")')
    assert found is not None
    _, taken = celreads.project({"metadata": {"name": "w1"}, "spec": {"selector": {}}}, dict(found)["object"])
    assert celreads.touches(taken, [("spec", "selector", "zone-w1")])
    assert not celreads.touches(taken, [("metadata", "labels")])


def test_a_conversion_kept_across_a_change_is_never_stale() -> None:
    program = cel.compile_program('object.spec.selector[?("zone-" + object.metadata.name)].orValue("none")')
    before = {"metadata": {"name": "w1"}, "spec": {"selector": {}}}
    bound = Bindings({"object": before})
    assert program.evaluate(bound) == "none"
    after = {"metadata": {"name": "w1"}, "spec": {"selector": {"zone-w1": "eu"}}}
    assert program.evaluate(bound.changed("object", after, [("spec", "selector", "zone-w1")])) == "eu"


def _message(*parts: tuple[int, bytes]) -> bytes:
    """A protobuf message of length-delimited fields (numbers and lengths below 128)."""
    return b"".join(bytes([number << 3 | 2, len(value)]) + value for number, value in parts)


def test_the_walker_fails_closed_on_what_it_does_not_know() -> None:
    serialized = cel.compile_program("object.metadata.name")._expression.serialize()
    assert celreads.reads(serialized, celenv.VARIABLES) is not None
    assert celreads.reads(serialized, ("request",)) is None  # a name neither a variable, bound nor a type
    unknown = _message((2, _message((4, _message((10, b""))))))  # Any{value: CheckedExpr{expr: {field 10}}}
    assert celreads.reads(unknown, celenv.VARIABLES) is None


def _field(number: int, value: bytes) -> bytes:
    """One length-delimited protobuf field."""
    size, length = b"", len(value)
    while length >= 0x80:
        size, length = size + bytes([length & 0x7F | 0x80]), length >> 7
    return bytes([number << 3 | 2]) + size + bytes([length]) + value


def _ident(name: str) -> bytes:
    return _field(4, _field(1, name.encode()))


_KNOWN = _ident("object")
_UNKNOWN = _field(10, b"")  # an Expr whose kind is a field the walker does not know
_SHAPES = {  # a known node kind around a leaf, as cel.expr.Expr bytes
    "select operand": lambda leaf: _field(5, _field(1, leaf) + _field(2, b"spec")),
    "call argument": lambda leaf: _field(6, _field(2, b"_+_") + _field(3, _KNOWN) + _field(3, leaf)),
    "call target": lambda leaf: _field(6, _field(1, leaf) + _field(2, b"size")),
    "index": lambda leaf: _field(6, _field(2, b"_[_]") + _field(3, _KNOWN) + _field(3, leaf)),
    "list element": lambda leaf: _field(7, _field(1, _KNOWN) + _field(1, leaf)),
    "map value": lambda leaf: _field(8, _field(2, _field(3, _field(3, _field(6, b"k"))) + _field(4, leaf))),
    "map key": lambda leaf: _field(8, _field(2, _field(3, leaf) + _field(4, _KNOWN))),
    **{f"loop {part}": lambda leaf, n=n: _field(9, b"".join(_field(k, leaf if k == n else part) for k, part in {
        1: b"x", 2: _KNOWN, 3: b"@r", 4: _KNOWN, 5: _ident("x"), 6: _ident("@r"), 7: _ident("@r")}.items()))
       for n, part in ((2, "range"), (4, "init"), (5, "condition"), (6, "step"), (7, "result"))},
    "bind": lambda leaf: _field(9, _field(1, b"#unused") + _field(2, _field(7, b"")) + _field(3, b"v")
                                + _field(4, leaf) + _field(7, _ident("v"))),
}


@pytest.mark.parametrize("shape", list(_SHAPES))
def test_the_walker_fails_closed_on_a_node_kind_it_does_not_know_anywhere(shape: str) -> None:
    def checked(expr: bytes) -> bytes:  # Any{value: CheckedExpr{expr}}
        return _field(2, _field(4, expr))

    known = celreads.reads(checked(_SHAPES[shape](_KNOWN)), celenv.VARIABLES)
    assert known is not None and [name for name, _ in known] == ["object"]  # read there, precisely
    assert celreads.reads(checked(_SHAPES[shape](_UNKNOWN)), celenv.VARIABLES) is None  # anything


def test_bindings_keep_what_a_change_did_not_touch() -> None:
    labels = cel.compile_program("object.metadata.labels.app")
    spec = cel.compile_program("object.spec.priority")
    bound = Bindings({"object": POD})
    assert (labels.evaluate(bound), spec.evaluate(bound)) == ("web", 3)
    changed = copy.deepcopy(POD)
    changed["metadata"]["labels"]["app"] = "db"
    later = bound.changed("object", changed, [("metadata", "labels", "app")])
    assert later.activation(spec.reads) is bound.activation(spec.reads)
    assert later.activation(labels.reads) is not bound.activation(labels.reads)
    assert (labels.evaluate(later), spec.evaluate(later)) == ("db", 3)


def test_a_changed_variable_is_measured_again_only_when_its_bound_may_not_hold() -> None:
    bound = Bindings({"object": POD})
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


def test_sizes_given_are_upper_bounds_measured_only_when_they_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinitiras_py.engine.evaluation import bounds

    measured: list[tuple[str, ...]] = []
    real = bounds.largest
    monkeypatch.setattr(bounds, "largest", lambda v, names: measured.append(names) or real(v, names))
    exact = len(orjson.dumps(POD))
    given = Bindings({"object": POD}, {"object": (POD, exact + 20)})
    assert given.largest(("object",), within=exact + 20) == exact + 20 and measured == []
    assert given.largest(("object",), within=exact) == exact and measured == [("object",)]
    # A size measured on another value (an object a rule has changed since) is not taken.
    other = Bindings({"object": POD}, {"object": (copy.deepcopy(POD), exact + 20)})
    assert other.largest(("object",), within=exact + 20) == exact and measured[-1] == ("object",)


@given(st.lists(st.text(st.sampled_from(list('az09./~-"\\\x00\x1f\x7fé€😀')) | st.characters(), max_size=8),
                min_size=1, max_size=4))
@example(['say "hi"']).via("a quote is escaped")
@example(['a\\b', 'tab\t', 'é']).via("escapes and UTF-8")
@example(['\ud800']).via("a lone surrogate")
def test_what_a_change_adds_counts_its_keys_as_json_writes_them(path: list[str]) -> None:
    from kinitiras_py.engine.evaluation import bounds, cost

    value: Any = "v"
    for token in reversed(path):
        value = {token: value}
    try:
        keys = sum(len(orjson.dumps(t)) + 4 for t in path)
    except TypeError:  # a lone surrogate has no JSON: no bound at all
        assert bounds.grown(value, tuple(path)) == cost.MAX_REQUEST_BYTES * 1024
        return
    assert bounds.grown(value, tuple(path)) == keys + len(b'"v"')


def test_an_upper_bound_is_measured_when_it_exceeds_a_later_bound() -> None:
    bound = Bindings({"object": POD})
    bound.largest(("object",))
    grown = copy.deepcopy(POD)
    grown["spec"]["priority"] = 4
    later = bound.changed("object", grown, [("spec", "priority")])
    estimate = later.largest(("object",), within=10**6)
    exact = len(orjson.dumps(grown))
    assert estimate > exact
    assert later.largest(("object",), within=exact) == exact


# -- every template's rendered CEL gives the same result on the parts it reads as on the whole ----

def _objects() -> list[dict[str, Any]]:
    from kinitiras_py.bench import workload

    pod = workload.server_pod()
    odd = copy.deepcopy(pod)
    odd["spec"]["containers"][0]["resources"] = "not a map"
    odd["spec"]["containers"][1]["resources"] = {"limits": {"cpu": None, "memory": "1Gi"}}
    odd["spec"]["containers"][2] = ["not", "a", "container"]
    del odd["spec"]["containers"][3]["resources"]["requests"]
    odd["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {"cpu": "1"}, "requests": {}}}]
    odd["metadata"]["labels"] = None
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "annotations": {"a": "b"}},
                  "spec": {"replicas": 2, "template": {"metadata": {}, "spec": copy.deepcopy(pod["spec"])}}}
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
               "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
                   {"name": "a", "resources": {"limits": {"memory": "2Gi", "ephemeral-storage": "10Gi"}}}]}}}}}}
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": [], "spec": {"template": "x"}}
    return [pod, odd, deployment, cronjob, broken, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]


def _templates() -> list[dict[str, Any]]:
    from tests.unit.engine.test_render import EVERY_TEMPLATE

    named = {"containerNames": ["app", "init"]}
    return [{**t, **extra, "operation": operation} for t in EVERY_TEMPLATE for operation in ("add", "replace", "remove")
            for extra in ({}, named) if not (extra and t["type"] not in ("resources", "resourcesOversell"))]


def _outcome(run: Any) -> Any:
    try:
        return run()
    except cel.CelEvalError as e:
        return f"error: {e}"


@pytest.mark.parametrize("template", _templates(), ids=lambda t: f"{t['type']}-{t['operation']}-{len(t)}")
def test_templates_read_the_same_from_their_parts(template: dict[str, Any]) -> None:
    from tests.compiling import render_override

    program = cel.compile_program(render_override(template, "spec.overrideRules[0].overriders.template"))
    assert program.reads is not None
    for obj in _objects():
        variables = {"object": obj, "oldObject": None, "request": {"operation": "CREATE"}, "namespaceObject": None,
                     "params": {"owner": "team-a"}}
        whole = _outcome(lambda v=variables: cel._result(program._expression.eval(data=celenv.prepare(v))))
        assert _outcome(lambda v=variables: program.evaluate(v)) == whole
        assert _outcome(lambda v=variables: program.evaluate(Bindings(v))) == whole


@pytest.mark.parametrize("source", ["oldObject == null", "oldObject.?spec.hasValue() || true", "has(object.kind)"])
def test_a_variable_read_but_not_supplied_is_null(source: str) -> None:
    program = cel.compile_program(source)
    assert program.evaluate({"object": {"kind": "Pod"}}) is True
    assert program.evaluate(Bindings({"object": {"kind": "Pod"}})) is True
