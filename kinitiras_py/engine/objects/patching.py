"""RFC 6902 JSON patches: apply them, kinitiras-lenient.

Applying follows RFC 6902 with two deliberate leniencies kept for kinitiras compatibility:

* ``replace`` of a missing *object* key behaves like ``add`` (array indexes must still exist);
* ``remove`` of a missing path does nothing (kinitiras failed the request there; we don't).

No change may nest the object deeper than :data:`.nesting.MAX_DEPTH` levels (orjson, which
copies and writes it, would refuse it): a value placed at a path of n segments nests at most
``MAX_DEPTH - n`` levels itself (:func:`too_deep`).

An operation carrying ``"lenient": true`` (KubeMod's patches) also takes negative array
indexes, counted from the end (``-1`` appends when adding), and an add to ``-``/``-1``/``0`` of
a missing array creates it.

A caller may watch every change as it happens (``before``): :mod:`.patchlog` uses it to write
copy-on-write and to record what it touched. The patches we *produce* for the API server,
which applies them strictly, are built there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from kinitiras_py.base import nesting
from kinitiras_py.base.errors import PatchError
from kinitiras_py.base.typedefs import JSON, Patch

_BAD_ESCAPE = re.compile(r"~(?![01])")
_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_MISSING: Any = object()

Before = Callable[[JSON, str, list[str]], JSON]
"""Told of each change (``"add"``, ``"remove"`` or ``"replace"`` at the given reference tokens)
right before it is made; returns the document to make it in (itself, or a copy to use instead)."""


def _as_is(doc: JSON, _change: str, _tokens: list[str]) -> JSON:
    return doc


def escape_pointer_token(key: str) -> str:
    """Escape one JSON pointer reference token: ``~`` -> ``~0`` then ``/`` -> ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    """Build a JSON pointer, e.g. ``pointer("metadata", "labels", "a/b")`` -> ``/metadata/labels/a~1b``."""
    return "".join("/" + escape_pointer_token(str(token)) for token in tokens)


def _split(path: object) -> list[str]:
    """Decode a JSON pointer into its unescaped reference tokens."""
    if not isinstance(path, str):
        raise PatchError(f"path must be a string, got {type(path).__name__}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("a JSON pointer must be empty or start with '/'")
    tokens = path[1:].split("/")
    if "~" not in path:
        return tokens
    unescaped = unescape(path, tokens)
    if unescaped is None:
        bad = next(token for token in tokens if _BAD_ESCAPE.search(token))
        raise PatchError(f"invalid escape in pointer token {bad!r}")
    return unescaped


def pointer_tokens(path: object) -> list[str] | None:
    """The unescaped tokens of ``path``, a JSON pointer below the root; None for anything else
    (not a string, the root ``""``, no leading ``/``, an escape RFC 6901 does not define)."""
    if type(path) is not str or path[:1] != "/":
        return None
    tokens = path[1:].split("/")
    return tokens if "~" not in path else unescape(path, tokens)


def unescape(path: str, tokens: list[str]) -> list[str] | None:
    """``tokens``, the split of ``path``, unescaped; None when ``path`` holds an escape RFC 6901
    does not define (``~`` must be followed by 0 or 1)."""
    if _BAD_ESCAPE.search(path):
        return None
    # '~1' first, then '~0', so that '~01' decodes to '~1' and not '/'.
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def is_index(token: str) -> bool:
    """Whether a reference token is an array index as RFC 6901 writes them (no sign, no leading 0)."""
    # What _INDEX matches, with str methods: a regular expression costs more on this hot path.
    return token.isascii() and token.isdigit() and (token[0] != "0" or len(token) == 1)


def _index(token: str, size: int, *, allow_end: bool) -> int:
    """The array index a token names; ``-`` is ``size`` where allowed (add only)."""
    if token == "-":
        if allow_end:
            return size
        raise PatchError("'-' (the end of an array) can only be the target of an add")
    if not is_index(token):
        raise PatchError(f"invalid array index {token!r}")
    return int(token)


def too_deep(segments: int, value: JSON) -> str | None:
    """Why ``value`` placed at a path of ``segments`` segments would nest deeper than
    :data:`.nesting.MAX_DEPTH` levels, or None when it would not."""
    if segments > nesting.MAX_DEPTH:
        return f"the path has {segments} segments; no object may nest deeper than {nesting.MAX_DEPTH} levels"
    if type(value) in (dict, list) and nesting.exceeds(value, nesting.MAX_DEPTH - segments):
        return (f"the value nests more than {nesting.MAX_DEPTH - segments} levels, too deep at a path of "
                f"{segments} segments: no object may nest deeper than {nesting.MAX_DEPTH} levels")
    return None


def _placeable(tokens: list[str], value: JSON) -> None:
    """PatchError when ``value`` cannot be placed at ``tokens`` (:func:`too_deep`)."""
    reason = too_deep(len(tokens), value)
    if reason is not None:
        raise PatchError(reason)


def clone(value: JSON) -> JSON:
    """An independent copy of a JSON value (scalars are immutable and returned as is)."""
    return orjson.loads(orjson.dumps(value)) if isinstance(value, dict | list) else value


def _get(doc: JSON, tokens: list[str]) -> JSON:
    """The value at ``tokens`` or ``_MISSING``; malformed array indexes are errors."""
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list):
            i = _index(token, len(node), allow_end=False)
            node = node[i] if i < len(node) else _MISSING
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _replace_root(doc: JSON, value: JSON) -> JSON:
    """Replace the whole document, in place when both are objects or both arrays.

    Callers of ``apply_ops_in_place`` may keep using their reference to the document.
    """
    if isinstance(doc, dict) and isinstance(value, dict):
        doc.clear()
        doc.update(value)
        return doc
    if isinstance(doc, list) and isinstance(value, list):
        doc[:] = value
        return doc
    return value


