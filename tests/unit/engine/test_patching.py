"""RFC 6902 application (with kinitiras leniency) and strict diffing."""

from __future__ import annotations

from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import PatchError
from kinitiras_py.engine import patching
from kinitiras_py.engine.patching import (
    apply_ops_in_place,
    apply_patch,
    escape_pointer_token,
    make_patch,
    pointer,
)


def canon(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def fails(doc: Any, patch: list[dict[str, Any]]) -> PatchError:
    with pytest.raises(PatchError) as info:
        apply_patch(doc, patch)
    return info.value


# --- pointers -----------------------------------------------------------------------------


def test_escape_pointer_token() -> None:
    assert escape_pointer_token("app.kubernetes.io/name") == "app.kubernetes.io~1name"
    assert escape_pointer_token("a~b") == "a~0b"
    assert escape_pointer_token("~/") == "~0~1"
    assert escape_pointer_token("plain") == "plain"


def test_pointer() -> None:
    labels = pointer("metadata", "labels", "app.kubernetes.io/name")
    assert labels == "/metadata/labels/app.kubernetes.io~1name"
    assert pointer("spec", "containers", 0, "image") == "/spec/containers/0/image"
    assert pointer() == ""
    assert pointer("") == "/"


def test_unescape_order_tilde_one_before_tilde_zero() -> None:
    # '~01' is the key '~1' (decode ~1 first, then ~0), not '/'.
    assert apply_patch({"~1": 1, "/": 2}, [{"op": "remove", "path": "/~01"}]) == {"/": 2}
    assert apply_patch({}, [{"op": "add", "path": "/a~1b~0c", "value": 1}]) == {"a/b~c": 1}


def test_invalid_escape() -> None:
    err = fails({}, [{"op": "add", "path": "/a~2", "value": 1}])
    assert str(err) == "patch op 0 ('/a~2'): invalid escape in pointer token 'a~2'"
    err = fails({}, [{"op": "add", "path": "/a~", "value": 1}])
    assert err.reason == "invalid escape in pointer token 'a~'"


def test_pointer_must_start_with_slash() -> None:
    err = fails({}, [{"op": "add", "path": "a", "value": 1}])
    assert err.reason == "a JSON pointer must be empty or start with '/'"
    assert err.index == 0
    assert err.path == "a"


# --- add ----------------------------------------------------------------------------------


def test_add_object_key() -> None:
    out = apply_patch({"a": 1}, [{"op": "add", "path": "/b", "value": {"c": [1]}}])
    assert out == {"a": 1, "b": {"c": [1]}}


def test_add_replaces_existing_key() -> None:
    assert apply_patch({"a": 1}, [{"op": "add", "path": "/a", "value": 2}]) == {"a": 2}


def test_add_array_insert_append_and_end() -> None:
    doc = {"l": [1, 2]}
    assert apply_patch(doc, [{"op": "add", "path": "/l/0", "value": 0}]) == {"l": [0, 1, 2]}
    assert apply_patch(doc, [{"op": "add", "path": "/l/1", "value": 9}]) == {"l": [1, 9, 2]}
    assert apply_patch(doc, [{"op": "add", "path": "/l/2", "value": 3}]) == {"l": [1, 2, 3]}
    assert apply_patch(doc, [{"op": "add", "path": "/l/-", "value": 3}]) == {"l": [1, 2, 3]}


def test_add_index_past_end() -> None:
    err = fails({"l": [1]}, [{"op": "add", "path": "/l/3", "value": 0}])
    assert str(err) == "patch op 0 ('/l/3'): index 3 is out of range for an array of 1"


@pytest.mark.parametrize("token", ["-1", "01", "1.0", "x", ""])
def test_add_non_canonical_index(token: str) -> None:
    err = fails({"l": [1, 2]}, [{"op": "add", "path": f"/l/{token}", "value": 0}])
    assert err.reason == f"invalid array index {token!r}"


def test_add_creates_missing_object_parents() -> None:
    # Leniency beyond RFC 6902 (kinitiras denied e.g. adding an annotation to a bare Pod).
    assert patching.apply_patch({"a": {}}, [{"op": "add", "path": "/a/b/c", "value": 1}]) == {"a": {"b": {"c": 1}}}


def test_add_never_creates_array_slots() -> None:
    err = fails({"a": []}, [{"op": "add", "path": "/a/0/c", "value": 1}])
    assert err.reason == "parent does not exist: no index 0 at /a"
    assert err.path == "/a/0/c"


def test_add_under_scalar() -> None:
    err = fails({"a": "s"}, [{"op": "add", "path": "/a/b", "value": 1}])
    assert err.reason == "parent is a str, not an object or array"


def test_add_root_replaces_document() -> None:
    assert apply_patch({"a": 1}, [{"op": "add", "path": "", "value": [1]}]) == [1]


def test_add_without_value() -> None:
    err = fails({}, [{"op": "add", "path": "/a"}])
    assert err.reason == "operation 'add' needs 'value'"


def test_add_null_value_is_a_value() -> None:
    assert apply_patch({}, [{"op": "add", "path": "/a", "value": None}]) == {"a": None}


# --- remove -------------------------------------------------------------------------------


def test_remove_key_and_index() -> None:
    assert apply_patch({"a": 1, "b": 2}, [{"op": "remove", "path": "/a"}]) == {"b": 2}
    assert apply_patch({"l": [1, 2, 3]}, [{"op": "remove", "path": "/l/1"}]) == {"l": [1, 3]}


@pytest.mark.parametrize("path", ["/missing", "/a/missing", "/a/x/y", "/l/5", "/s/x"])
def test_remove_missing_is_a_noop(path: str) -> None:
    doc = {"a": {}, "l": [1], "s": "str"}
    assert apply_patch(doc, [{"op": "remove", "path": path}]) == doc


def test_remove_bad_index_is_still_an_error() -> None:
    err = fails({"l": [1]}, [{"op": "remove", "path": "/l/-"}])
    assert err.reason == "'-' (the end of an array) can only be the target of an add"
    assert fails({"l": [1]}, [{"op": "remove", "path": "/l/01"}]).reason == "invalid array index '01'"


def test_remove_root() -> None:
    assert fails({}, [{"op": "remove", "path": ""}]).reason == "cannot remove the whole document"


# --- replace ------------------------------------------------------------------------------


def test_replace_existing() -> None:
    assert apply_patch({"a": 1}, [{"op": "replace", "path": "/a", "value": "x"}]) == {"a": "x"}
    assert apply_patch({"l": [1, 2]}, [{"op": "replace", "path": "/l/1", "value": 5}]) == {"l": [1, 5]}


def test_replace_missing_object_key_acts_as_add() -> None:
    assert apply_patch({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}]) == {"a": {"b": 1}}


