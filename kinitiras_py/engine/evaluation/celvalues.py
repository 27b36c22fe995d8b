"""JSON values into and out of cel-expr-python (a workaround module).

Only :mod:`.cel` uses this. Inputs: an integer outside the int64 range becomes a float, as the
API server's own JSON decoding does; one too large for a float, or a value of any other type,
is refused with where it lies. Results: ``plain_value()`` is trusted only where it is safe (see
:func:`careful`), and anything without a JSON form is refused with where it lies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
from cel_expr_python import cel

from kinitiras_py.base.errors import CelEvalError, KinitirasError
from kinitiras_py.base.typedefs import JSON

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class NotJSON(KinitirasError):
    """A value that cannot cross the boundary; ``where`` is filled in while unwinding."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where: list[str] = []

    def error(self, root: str) -> CelEvalError:
        """The evaluation error, naming where under ``root`` the value lies."""
        return CelEvalError(f"{root}{''.join(reversed(self.where))}: {self.reason}")


def to_input(name: str, value: JSON) -> Any:
    """The variable ``name`` as cel-expr-python accepts it; :class:`CelEvalError` naming where not."""
    try:
        return to_cel(value)
    except NotJSON as e:
        raise e.error(name) from None


def to_cel(value: JSON) -> Any:
    """``value`` as cel-expr-python accepts it; the same object when no change is needed."""
    if type(value) is dict or type(value) is list:
        # Fast path: plain decoded JSON whose integers all fit 53 bits needs no change.
        try:
            orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_SUBCLASS)
            return value
        except TypeError:
            pass
    return _to_cel_walk(value)


_KEY, _INDEX = ".{}", "[{}]"
"""How a step into a map and into a list is written where a value lies (``spec.a[0]``)."""


def _inside(convert: Callable[[Any], Any], item: Any, step: object, written: str) -> Any:
    """``convert(item)``; a :class:`NotJSON` from it learns the step (``written`` as :data:`_KEY`
    or :data:`_INDEX`) to where ``item`` lies."""
    try:
        return convert(item)
    except NotJSON as e:
        e.where.append(written.format(step))
        raise


def _to_cel_walk(value: JSON) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is float:
        return value
    if kind is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        try:
            return float(value)  # what the API server's JSON decoder does with such numbers
        except OverflowError:
            raise NotJSON(f"integer {value} is too large for CEL") from None
    if isinstance(value, dict):
        out = None if kind is dict else dict(value)  # cel-expr-python refuses subclasses
        for key, item in value.items():
            converted = _inside(_to_cel_walk, item, key, _KEY)
            if converted is not item:
                out = out if out is not None else dict(value)
                out[key] = converted
        return value if out is None else out
    if isinstance(value, list | tuple):
        out_list = None if kind is list else list(value)
        for i, item in enumerate(value):
            converted = _inside(_to_cel_walk, item, i, _INDEX)
            if converted is not item:
                out_list = out_list if out_list is not None else list(value)
                out_list[i] = converted
        return value if out_list is None else out_list
    raise NotJSON(f"a {kind.__name__} is not a JSON value")


def careful(value: Any) -> Any:
    """Convert a ``cel.Value`` element by element, never asking cel-expr-python for a null."""
    kind = value.type()
    if kind == cel.Type.NULL:
        return None
    if kind == cel.Type.ERROR:  # inside a container this can only be an optional
        raise NotJSON("an optional value has no JSON form; unwrap it with .orValue(default)")
    item = value.value()
    if isinstance(item, list):
        return [_inside(careful, element, i, _INDEX) for i, element in enumerate(item)]
    if isinstance(item, dict):
        return {key: _inside(careful, element, key, _KEY) for key, element in item.items()}
    return item


def key_order(key: Any) -> tuple[int, Any]:
    """Where a map key goes in the order kinitiras-py gives maps (see :mod:`.celorder`):
    booleans, then numbers, then strings (by code point), each in their own order."""
    kind = type(key)
    return (0 if kind is bool else 2 if kind is str else 1, key)


def ordered(value: Any) -> Any:
    """``value`` with the keys of every map in it in :func:`key_order`: cel-cpp's maps have no
    order of their own (:mod:`.celorder`). The same object when it holds no map."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return value
    blob = exact_json(value, orjson.OPT_SORT_KEYS | _STRICT)  # at C speed: plain JSON, string keys
    if blob is not None:
        return orjson.loads(blob) if b"{" in blob else value
    if kind is list:
        return [ordered(item) for item in value]
    try:
        keys = sorted(value, key=key_order)
    except TypeError:  # keys beyond CEL's (bytes, doubles...): kept as they come
        keys = list(value)
    return {key: ordered(value[key]) for key in keys}


def ordered_json(value: Any) -> Any:
    """:func:`ordered` of a CEL result, raising :class:`NotJSON` (:func:`check_json`) when it is
    not plain JSON: at C speed one serialisation tells both, where :func:`plain_json` and then
    :func:`ordered` would take two."""
    kind = type(value)
    if kind is not dict and kind is not list:
        if not plain_json(value):
            check_json(value)
        return value
    blob = exact_json(value, orjson.OPT_SORT_KEYS | _STRICT)
    if blob is not None:
        return orjson.loads(blob) if b"{" in blob else value
    check_json(value)
    return ordered(value)


_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS


def exact_json(value: Any, option: int = 0, limit: int | None = None) -> bytes | None:
    """``value``'s JSON (orjson, with ``option``) when it says exactly what ``value`` is and, with
    ``limit``, is at most that many bytes; else None. orjson writes NaN and the infinities as
    ``null``, so where the JSON holds a ``null`` it is read back and compared with ``value`` (both
    at C speed): a double written as ``null`` makes them differ."""
    try:
        blob = orjson.dumps(value, option=option)
    except TypeError:
        return None
    if limit is not None and len(blob) > limit:
        return None  # before reading it back: a large object read whole often holds a null
    return blob if b"null" not in blob or orjson.loads(blob) == value else None


def plain_json(value: Any) -> bool:
    """Quick, at C speed: whether ``value`` is plain JSON, written exactly (:func:`exact_json`),
    with timestamps, durations, bytes, types and maps with keys other than strings refused. When
    not, :func:`check_json` says why."""
    return exact_json(value, _STRICT) is not None


def check_json(value: Any) -> None:
    """Raise :class:`NotJSON` unless a CEL result (from ``plain_value()``) is plain JSON."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSON(f"the double {value} has no JSON form (JSON numbers are finite)")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _inside(check_json, item, i, _INDEX)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJSON(f"map key {key!r} is not a string, which JSON requires")
            _inside(check_json, item, key, _KEY)
        return
    raise NotJSON(f"a {type(value).__name__} value has no JSON form; convert it with string()")
