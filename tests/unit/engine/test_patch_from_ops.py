"""The response patch is built from the operations the rules applied (engine.objects.patchlog).

Properties over random JSON objects x random rule sets (ops drawn against the object as the
earlier ops left it: adds, removes and replaces in objects and arrays, by index and ``-``,
moves, copies, tests, whole-document replaces, lenient adds creating parents, origin entries,
and ops that fail midway through a rule):

* the final object is what applying the rules one by one to copies gives (a failing rule is
  dropped whole), and the received object is never modified;
* jsonpatch (strict RFC 6902, as the API server) applies the patch to the received object and
  reaches exactly the final object, types included (``1``, ``1.0`` and ``true`` differ);
* no op is undone by a later one: only add/remove/replace, on pairwise unrelated paths (none
  equal to or inside another), each changing the document;
* the patch is empty exactly when nothing changed, and it is deterministic.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinitiras_py.base import nesting
from kinitiras_py.base.errors import PatchError, RuleError
from kinitiras_py.base.ids import PolicyId, RuleId
from kinitiras_py.engine.kinds.cel import CelOverrider
from kinitiras_py.engine.kinds.origin import OriginOverrider
from kinitiras_py.engine.kinds.plaintext import PlaintextOverrider
from kinitiras_py.engine.kinds.template import TemplateOverrider
from kinitiras_py.engine.objects import patching
from kinitiras_py.engine.objects.patchlog import Draft, PatchLog
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, CompiledPolicy
from kinitiras_py.engine.policies.results import Mutation
from kinitiras_py.engine.rules import origin
from kinitiras_py.engine.running import overriding

Obj = dict[str, Any]
ORACLE = PolicyId("OverridePolicy", None, "oracle")
KEYS = st.sampled_from(["a", "b", "c", "a/b", "~", ""])
SCALARS = st.sampled_from([0, 1, 1.0, -0.0, True, False, None, "", "x", "1"])
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=3),
                      max_leaves=10)
DOCS = st.dictionaries(KEYS, VALUES, max_size=5)
PROPERTIES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(PROPERTIES, max_examples=100)


def unaliased(value: Any) -> Any:
    """As decoded from the wire: strategies share sub-objects, real documents never do."""
    return orjson.loads(orjson.dumps(value))


def canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def tokens_of(path: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


# -- random rules ---------------------------------------------------------------------------

Location = tuple[tuple[str, ...], Any]


def locations(doc: Any, where: tuple[str, ...] = ()) -> list[Location]:
    """Every value in ``doc`` with the reference tokens leading to it, the root first."""
    found: list[Location] = [(where, doc)]
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found += locations(value, (*where, str(key)))
    return found


def draw_target(data: st.DataObject, doc: Any) -> tuple[str, ...]:
    """Where an add may go: a key of an object (new, existing, or under new parents), an array slot."""
    containers = [(t, v) for t, v in locations(doc) if isinstance(v, dict | list)]
    where, container = data.draw(st.sampled_from(containers))
    if isinstance(container, list):
        return (*where, data.draw(st.sampled_from([*map(str, range(len(container) + 1)), "-"])))
    key = data.draw(KEYS)
    if key not in container and data.draw(st.booleans()):
        return (*where, key, data.draw(KEYS))  # the lenient add creates the missing parent
    return (*where, key)


def draw_op(data: st.DataObject, doc: Any) -> Obj:
    """One op against ``doc``, most of them applicable."""
    inside = [t for t, _ in locations(doc)[1:]]
    kind = data.draw(st.sampled_from(["add", "add", "remove", "replace", "replace", "move", "copy", "test",
                                      "fail", "root"]))
    if kind in ("remove", "replace", "move", "copy", "test") and not inside:
        kind = "add"
    if kind == "add":
        return {"op": "add", "path": patching.pointer(*draw_target(data, doc)), "value": data.draw(VALUES)}
    if kind == "root":
        return {"op": data.draw(st.sampled_from(["add", "replace"])), "path": "", "value": data.draw(DOCS)}
    if kind == "fail":
        scalars = [t for t, v in locations(doc) if not isinstance(v, dict | list)]
        path = patching.pointer(*data.draw(st.sampled_from(scalars)), "x") if scalars else "/nope/x"
        return {"op": data.draw(st.sampled_from(["add", "replace"])), "path": path, "value": 1}
    source = data.draw(st.sampled_from(inside))
    if kind == "remove":
        # Sometimes a missing one: a lenient no-op.
        path = (*source[:-1], "zz") if data.draw(st.integers(0, 4)) == 0 else source
        return {"op": "remove", "path": patching.pointer(*path)}
    if kind == "replace":
        return {"op": "replace", "path": patching.pointer(*source), "value": data.draw(VALUES)}
    if kind == "test":
        current = dict(locations(doc))[source]
        return {"op": "test", "path": patching.pointer(*source),
                "value": current if data.draw(st.booleans()) else data.draw(VALUES)}
    return {"op": kind, "from": patching.pointer(*source), "path": patching.pointer(*draw_target(data, doc))}


class Ops:
    """Stands in for a compiled CEL program: it returns the ops the program would."""

    def __init__(self, ops: list[Obj]) -> None:
        self.ops = ops

    def evaluate(self, _inputs: Any) -> Any:
        return unaliased(self.ops)


@dataclass
class Rule:
    rendered: list[Obj] = field(default_factory=list)
    cel: list[Obj] = field(default_factory=list)
    plaintext: list[Obj] = field(default_factory=list)
    origin: list[Obj] = field(default_factory=list)
    failure_policy: str = "Ignore"

    def compiled(self, index: int) -> CompiledOverrideRule:
        parts = (TemplateOverrider(Ops(self.rendered)) if self.rendered else None,  # type: ignore[arg-type]
                 CelOverrider(Ops(self.cel)) if self.cel else None,  # type: ignore[arg-type]
                 PlaintextOverrider(self.plaintext) if self.plaintext else None,
                 OriginOverrider(self.origin) if self.origin else None)
        return CompiledOverrideRule(index=index, operations=None, failure_policy=self.failure_policy,
                                    overriders=tuple(part for part in parts if part is not None))

    def apply_to(self, doc: Any, index: int) -> Any:
        """The rule applied plainly, in place, as the oracle: no drafts, no log."""
        for ops in (self.rendered, self.cel, self.plaintext):
            doc = patching.apply_ops_in_place(doc, unaliased(ops))
        return origin.apply_origin(doc, self.origin, RuleId(ORACLE, index)) if self.origin else doc


LABELS = st.dictionaries(st.sampled_from(["app", "tier", "a/b"]), st.sampled_from(["x", "y"]), max_size=2)


def draw_rule(data: st.DataObject, doc: Any) -> Rule:
    ops: list[Obj] = []
    state = unaliased(doc)
    for _ in range(data.draw(st.integers(1, 5))):
        op = draw_op(data, state)
        ops.append(op)
        try:
            state = patching.apply_ops_in_place(state, [op])
        except PatchError:
            break  # the rule fails here: later ops would never run
    cut1, cut2 = sorted(data.draw(st.integers(0, len(ops))) for _ in range(2))
    entries = []
    if data.draw(st.integers(0, 3)) == 0:
        operation = data.draw(st.sampled_from(["add", "replace", "remove"]))
        entries.append({"type": "labels", "operation": operation, "labels": data.draw(LABELS),
                        "replace": data.draw(st.booleans())})
    return Rule(ops[:cut1], ops[cut1:cut2], ops[cut2:], entries)


def policy_of(rules: list[Rule]) -> CompiledPolicy:
    return CompiledPolicy(kind="ClusterOverridePolicy", name="random", namespace=None, uid="u", generation=1,
                          selectors=[], rules=tuple(rule.compiled(i) for i, rule in enumerate(rules)))


def draw_rules(data: st.DataObject, doc: Any) -> tuple[list[Rule], Any]:
    """Rules drawn one after the other, and the oracle's final object."""
    rules: list[Rule] = []
    state = unaliased(doc)
    for index in range(data.draw(st.integers(1, 5))):
        rule = draw_rule(data, state)
        rules.append(rule)
        with contextlib.suppress(PatchError, RuleError):  # failurePolicy Ignore: the rule is skipped whole
            state = rule.apply_to(unaliased(state), index)
    return rules, state