def _add(doc: JSON, tokens: list[str], value: JSON) -> JSON:
    _placeable(tokens, value)
    if not tokens:
        return _replace_root(doc, value)
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(last, len(parent), allow_end=True)
        if i > len(parent):
            raise PatchError(f"index {i} is out of range for an array of {len(parent)}")
        parent.insert(i, value)
    elif parent is _MISSING:
        _make_parents(doc, tokens[:-1])[last] = value
    else:
        raise PatchError(f"parent is a {type(parent).__name__}, not an object or array")
    return doc


def _make_parents(doc: JSON, tokens: list[str]) -> dict[str, JSON]:
    """Create the missing objects along ``tokens`` and return the innermost one.

    Leniency beyond RFC 6902: adding an annotation to an object without annotations just works
    (kinitiras denied the request). Only objects are created; a missing array slot is an error.
    """
    node = doc
    for depth, token in enumerate(tokens):
        if isinstance(node, dict):
            child = node.get(token, _MISSING)
            if child is _MISSING or child is None:
                child = node[token] = {}
            node = child
        elif isinstance(node, list):
            i = _index(token, len(node), allow_end=False)
            if i >= len(node):
                raise PatchError(f"parent does not exist: no index {i} at /{'/'.join(tokens[:depth])}")
            node = node[i]
        else:
            raise PatchError(f"parent is a {type(node).__name__}, not an object or array")
    if not isinstance(node, dict):
        raise PatchError(f"parent is a {type(node).__name__}, not an object")
    return node


def _remove(doc: JSON, tokens: list[str], strict: bool) -> None:
    """Remove the value at ``tokens``; a missing one is an error only when ``strict``."""
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return
    if isinstance(parent, list):
        i = _index(last, len(parent), allow_end=False)
        if i < len(parent):
            del parent[i]
            return
    if strict:
        raise PatchError("path does not exist")


def _replace(doc: JSON, tokens: list[str], value: JSON) -> JSON:
    _placeable(tokens, value)
    if not tokens:
        return _replace_root(doc, value)
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict):  # a missing key: as add (leniency)
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(last, len(parent), allow_end=False)
        if i >= len(parent):
            raise PatchError(f"index {i} is out of range for an array of {len(parent)}")
        parent[i] = value
    else:
        raise PatchError("path does not exist")
    return doc


