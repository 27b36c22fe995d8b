"""RFC 6902 application (with kinitiras leniency) and the hook that watches each change.

The patches we produce are tested in ``test_patch_from_ops.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.base.errors import PatchError
from kinitiras_py.engine.objects import patching
from kinitiras_py.engine.objects.patching import (
    apply_ops_in_place,
    apply_patch,
    escape_pointer_token,
    pointer,
)


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


# --- before: the hook told of each change -------------------------------------------------


def watched(doc: Any, patch: list[dict[str, Any]]) -> tuple[Any, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []

    def before(current: Any, change: str, tokens: list[str]) -> Any:
        seen.append((change, pointer(*tokens)))
        return current

    return apply_ops_in_place(doc, patch, before), seen


def test_before_sees_each_change_with_its_kind_and_path() -> None:
    doc, seen = watched({"a": [1, 2], "b": {}}, [
        {"op": "add", "path": "/b/x~1y", "value": 1},
        {"op": "replace", "path": "/a/0", "value": 0},
        {"op": "remove", "path": "/nope"},
        {"op": "test", "path": "/a/0", "value": 0},
        {"op": "copy", "from": "/a", "path": "/c"},
    ])
    assert doc == {"a": [0, 2], "b": {"x/y": 1}, "c": [0, 2]}
    assert seen == [("add", "/b/x~1y"), ("replace", "/a/0"), ("remove", "/nope"), ("add", "/c")]


def test_before_sees_a_move_as_remove_then_add() -> None:
    # The target's index is read after the removal (RFC 6902), so the hook sees it that way too.
    doc, seen = watched({"a": [1, 2, 3]}, [{"op": "move", "from": "/a/0", "path": "/a/2"}])
    assert doc == {"a": [2, 3, 1]}
    assert seen == [("remove", "/a/0"), ("add", "/a/2")]
    assert watched({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}])[1] == []


def test_before_may_substitute_the_document() -> None:
    original = {"a": {"b": 1}}

    def copy_root(doc: Any, _change: str, _tokens: list[str]) -> Any:
        return {**doc, "a": dict(doc["a"])} if doc is original else doc

    result = apply_ops_in_place(original, [{"op": "replace", "path": "/a/b", "value": 2},
                                           {"op": "add", "path": "/c", "value": 3}], copy_root)
    assert original == {"a": {"b": 1}}
    assert result == {"a": {"b": 2}, "c": 3}


def test_is_index() -> None:
    assert [t for t in ("0", "7", "10", "01", "-", "-1", "+1", "1.0", "", "a") if patching.is_index(t)] == [
        "0", "7", "10"]


# --- depth ----------------------------------------------------------------------------------


def test_a_change_deeper_than_objects_nest_is_refused_not_made() -> None:
    deep = "/metadata/annotations" + "/a" * 251  # 253 segments: orjson could no longer write the object
    assert "the path has 253 segments; no object may nest deeper than 200" in fails({}, [
        {"op": "add", "path": deep, "value": "x"}]).reason
    value: Any = "x"
    for _ in range(60):
        value = {"a": value}
    reason = fails({}, [{"op": "add", "path": "/a" * 150, "value": value}]).reason
    assert "the value nests more than 50 levels, too deep at a path of 150 segments" in reason
    assert "path of 150" in fails({}, [{"op": "replace", "path": "/a" * 150, "value": value}]).reason
    assert apply_patch({}, [{"op": "add", "path": "/a" * 140, "value": value}])  # 200 levels: fine
    assert apply_patch({}, [{"op": "remove", "path": "/a" * 300}]) == {}  # nothing there: a no-op


def test_too_deep() -> None:
    assert patching.too_deep(200, "x") is None
    assert patching.too_deep(200, {}) is None
    assert patching.too_deep(200, {"a": {}}) is not None
    assert patching.too_deep(201, None) is not None