def mutate(rules: list[Rule], doc: Any) -> Mutation:
    policy = policy_of(rules)
    return overriding.mutate([(policy, rule) for rule in policy.rules], doc, {})


def check_patch(original: Any, mutation: Mutation) -> None:
    """Strict replay reaches the final object, and no op is undone, overwritten or idle."""
    patch = mutation.patch
    replayed = jsonpatch.apply_patch(unaliased(original), unaliased(patch))
    assert canon(replayed) == canon(mutation.object)
    assert {op["op"] for op in patch} <= {"add", "remove", "replace"}
    paths = [tokens_of(op["path"]) for op in patch]
    for i, a in enumerate(paths):
        for b in paths[i + 1:]:
            shorter = min(len(a), len(b))
            assert a[:shorter] != b[:shorter], f"{a} and {b} overlap in {patch}"
    doc = unaliased(original)
    for op in patch:
        before = canon(doc)
        doc = jsonpatch.apply_patch(doc, [op])
        assert canon(doc) != before, f"{op} changes nothing"
    assert (patch == []) == (canon(original) == canon(mutation.object))


# -- properties -----------------------------------------------------------------------------


@PROPERTIES
@given(DOCS, st.data())
def test_the_patch_replays_strictly_to_the_final_object(obj: Obj, data: st.DataObject) -> None:
    obj = unaliased(obj)
    received = unaliased(obj)
    rules, expected = draw_rules(data, obj)
    mutation = mutate(rules, obj)
    assert mutation.failure is None
    assert canon(obj) == canon(received), "the received object must not change"
    assert canon(mutation.object) == canon(expected)
    check_patch(received, mutation)
    again = mutate(rules, unaliased(received))
    assert again.patch == mutation.patch, "the patch must be deterministic"


