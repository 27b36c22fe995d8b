"""Refusing CEL programs that would crash cel-expr-python 0.1.3 (optionals in containers).

Only :mod:`.cel` uses this.
"""

from __future__ import annotations

from typing import Any

# -- optionals must not reach cel-expr-python's conversion to Python ------------------------------
#
# Converting an optional inside a list, a map or a function argument crashes the process (a
# NULL lands in the Python container). Optionals enter containers only through literals (macros
# expand to literals too), dyn() hides them, and only our functions take arguments; so a program
# is refused when an optional-typed value is a list element, a map key or value, the argument of
# dyn() or an argument of a library function. The checked AST comes from Expression.serialize(),
# an Any-wrapped cel.expr.CheckedExpr decoded here with a minimal protobuf reader.

_OPTIONAL = b"\n\roptional_type"  # abstract_type.name of an optional, anywhere in a Type message


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, Any]]:
    """(field number, int or bytes) pairs of one protobuf message."""
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        else:  # fixed64 / fixed32 scalars, unused by the fields read here
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        out.append((key >> 3, value))
    return out


# Sub-expression fields per Expr kind: select 5 {operand 1}, call 6 {target 1, args 3}, list 7
# {elements 1}, map 8 {entries 2 -> {map_key 3, value 4}}, comprehension 9 {range 2, init 4,
# condition 5, step 6, result 7}. Ids are field 2 of an Expr, types field 3 of a CheckedExpr.
_CHILDREN = {5: (1,), 6: (1, 3), 7: (1,), 8: (3, 4), 9: (2, 4, 5, 6, 7)}


def optional_misuse(serialized: bytes, library: frozenset[str]) -> str | None:
    """What in a program would hand an optional to cel-expr-python's conversion, or None."""
    checked = fields(dict(fields(serialized))[2])  # Any.value is the CheckedExpr
    types = {entry[1]: entry.get(2, b"") for entry in (dict(fields(v)) for n, v in checked if n == 3)}

    def optional(expr: bytes) -> bool:
        return _OPTIONAL in types.get(dict(fields(expr)).get(2, 0), b"")

    pending = [v for n, v in checked if n == 4]
    while pending:
        for kind, body in fields(pending.pop()):
            parts = fields(body) if kind in _CHILDREN else []
            exposed: list[bytes] = []  # sub-expressions whose values would be converted or hidden
            name = ""
            if kind == 6:
                name = next((v.decode() for n, v in parts if n == 2), "")
                if name == "dyn" or name in library:
                    exposed = [v for n, v in parts if n in (1, 3)]
            elif kind == 7:  # elements marked `[?x]` are unwrapped by the list itself
                skip = {i for n, v in parts if n == 2 for i in _packed(v)}
                exposed = [v for i, v in enumerate(v for n, v in parts if n == 1) if i not in skip]
            elif kind == 8:  # likewise the value of a `{?k: v}` entry (field 5)
                entries = [dict(fields(v)) for n, v in parts if n == 2]
                parts = [(n, v) for entry in entries for n, v in entry.items()]
                exposed = [e[3] for e in entries if 3 in e] + [e[4] for e in entries if 4 in e and not e.get(5)]
            if any(map(optional, exposed)):
                return {6: f"an argument of {name}()", 7: "a list element", 8: "a map key or value"}[kind]
            pending.extend(v for n, v in parts if n in _CHILDREN.get(kind, ()))
    return None


def _packed(value: int | bytes) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        number, i = _varint(value, i)
        out.append(number)
    return out
