"""The shape of an AdmissionReview request, checked before anything reads it.

The API server always sends well-typed reviews; anything else (a proxy, a test, an attacker)
gets a :class:`~kinitiras_py.base.errors.ReviewError` naming the field, answered with a 400,
rather than reaching the engine with a type it does not expect. Checked here:

* ``request.kind``, ``resource``, ``requestKind`` and ``requestResource``: objects of strings;
* ``name``, ``namespace``, ``subResource``, ``requestSubResource``: strings;
* ``dryRun``: a bool (``"false"`` is not false); ``userInfo``: the UserInfo types;
* ``object`` and ``oldObject``: objects whose ``apiVersion`` and ``kind`` are strings and whose
  ``metadata`` has the ObjectMeta types the engine reads (name, namespace, labels and
  annotations as maps of strings, ownerReferences...);
* nesting: at most :data:`MAX_DEPTH` levels below ``object``/``oldObject``. The engine copies
  and serialises objects with orjson, which stops at 255 levels; Kubernetes objects are nowhere
  near that deep, so the bound leaves room for what rules add (:mod:`.base.nesting`).

Absent or null optional fields are fine; the caller checks which are required per operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from kinitiras_py.base.errors import ReviewError
from kinitiras_py.base.nesting import MAX_DEPTH, exceeds
from kinitiras_py.base.typedefs import Obj

_STRINGS = ("name", "namespace", "subResource", "requestSubResource")
_GVKS = {"kind": ("group", "version", "kind"), "requestKind": ("group", "version", "kind"),
         "resource": ("group", "version", "resource"), "requestResource": ("group", "version", "resource")}
_META_STRINGS = ("name", "namespace", "generateName", "uid", "resourceVersion")
_OWNER_STRINGS = ("apiVersion", "kind", "name", "uid")


def _type(value: object) -> str:
    return "null" if value is None else {dict: "object", list: "array", str: "string", bool: "bool",
                                         int: "number", float: "number"}.get(type(value), type(value).__name__)


def _fail(path: str, wanted: str, value: object) -> ReviewError:
    return ReviewError(f"{path} must be {wanted}, got {_type(value)}")


def _string(doc: Obj, key: str, path: str) -> None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(f"{path}.{key}", "a string", value)


def _object(value: object, path: str) -> Obj | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail(path, "an object", value)
    return value


def _strings_map(value: object, path: str) -> None:
    for key, item in (_object(value, path) or {}).items():
        if not isinstance(item, str):
            raise _fail(f"{path}[{key!r}]", "a string", item)


def _strings_list(value: object, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise _fail(path, "an array of strings", value)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _fail(f"{path}[{i}]", "a string", item)


def check_request(req: Obj) -> dict[str, bytes]:
    """Raise ReviewError naming the first field of ``request`` with the wrong type; else the
    JSON of ``object`` and ``oldObject`` (those present and plain JSON), which the depth check
    writes anyway."""
    for key in _STRINGS:
        _string(req, key, "request")
    for key, fields in _GVKS.items():
        gvk = _object(req.get(key), f"request.{key}") or {}
        for name in fields:
            _string(gvk, name, f"request.{key}")
    dry_run = req.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise _fail("request.dryRun", "a bool", dry_run)
    user = _object(req.get("userInfo"), "request.userInfo")
    if user is not None:
        _string(user, "username", "request.userInfo")
        _string(user, "uid", "request.userInfo")
        _strings_list(user.get("groups"), "request.userInfo.groups")
        extra = _object(user.get("extra"), "request.userInfo.extra")
        for key, values in (extra or {}).items():
            _strings_list(values, f"request.userInfo.extra[{key!r}]")
    _object(req.get("options"), "request.options")
    written: dict[str, bytes] = {}
    for key in ("object", "oldObject"):
        blob = check_object(req.get(key), f"request.{key}")
        if blob is not None:
            written[key] = blob
    return written


def check_object(value: object, path: str) -> bytes | None:
    """Raise ReviewError when ``value`` (None is fine) is not a Kubernetes object the engine can
    read; else its JSON (None: absent, or not plain JSON)."""
    obj = _object(value, path)
    if obj is None:
        return None
    _string(obj, "apiVersion", path)
    _string(obj, "kind", path)
    meta = _object(obj.get("metadata"), f"{path}.metadata")
    if meta is not None:
        for key in _META_STRINGS:
            _string(meta, key, f"{path}.metadata")
        for key in ("labels", "annotations"):
            _strings_map(meta.get(key), f"{path}.metadata.{key}")
        _strings_list(meta.get("finalizers"), f"{path}.metadata.finalizers")
        owners = meta.get("ownerReferences")
        if owners is not None and not isinstance(owners, list):
            raise _fail(f"{path}.metadata.ownerReferences", "an array", owners)
        for i, owner in enumerate(owners or ()):
            where = f"{path}.metadata.ownerReferences[{i}]"
            if not isinstance(owner, dict):
                raise _fail(where, "an object", owner)
            for key in _OWNER_STRINGS:
                _string(owner, key, where)
            controller = owner.get("controller")
            if controller is not None and not isinstance(controller, bool):
                raise _fail(f"{where}.controller", "a bool", controller)
    deep, blob = _written(obj)
    too_deep = _deeper_than(obj, MAX_DEPTH) if deep else None
    if too_deep is not None:
        shown = "".join(too_deep[:8]) + ("..." if len(too_deep) > 8 else "")
        raise ReviewError(f"{path} is nested deeper than {MAX_DEPTH} levels (at {path}{shown})")
    return blob


def _children(value: object) -> Iterator[tuple[str, object]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                yield f".{key}", item
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict | list):
                yield f"[{i}]", item


def _orjson_depth() -> int:
    """The most containers orjson serialises nested in one another (255 in orjson 3)."""
    value: list[Any] = []
    depth = 1
    while depth < 10_000:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            return depth - 1
        value, depth = [value], depth + 1
    return depth


_WRAPPERS = _orjson_depth() - MAX_DEPTH - 1
"""Lists around an object that make orjson refuse it exactly when it nests more than
MAX_DEPTH levels (the object itself is one more)."""


def _written(obj: Obj) -> tuple[bool, bytes | None]:
    """Whether containers nest more than MAX_DEPTH levels below ``obj``, and its JSON (None when
    too deep, or when orjson refuses it for another reason: an integer beyond 64 bits). orjson,
    which refuses to serialise past its own depth limit, tells at C speed (8 µs for a Pod, 65 µs
    in Python) and writes the object on the way; what it refuses for another reason is measured
    in Python."""
    wrapped: Any = obj
    for _ in range(_WRAPPERS):
        wrapped = [wrapped]
    try:
        return False, orjson.dumps(wrapped)[_WRAPPERS:-_WRAPPERS]
    except orjson.JSONEncodeError as e:
        if "Recursion limit" in str(e):
            return True, None
        return exceeds(obj, MAX_DEPTH), None


def _deeper_than(root: object, limit: int) -> list[str] | None:
    """The path to the first container nested more than ``limit`` levels below ``root``, or None.

    Iterative (a deep document must not exhaust the Python stack); only containers are visited
    and each once, so the cost follows the number of objects and arrays in the document.
    """
    steps: list[tuple[str, int]] = []
    """(step from the parent, index of the parent in ``steps`` or -1): the path, kept as links."""
    stack: list[tuple[object, int, int]] = [(root, 0, -1)]
    while stack:
        value, depth, at = stack.pop()
        for step, child in _children(value):
            steps.append((step, at))
            if depth + 1 > limit:
                path, link = [], len(steps) - 1
                while link >= 0:
                    path.append(steps[link][0])
                    link = steps[link][1]
                return path[::-1]
            stack.append((child, depth + 1, len(steps) - 1))
    return None