@FEWER
@given(DOCS, st.data())
def test_reinvocation_patches_only_what_still_changes(obj: Obj, data: st.DataObject) -> None:
    # On our own output, rules that set values find them set: nothing is left to patch.
    rules, _ = draw_rules(data, unaliased(obj))
    first = mutate(rules, unaliased(obj))
    output = unaliased(first.object)
    second = mutate(rules, output)
    check_patch(unaliased(first.object), second)


# Sets and removals that cannot fail (parents are objects or missing), so that whether a rule
# holds does not depend on what earlier rules did: such rules are idempotent as a whole.
SETS = st.one_of(
    st.tuples(st.sampled_from(["/metadata/labels/app", "/metadata/labels/a~1b", "/metadata/annotations/n",
                               "/spec/replicas", "/metadata/name"]), VALUES),
    st.tuples(st.sampled_from(["/metadata/annotations", "/spec"]), st.dictionaries(KEYS, VALUES, max_size=3)),
)


@FEWER
@given(st.fixed_dictionaries({"metadata": st.dictionaries(st.sampled_from(["labels", "name"]), LABELS)},
                             optional={"spec": DOCS}),
       st.lists(st.lists(st.tuples(st.booleans(), SETS), min_size=1, max_size=4), min_size=1, max_size=4))
def test_setting_rules_reinvoked_on_their_output_patch_nothing(obj: Obj, rule_ops: list[list[Any]]) -> None:
    rules = [Rule(plaintext=[{"op": "remove", "path": path} if remove else {"op": "add", "path": path, "value": value}
                             for remove, (path, value) in ops]) for ops in rule_ops]
    first = mutate(rules, unaliased(obj))
    check_patch(unaliased(obj), first)
    second = mutate(rules, unaliased(first.object))
    assert second.patch == []
    assert canon(second.object) == canon(first.object)


@FEWER
@given(DOCS, st.data())
def test_a_failing_rule_with_failure_policy_fail_leaves_no_patch(obj: Obj, data: st.DataObject) -> None:
    obj = unaliased(obj)
    rules, _ = draw_rules(data, obj)
    rules.insert(data.draw(st.integers(0, len(rules))),
                 Rule(plaintext=[{"op": "add", "path": "/new", "value": 1}, {"op": "test", "path": "/new", "value": 2}],
                      failure_policy="Fail"))
    mutation = mutate(rules, obj)
    assert mutation.failure is not None
    assert mutation.object is obj and mutation.patch == []


# -- the drafts and the log, directly ---------------------------------------------------------


@FEWER
@given(DOCS, DOCS)
def test_replacing_the_root_patches_key_by_key(a: Obj, b: Obj) -> None:
    # A whole-document replace notes the root: the patch is then the difference, never a
    # replace of the whole object (which the API server may refuse).
    a, b = unaliased(a), unaliased(b)
    draft = Draft(a)
    draft.apply([{"op": "replace", "path": "", "value": b}])
    log = PatchLog()
    log.record(draft)
    patch = log.patch(a, draft.doc)
    assert all(op["path"] != "" for op in patch)
    check_patch(a, Mutation(object=draft.doc, patch=patch))


