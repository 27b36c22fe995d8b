"""``{{path}}`` placeholders in k8s reference names, namespaces, label values and http fields."""

from __future__ import annotations

import re

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.objects import fieldpath

_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


class Missing(KinitirasError, LookupError):
    """A placeholder names a field the object does not have."""


def substitute(text: str, obj: Obj) -> str:
    """Replace every ``{{path}}`` in ``text`` with that field of ``obj`` (any number of them).

    Raises Missing when a field is absent and ValueError for an empty ``{{}}`` or a map/list value.
    """
    def one(match: re.Match[str]) -> str:
        path = match.group(1)
        if not path:
            raise ValueError(f"empty placeholder in {text!r}")
        found, value = fieldpath.get_path(obj, fieldpath.parse_path(path))
        if not found or value is None:
            raise Missing(f"placeholder {{{{{path}}}}}: the object has no {path}")
        if isinstance(value, dict | list):
            raise ValueError(f"placeholder {{{{{path}}}}} names a {type(value).__name__}, not a scalar")
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return _PLACEHOLDER.sub(one, text)


def substitute_all(value: JSON, obj: Obj) -> JSON:
    """:func:`substitute` applied to every string inside ``value`` (maps' values and lists)."""
    if isinstance(value, str):
        return substitute(value, obj)
    if isinstance(value, list):
        return [substitute_all(v, obj) for v in value]
    if isinstance(value, dict):
        return {k: substitute_all(v, obj) for k, v in value.items()}
    return value