def test_replace_missing_index_is_an_error() -> None:
    err = fails({"l": [1]}, [{"op": "replace", "path": "/l/1", "value": 5}])
    assert err.reason == "index 1 is out of range for an array of 1"
    err = fails({"l": [1]}, [{"op": "replace", "path": "/l/-", "value": 5}])
    assert err.reason == "'-' (the end of an array) can only be the target of an add"


def test_replace_missing_parent_is_an_error() -> None:
    assert fails({}, [{"op": "replace", "path": "/a/b", "value": 1}]).reason == "path does not exist"


def test_replace_root() -> None:
    assert apply_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}


# --- move / copy --------------------------------------------------------------------------


def test_move() -> None:
    assert apply_patch({"a": {"b": 1}}, [{"op": "move", "from": "/a/b", "path": "/c"}]) == {"a": {}, "c": 1}


def test_move_within_array_removes_first() -> None:
    assert apply_patch([1, 2, 3], [{"op": "move", "from": "/0", "path": "/2"}]) == [2, 3, 1]
    assert apply_patch([1, 2, 3], [{"op": "move", "from": "/2", "path": "/0"}]) == [3, 1, 2]


def test_move_to_itself_is_a_noop() -> None:
    assert apply_patch({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}]) == {"a": 1}


def test_move_into_own_child() -> None:
    err = fails({"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}])
    assert err.reason == "move: cannot move a value into one of its own children"


def test_move_missing_from() -> None:
    err = fails({}, [{"op": "move", "from": "/x", "path": "/y"}])
    assert str(err) == "patch op 0 ('/y'): move: 'from' path does not exist"
    assert fails({}, [{"op": "move", "path": "/y"}]).reason == "operation 'move' needs 'from'"


def test_copy_is_independent() -> None:
    out = apply_patch({"a": {"b": [1]}}, [
        {"op": "copy", "from": "/a", "path": "/c"},
        {"op": "add", "path": "/c/b/-", "value": 2},
    ])
    assert out == {"a": {"b": [1]}, "c": {"b": [1, 2]}}


def test_copy_missing_from() -> None:
    err = fails({}, [{"op": "copy", "from": "/x", "path": "/y"}])
    assert err.reason == "copy: 'from' path does not exist"


# --- test ---------------------------------------------------------------------------------


def test_test_op_passes() -> None:
    doc = {"a": [1, {"b": None}], "n": 1}
    assert apply_patch(doc, [{"op": "test", "path": "/a", "value": [1, {"b": None}]}]) == doc
    # RFC 6902: numbers compare by value.
    assert apply_patch(doc, [{"op": "test", "path": "/n", "value": 1.0}]) == doc


def test_test_op_bool_is_not_a_number() -> None:
    err = fails({"n": 1}, [{"op": "test", "path": "/n", "value": True}])
    assert str(err) == "patch op 0 ('/n'): test failed: value is 1"
    err = fails({"n": [True]}, [{"op": "test", "path": "/n", "value": [1]}])
    assert err.reason == "test failed: value is [true]"


def test_test_op_missing_path() -> None:
    assert fails({}, [{"op": "test", "path": "/a", "value": None}]).reason == "test: path does not exist"


# --- malformed operations -----------------------------------------------------------------


def test_unknown_and_empty_op_name_index_and_path() -> None:
    err = fails({}, [{"op": "add", "path": "/a", "value": 1}, {"op": "merge", "path": "/b"}])
    assert (err.index, err.path, err.reason) == (1, "/b", "unknown operation 'merge'")
    assert str(err) == "patch op 1 ('/b'): unknown operation 'merge'"
    err = fails({}, [{"op": "", "path": "/b"}])
    assert (err.index, err.reason) == (0, "unknown operation ''")
    assert fails({}, [{"path": "/b"}]).reason == "unknown operation None"


def test_malformed_patch_shapes() -> None:
    assert str(fails({}, {"op": "add"})) == "a patch must be a list of operations, got dict"  # type: ignore[arg-type]
    err = fails({}, ["add"])  # type: ignore[list-item]
    assert (err.index, err.reason) == (0, "operation must be an object, got str")
    assert fails({}, [{"op": "remove"}]).reason == "operation 'remove' needs 'path'"
    assert fails({}, [{"op": "remove", "path": 3}]).reason == "path must be a string, got int"


def test_error_index_counts_from_zero_and_names_failing_op() -> None:
    err = fails({"a": 1}, [
        {"op": "replace", "path": "/a", "value": 2},
        {"op": "test", "path": "/a", "value": 2},
        {"op": "add", "path": "/a/y", "value": 1},
    ])
    assert (err.index, err.path) == (2, "/a/y")


# --- copying and aliasing -----------------------------------------------------------------


def test_apply_patch_never_mutates_input() -> None:
    doc = {"a": {"b": [1, 2]}}
    apply_patch(doc, [{"op": "remove", "path": "/a/b/0"}, {"op": "add", "path": "/c", "value": 1}])
    assert doc == {"a": {"b": [1, 2]}}


def test_apply_ops_in_place_mutates_and_returns() -> None:
    doc: dict[str, Any] = {"a": 1}
    out = apply_ops_in_place(doc, [{"op": "add", "path": "/b", "value": 2}])
    assert out is doc
    assert doc == {"a": 1, "b": 2}
    assert apply_ops_in_place(doc, [{"op": "replace", "path": "", "value": [1]}]) == [1]


def test_root_replacement_of_same_kind_stays_in_place() -> None:
    doc: dict[str, Any] = {"a": 1}
    out = apply_ops_in_place(doc, [{"op": "replace", "path": "", "value": {"b": 2}}])
    assert out is doc
    assert doc == {"b": 2}
    items = [1, 2]
    assert apply_ops_in_place(items, [{"op": "add", "path": "", "value": [3]}]) is items
    assert items == [3]
    moved: dict[str, Any] = {"a": {"x": 1}, "b": 2}
    assert apply_ops_in_place(moved, [{"op": "move", "from": "/a", "path": ""}]) is moved
    assert moved == {"x": 1}


def test_patch_values_are_not_aliased() -> None:
    value = {"k": [1]}
    patch = [{"op": "add", "path": "/v", "value": value}]
    doc = apply_patch({}, patch)
    apply_ops_in_place(doc, [{"op": "add", "path": "/v/k/-", "value": 2}])
    assert value == {"k": [1]}
    assert doc == {"v": {"k": [1, 2]}}


# --- make_patch ---------------------------------------------------------------------------


def test_make_patch_identical_is_empty() -> None:
    assert make_patch({"a": [1, {"b": True}]}, {"a": [1, {"b": True}]}) == []


def test_make_patch_identical_skips_jsonpatch(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> None:
        raise AssertionError("jsonpatch called")

    monkeypatch.setattr(patching.jsonpatch, "make_patch", boom)
    assert make_patch({"b": 1, "a": 2}, {"a": 2, "b": 1}) == []


def test_make_patch_simple() -> None:
    assert make_patch({"a": 1}, {"a": 2, "b": "x"}) == [
        {"op": "add", "path": "/b", "value": "x"},
        {"op": "replace", "path": "/a", "value": 2},
    ]


def test_make_patch_type_distinctions_in_lists() -> None:
    assert make_patch([1, 2], [True, 2]) == [{"op": "replace", "path": "/0", "value": True}]
    assert make_patch({"a": [1, {"b": 1}]}, {"a": [1.0, {"b": True}]}) == [
        {"op": "replace", "path": "/a/0", "value": 1.0},
        {"op": "replace", "path": "/a/1/b", "value": True},
    ]
    assert make_patch({"a": 0.0}, {"a": False}) == [{"op": "replace", "path": "/a", "value": False}]


def test_make_patch_escapes_keys() -> None:
    assert make_patch({"l": {"a/b~c": "1"}}, {"l": {"a/b~c": "2"}}) == [
        {"op": "replace", "path": "/l/a~1b~0c", "value": "2"},
    ]


def test_make_patch_returns_plain_unaliased_dicts() -> None:
    final = {"a": {"b": [1]}}
    patch = make_patch({}, final)
    assert type(patch) is list
    assert all(type(op) is dict for op in patch)
    patch[0]["value"]["b"].append(2)
    assert final == {"a": {"b": [1]}}


def test_make_patch_falls_back_when_jsonpatch_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    class Bogus:
        patch = [{"op": "remove", "path": "/nope"}]

    monkeypatch.setattr(patching.jsonpatch, "make_patch", lambda *_: Bogus())
    assert make_patch({"a": 1, "b": [1]}, {"a": 1, "b": [2]}) == [
        {"op": "replace", "path": "/b/0", "value": 2},
    ]
    assert make_patch({"a": 1, "c": {"d": 1}}, {"a": 1, "b": 2, "c": {}}) == [
        {"op": "add", "path": "/b", "value": 2},
        {"op": "remove", "path": "/c/d"},
    ]
    assert make_patch({"a": [1]}, {"a": [1, 2]}) == [{"op": "replace", "path": "/a", "value": [1, 2]}]
    assert make_patch({"a": 1}, [1]) == [{"op": "replace", "path": "", "value": [1]}]


@pytest.mark.parametrize(("a", "b"), [
    # jsonpatch 1.33 emits a patch that neither it nor the RFC can apply ('/2/' into an array).
    ([0, 0, {"": 0}, []], [[], 0, {}]),
    # jsonpatch 1.33 crashes while diffing these (TypeError / ValueError in its move logic).
    ({"": [{"0": 1.0}, 0]}, {"": [{"": 0}, 1.0]}),
    ({"": [{"": 0, "0": 0.0}]}, {"": [{}, 0, 0.0]}),
])
def test_make_patch_survives_jsonpatch_bugs(a: Any, b: Any) -> None:
    # Which ops come out depends on the installed jsonpatch (later releases diff these
    # differently); what must hold with every release is that the patch turns a into b.
    check_roundtrip(a, b)


# --- properties ---------------------------------------------------------------------------

KEYS = st.text(alphabet="ab/~01", max_size=3)
SCALARS = st.sampled_from([0, 1, 1.0, 0.0, -0.0, 2.5, True, False, None, "", "a", "1", "true"]) | st.integers(
    -(2**63), 2**63 - 1
) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=3)
JSONS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


def check_roundtrip(a: Any, b: Any) -> None:
    # Strategies may share sub-objects; real documents (decoded JSON) never alias.
    a, b = orjson.loads(canon(a)), orjson.loads(canon(b))
    patch = make_patch(a, b)
    assert canon(apply_patch(a, patch)) == canon(b)
    # The API server applies strictly; jsonpatch's applier is strict RFC 6902.
    assert canon(jsonpatch.apply_patch(a, patch)) == canon(b)
    if canon(a) == canon(b):
        assert patch == []


@settings(max_examples=400, deadline=None)
@given(JSONS, JSONS)
@example({"": [{"0": 0.0}]}, {"": [{"": 0}, 0.0]})
@example([0, 0, {"": 0}, []], [[], 0, {}])
def test_make_patch_roundtrip_random_pairs(a: Any, b: Any) -> None:
    check_roundtrip(a, b)


@settings(max_examples=400, deadline=None)
@given(st.lists(JSONS, max_size=6), st.data())
def test_make_patch_roundtrip_related_lists(items: list[Any], data: st.DataObject) -> None:
    # Related documents (reordered, dropped and new items) exercise jsonpatch's move logic.
    kept = data.draw(st.permutations(items))[: data.draw(st.integers(0, len(items)))]
    extra = data.draw(st.lists(JSONS, max_size=3))
    b = data.draw(st.permutations(kept + extra))
    check_roundtrip({"spec": {"items": items, "n": 1}}, {"spec": {"items": b, "n": True}})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, JSONS, max_size=6), st.data())
def test_make_patch_roundtrip_related_objects(a: dict[str, Any], data: st.DataObject) -> None:
    b = {k: v for k, v in a.items() if data.draw(st.booleans())}
    b.update(data.draw(st.dictionaries(KEYS, JSONS, max_size=3)))
    check_roundtrip({"m": a, "x": [a]}, {"m": b, "x": [b, a]})