def test_a_draft_copies_only_the_way_to_what_it_changes() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "v"}]}}
    draft = Draft(obj)
    draft.apply([{"op": "replace", "path": "/spec/containers/0/name", "value": "d"}])
    assert obj["spec"]["containers"][0]["name"] == "c"
    assert draft.doc["metadata"] is obj["metadata"] and draft.doc["spec"]["volumes"] is obj["spec"]["volumes"]
    assert draft.touched == [("spec", "containers", "0", "name")]


def test_escaped_keys_take_the_quick_way_and_come_back_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    def general_way(*_args: Any) -> None:
        raise AssertionError("the general way was taken")

    monkeypatch.setattr(patching, "apply_ops_in_place", general_way)
    obj = {"metadata": {"labels": {"app": "x"}}}
    draft = Draft(obj)
    draft.apply([{"op": "add", "path": "/metadata/labels/a.io~1b~0c", "value": "1"}])
    assert draft.doc["metadata"]["labels"] == {"app": "x", "a.io/b~c": "1"}
    assert draft.touched == [("metadata", "labels", "a.io/b~c")]
    log = PatchLog()
    log.record(draft)
    assert log.patch(obj, draft.doc) == [{"op": "add", "path": "/metadata/labels/a.io~1b~0c", "value": "1"}]


def test_an_undefined_escape_is_refused_naming_the_token() -> None:
    draft = Draft({"metadata": {"labels": {}}})
    with pytest.raises(PatchError, match="invalid escape in pointer token 'a~2b'"):
        draft.apply([{"op": "add", "path": "/metadata/labels/a~2b", "value": "1"}])


def test_changes_inside_arrays_that_shift_note_the_array() -> None:
    draft = Draft({"a": [1, 2], "m": {"k": [0]}})
    draft.apply([{"op": "add", "path": "/a/-", "value": 3}, {"op": "remove", "path": "/m/k/0"},
                 {"op": "replace", "path": "/a/0", "value": 9}, {"op": "move", "from": "/a/0", "path": "/b"}])
    assert draft.touched == [("a",), ("m", "k"), ("a", "0"), ("a",), ("b",)]


def patch_of(obj: Obj, *rules: list[Obj]) -> list[Obj]:
    mutation = mutate([Rule(plaintext=ops) for ops in rules], unaliased(obj))
    check_patch(obj, mutation)
    return mutation.patch


POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "a"}],
                                           "tolerations": [{"key": "k1"}, {"key": "k2"}, {"key": "k3"}]}}


@pytest.mark.parametrize(("rules", "patch"), [
    # A sidecar appended: one add, not the whole list.
    ([[{"op": "add", "path": "/spec/containers/-", "value": {"name": "side"}}]],
     [{"op": "add", "path": "/spec/containers/1", "value": {"name": "side"}}]),
    # An item inserted, then a field of a later (shifted) item changed.
    ([[{"op": "add", "path": "/spec/tolerations/0", "value": {"key": "k0"}}],
      [{"op": "replace", "path": "/spec/tolerations/3/key", "value": "K3"}]],
     [{"op": "replace", "path": "/spec/tolerations", "value": [{"key": "k0"}, {"key": "k1"}, {"key": "k2"},
                                                              {"key": "K3"}]}]),
    # Items removed from the middle: removes from the last, so each index is the received one.
    ([[{"op": "remove", "path": "/spec/tolerations/1"}], [{"op": "remove", "path": "/spec/tolerations/0"}]],
     [{"op": "remove", "path": "/spec/tolerations/1"}, {"op": "remove", "path": "/spec/tolerations/0"}]),
    # Added, then removed: nothing. Replaced three times: the last value.
    ([[{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}],
      [{"op": "remove", "path": "/metadata/labels"}, {"op": "replace", "path": "/metadata/name", "value": "q"}],
      [{"op": "replace", "path": "/metadata/name", "value": "r"}]],
     [{"op": "replace", "path": "/metadata/name", "value": "r"}]),
    # A child changed, then its parent replaced: only the parent's final value.
    ([[{"op": "replace", "path": "/spec/containers/0/image", "value": "b"}],
      [{"op": "replace", "path": "/spec/containers", "value": [{"name": "app", "image": "c"}]}]],
     [{"op": "replace", "path": "/spec/containers/0/image", "value": "c"}]),
    # A lenient add creating parents: one add of the missing parent.
    ([[{"op": "add", "path": "/metadata/annotations/a~1b", "value": "1"},
       {"op": "add", "path": "/metadata/annotations/c", "value": "2"}]],
     [{"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1", "c": "2"}}]),
    # Moved and copied values land as adds; the source goes.
    ([[{"op": "move", "from": "/spec/tolerations/2", "path": "/spec/t"},
       {"op": "copy", "from": "/metadata/name", "path": "/metadata/generateName"}]],
     [{"op": "remove", "path": "/spec/tolerations/2"}, {"op": "add", "path": "/spec/t", "value": {"key": "k3"}},
      {"op": "add", "path": "/metadata/generateName", "value": "p"}]),
    # Set to what it was: nothing.
    ([[{"op": "replace", "path": "/spec/containers/0", "value": {"name": "app", "image": "a"}},
       {"op": "test", "path": "/metadata/name", "value": "p"}]], []),
])
def test_patch_shapes(rules: list[list[Obj]], patch: list[Obj]) -> None:
    assert patch_of(POD, *rules) == patch


