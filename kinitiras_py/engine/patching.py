"""RFC 6902 JSON patches: apply them (kinitiras-lenient) and compute them (strict).

Applying follows RFC 6902 with two deliberate leniencies kept for kinitiras compatibility:

* ``replace`` of a missing *object* key behaves like ``add`` (array indexes must still exist);
* ``remove`` of a missing path does nothing (kinitiras failed the request there; we don't).

Patches we *produce* (``make_patch``) go to the API server, which applies them with strict RFC
semantics (evanphx/json-patch), so they are checked against a strict application before
being returned.
"""

from __future__ import annotations

import re
from typing import Any

import jsonpatch
import orjson

from kinitiras_py.base.errors import PatchError
from kinitiras_py.base.typedefs import JSON, Patch

_INDEX = re.compile(r"0|[1-9][0-9]*")
_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_MISSING: Any = object()


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
    for token in tokens:
        # RFC 6901: '~' must be followed by 0 or 1.
        if re.search(r"~(?![01])", token):
            raise PatchError(f"invalid escape in pointer token {token!r}")
    # '~1' first, then '~0', so that '~01' decodes to '~1' and not '/'.
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    """The array index a token names; ``-`` is ``size`` where allowed (add only)."""
    if token == "-":
        if allow_end:
            return size
        raise PatchError("'-' (the end of an array) can only be the target of an add")
    if not _INDEX.fullmatch(token):
        raise PatchError(f"invalid array index {token!r}")
    return int(token)


def _clone(value: JSON) -> JSON:
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


def _replace(doc: JSON, tokens: list[str], value: JSON, strict: bool) -> JSON:
    if not tokens:
        return _replace_root(doc, value)
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict) and (last in parent or not strict):
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


def _apply_one(doc: JSON, op: dict[str, Any], strict: bool) -> JSON:
    name = op.get("op")
    if name not in _OPS:
        raise PatchError(f"unknown operation {name!r}")
    tokens = _split(_operand(op, "path"))
    if name == "add":
        return _add(doc, tokens, _clone(_operand(op, "value")))
    if name == "remove":
        _remove(doc, tokens, strict)
        return doc
    if name == "replace":
        return _replace(doc, tokens, _clone(_operand(op, "value")), strict)
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
        return _add(doc, tokens, _clone(value))
    if tokens[: len(source)] == source and len(tokens) > len(source):
        raise PatchError("move: cannot move a value into one of its own children")
    if tokens == source:
        return doc
    _remove(doc, source, True)
    return _add(doc, tokens, value)


def _apply(doc: JSON, patch: Patch, strict: bool) -> JSON:
    if not isinstance(patch, list):
        raise PatchError(f"a patch must be a list of operations, got {type(patch).__name__}")
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise PatchError(f"operation must be an object, got {type(op).__name__}", i)
        try:
            doc = _apply_one(doc, op, strict)
        except PatchError as err:
            raise PatchError(err.reason, i, op.get("path")) from None
    return doc


def apply_ops_in_place(doc: JSON, patch: Patch) -> JSON:
    """Apply ``patch`` to ``doc``, mutating it, and return the resulting document.

    A patch replacing the whole document (path ``""``) with a value of the same kind (object
    or array) still works in place; with any other kind only the return value has it.
    Values taken from the patch are copied, so the patch itself is never aliased into ``doc``
    (compiled policies reuse their patches across requests).
    Raises ``PatchError`` naming the failing operation's index and path; ``doc`` may then be
    partially patched.
    """
    return _apply(doc, patch, strict=False)


def apply_patch(doc: JSON, patch: Patch) -> JSON:
    """Return a patched copy of ``doc``; the input is never modified."""
    return apply_ops_in_place(orjson.loads(orjson.dumps(doc)), patch)


def _canonical(value: JSON) -> bytes:
    """JSON text that tells ``1``, ``1.0`` and ``true`` apart and ignores key order."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _fixups(actual: JSON, wanted: JSON, path: str, out: Patch) -> None:
    """Append ops turning ``actual`` into ``wanted`` wherever they differ strictly.

    Objects are diffed key by key and equal-length arrays item by item; any other difference
    replaces the whole node, which is always correct if not minimal. Objects never get a
    whole-document replace, which the API server's patcher may not accept.
    """
    if isinstance(actual, dict) and isinstance(wanted, dict):
        out.extend({"op": "remove", "path": path + "/" + escape_pointer_token(key)}
                   for key in actual if key not in wanted)
        for key, value in wanted.items():
            where = path + "/" + escape_pointer_token(key)
            if key in actual:
                _fixups(actual[key], value, where, out)
            else:
                out.append({"op": "add", "path": where, "value": value})
    elif isinstance(actual, list) and isinstance(wanted, list) and len(actual) == len(wanted):
        for i, (a, w) in enumerate(zip(actual, wanted, strict=True)):
            _fixups(a, w, f"{path}/{i}", out)
    elif _canonical(actual) != _canonical(wanted):
        out.append({"op": "replace", "path": path, "value": wanted})


def make_patch(original: JSON, final: JSON) -> Patch:
    """The RFC 6902 patch that turns ``original`` into ``final`` under strict RFC semantics.

    ``jsonpatch`` computes the diff; because it compares list items with Python equality
    (``1 == 1.0 == True``), the result is replayed strictly and any remaining type
    differences are patched with extra ``replace`` ops. Should jsonpatch crash or produce a
    patch that does not apply, a plainer diff (``_fixups`` from ``original``) is used.
    The result is a plain, unaliased ``list[dict]``.
    """
    if _canonical(original) == _canonical(final):
        return []
    ops: Patch
    try:
        ops = orjson.loads(orjson.dumps(jsonpatch.make_patch(original, final).patch))
        result = _apply(_clone(original), ops, strict=True)
    except Exception:
        # jsonpatch's list diff can crash, or emit ops that do not apply, when list items
        # shift and objects inside them change; fall back to patching what differs.
        ops, result = [], original
    fixups: Patch = []
    _fixups(result, final, "", fixups)
    return ops + orjson.loads(orjson.dumps(fixups))