def _json_equal(a: JSON, b: JSON) -> bool:
    """RFC 6902 ``test`` equality: numbers compare by value, but booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _operand(op: dict[str, Any], key: str) -> Any:
    if key not in op:
        raise PatchError(f"operation {op.get('op')!r} needs {key!r}")
    return op[key]


_NEGATIVE = re.compile(r"-[1-9][0-9]*")


def _resolve_negative(doc: JSON, tokens: list[str], adding: bool) -> list[str]:
    """KubeMod's indexes: negative ones count from the end of the array, ``-1`` being the last
    item, or, as the target of an add, the position after it (so ``-1`` appends)."""
    node = doc
    out = list(tokens)
    for depth, token in enumerate(tokens):
        if isinstance(node, list) and _NEGATIVE.fullmatch(token):
            final = depth == len(tokens) - 1
            i = len(node) + int(token) + (1 if final and adding else 0)
            if i < 0:
                raise PatchError(f"index {token} is out of range for an array of {len(node)}")
            out[depth] = str(i)
        node = _get(node, [out[depth]]) if isinstance(node, dict | list) else _MISSING
        if node is _MISSING:
            break
    return out


def _lenient_add(doc: JSON, tokens: list[str], value: JSON, before: Before) -> JSON:
    """An add where the array to append to may be missing: it is created holding the value."""
    if len(tokens) >= 2 and tokens[-1] in ("-", "-1", "0") and _get(doc, tokens[:-1]) is _MISSING:
        return _add(before(doc, "add", tokens[:-1]), tokens[:-1], [value])
    return _add(before(doc, "add", tokens), tokens, value)


def _apply_one(doc: JSON, op: dict[str, Any], before: Before) -> JSON:
    name = op.get("op")
    if name not in _OPS:
        raise PatchError(f"unknown operation {name!r}")
    tokens = _split(_operand(op, "path"))
    if op.get("lenient") is True and name in ("add", "remove", "replace"):
        tokens = _resolve_negative(doc, tokens, name == "add")
        if name == "add":
            return _lenient_add(doc, tokens, clone(_operand(op, "value")), before)
    if name == "add":
        value = clone(_operand(op, "value"))
        return _add(before(doc, "add", tokens), tokens, value)
    if name == "remove":
        doc = before(doc, "remove", tokens)
        _remove(doc, tokens, False)
        return doc
    if name == "replace":
        value = clone(_operand(op, "value"))
        return _replace(before(doc, "replace", tokens), tokens, value)
    if name == "test":
        actual = _get(doc, tokens)
        if actual is _MISSING:
            raise PatchError("test: path does not exist")
        if not _json_equal(actual, _operand(op, "value")):
            raise PatchError(f"test failed: value is {orjson.dumps(actual).decode()}")
        return doc
    source = _split(_operand(op, "from"))
    value = _get(doc, source)
    if value is _MISSING:
        raise PatchError(f"{name}: 'from' path does not exist")
    if name == "copy":
        return _add(before(doc, "add", tokens), tokens, clone(value))
    if tokens[: len(source)] == source and len(tokens) > len(source):
        raise PatchError("move: cannot move a value into one of its own children")
    if tokens == source:
        return doc
    # Two changes: the target's indexes are read after the removal, as RFC 6902 says.
    doc = before(doc, "remove", source)
    _remove(doc, source, True)
    return _add(before(doc, "add", tokens), tokens, value)


def _apply(doc: JSON, patch: Patch, before: Before) -> JSON:
    if not isinstance(patch, list):
        raise PatchError(f"a patch must be a list of operations, got {type(patch).__name__}")
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise PatchError(f"operation must be an object, got {type(op).__name__}", i)
        try:
            doc = _apply_one(doc, op, before)
        except PatchError as err:
            raise PatchError(err.reason, i, op.get("path")) from None
    return doc


def apply_ops_in_place(doc: JSON, patch: Patch, before: Before | None = None) -> JSON:
    """Apply ``patch`` to ``doc``, mutating it, and return the resulting document.

    A patch replacing the whole document (path ``""``) with a value of the same kind (object
    or array) still works in place; with any other kind only the return value has it.
    Values taken from the patch are copied, so the patch itself is never aliased into ``doc``
    (compiled policies reuse their patches across requests).
    ``before``, when given, is told of each change just before it is made and may substitute
    the document to make it in (see :data:`Before`).
    Raises ``PatchError`` naming the failing operation's index and path; ``doc`` may then be
    partially patched.
    """
    return _apply(doc, patch, before or _as_is)


def apply_patch(doc: JSON, patch: Patch) -> JSON:
    """Return a patched copy of ``doc``; the input is never modified."""
    return apply_ops_in_place(orjson.loads(orjson.dumps(doc)), patch)