def test_a_rule_failing_midway_leaves_no_trace_in_the_patch() -> None:
    rules = [[{"op": "add", "path": "/metadata/labels", "value": {"half": "done"}},
              {"op": "add", "path": "/spec/containers/7", "value": {}}],  # out of range: the rule fails
             [{"op": "add", "path": "/metadata/annotations", "value": {"later": "ran"}}]]
    assert patch_of(POD, *rules) == [{"op": "add", "path": "/metadata/annotations", "value": {"later": "ran"}}]


def test_deep_objects_need_no_round_trip() -> None:
    # orjson refuses to encode documents nested deeper than 254 levels; nothing on the way of a
    # rule that does not touch the deep part encodes or copies the whole object any more.
    deep: Any = "bottom"
    for _ in range(300):
        deep = {"d": deep}
    obj = {"metadata": {"name": "p"}, "spec": deep}
    mutation = mutate([Rule(plaintext=[{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}])], obj)
    assert mutation.failure is None
    assert mutation.patch == [{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}]
    assert mutation.object["spec"] is deep and "labels" not in obj["metadata"]


def test_a_draft_refuses_a_change_deeper_than_objects_nest_on_its_fast_way_too() -> None:
    # The objects on the path exist, so the add would take the fast way (Draft._set).
    doc: Any = {}
    for _ in range(195):
        doc = {"a": doc}
    nested: Any = 1
    for _ in range(10):
        nested = {"a": nested}
    draft = Draft(doc)
    with pytest.raises(PatchError, match="the value nests more than 4 levels"):
        draft.apply([{"op": "add", "path": "/a" * 195 + "/k", "value": nested}])
    draft = Draft(doc)  # a failed draft is dropped
    draft.apply([{"op": "add", "path": "/a" * 195 + "/k", "value": {"b": {}}}])
    assert draft.changed


def test_a_draft_refuses_a_scalar_deeper_than_objects_nest_on_its_fast_way_too() -> None:
    # Every object on the way exists, so the add would take the fast way, which checks a scalar's
    # depth without asking patching.too_deep.
    doc: Any = {}
    for _ in range(nesting.MAX_DEPTH):
        doc = {"a": doc}
    with pytest.raises(PatchError, match=f"the path has {nesting.MAX_DEPTH + 1} segments"):
        Draft(doc).apply([{"op": "add", "path": "/a" * nesting.MAX_DEPTH + "/k", "value": "v"}])
    draft = Draft(doc)
    draft.apply([{"op": "add", "path": "/a" * (nesting.MAX_DEPTH - 1) + "/k", "value": "v"}])
    assert draft.changed


def test_leaves_the_rules_set_patch_only_what_differs_by_type_and_value() -> None:
    obj = {"metadata": {"labels": {"a/b~c": "1", "same": "same-value"}, "annotations": {"n": "1"}},
           "spec": {"count": 1}}
    equal = "-".join(["same", "value"])  # equal to the label, not the same string
    draft = Draft(obj)
    draft.apply([{"op": "replace", "path": "/metadata/labels/a~1b~0c", "value": "2"},
                 {"op": "add", "path": "/metadata/labels/same", "value": equal},
                 {"op": "add", "path": "/metadata/annotations/n", "value": 1},
                 {"op": "replace", "path": "/spec/count", "value": True}])
    log = PatchLog()
    log.record(draft)
    assert log.patch(obj, draft.doc) == [{"op": "replace", "path": "/metadata/labels/a~1b~0c", "value": "2"},
                                         {"op": "replace", "path": "/metadata/annotations/n", "value": 1},
                                         {"op": "replace", "path": "/spec/count", "value": True}]
