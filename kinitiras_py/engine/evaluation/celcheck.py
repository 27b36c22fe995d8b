"""Reading a checked CEL program: what would crash cel-expr-python 0.1.3 (optionals in
containers), and the literal patterns of its regular-expression calls (checked by RE2 when the
program is compiled).

Only :mod:`.cel` uses this (and :mod:`.celreads` its protobuf reader).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
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
CHILDREN = {5: (1,), 6: (1, 3), 7: (1,), 8: (3, 4), 9: (2, 4, 5, 6, 7)}


def _nodes(checked: list[tuple[int, Any]]) -> Iterator[tuple[int, list[tuple[int, Any]]]]:
    """Every expression of a checked program (the fields of its CheckedExpr): its kind (the Expr
    field set: 3 constant, 4 identifier, 5 select, 6 call, 7 list, 8 map, 9 comprehension) and
    that field's own fields."""
    pending = [v for n, v in checked if n == 4]
    while pending:
        for kind, body in fields(pending.pop()):
            if kind not in CHILDREN:
                continue
            parts = fields(body)
            yield kind, parts
            if kind == 8:  # the keys and values are in the entries (field 2)
                parts = [(n, v) for _, entry in (p for p in parts if p[0] == 2) for n, v in fields(entry)]
            pending.extend(v for n, v in parts if n in CHILDREN[kind])


REGEX_FUNCTIONS = ("find", "findAll", "matches", "regexReplaceAll")


@dataclass(frozen=True)
class Findings:
    """What one walk of a checked program found (:func:`inspect`)."""

    optional_misuse: str | None
    """What in the program would hand an optional to cel-expr-python's conversion, or None."""
    regex_literals: list[tuple[str, str]]
    """(function, pattern) for each call of a function of :data:`REGEX_FUNCTIONS` whose pattern
    is a string literal, so that a pattern RE2 refuses is reported when the program is compiled."""


def inspect(serialized: bytes, library: frozenset[str]) -> Findings:
    """Walk a checked program once (``library``: the names of our functions, which take their
    arguments converted); the walk stops at the first optional misuse."""
    checked = fields(dict(fields(serialized))[2])  # Any.value is the CheckedExpr
    types = {entry[1]: entry.get(2, b"") for entry in (dict(fields(v)) for n, v in checked if n == 3)}

    def optional(expr: bytes) -> bool:
        return _OPTIONAL in types.get(dict(fields(expr)).get(2, 0), b"")

    patterns: list[tuple[str, str]] = []
    for kind, parts in _nodes(checked):
        exposed: list[bytes] = []  # sub-expressions whose values would be converted or hidden
        name = ""
        if kind == 6:
            name = next((v.decode() for n, v in parts if n == 2), "")
            if name == "dyn" or name in library:
                exposed = [v for n, v in parts if n in (1, 3)]
            if name in REGEX_FUNCTIONS:
                pattern = _pattern(name, parts)
                if pattern is not None:
                    patterns.append((name, pattern))
        elif kind == 7:  # elements marked `[?x]` are unwrapped by the list itself
            skip = {i for n, v in parts if n == 2 for i in packed(v)}
            exposed = [v for i, v in enumerate(v for n, v in parts if n == 1) if i not in skip]
        elif kind == 8:  # likewise the value of a `{?k: v}` entry (field 5)
            entries = [dict(fields(v)) for n, v in parts if n == 2]
            exposed = [e[3] for e in entries if 3 in e] + [e[4] for e in entries if 4 in e and not e.get(5)]
        if any(map(optional, exposed)):
            where = {6: f"an argument of {name}()", 7: "a list element", 8: "a map key or value"}[kind]
            return Findings(where, patterns)
    return Findings(None, patterns)


def _pattern(name: str, parts: list[tuple[int, Any]]) -> str | None:
    """The literal pattern of a call of ``name`` (one of :data:`REGEX_FUNCTIONS`), or None."""
    args = [v for n, v in parts if n == 3]
    # s.find(re), s.findAll(re[, n]), s.matches(re); matches(s, re); regexReplaceAll(re, s, r)
    at = 1 if name == "matches" and not any(n == 1 for n, _ in parts) else 0
    constant = dict(fields(args[at])).get(3) if at < len(args) else None
    pattern = dict(fields(constant)).get(6) if isinstance(constant, bytes) else None
    return pattern.decode() if isinstance(pattern, bytes) else None


def packed(value: int | bytes) -> list[int]:
    """The numbers of a repeated varint field: one, or packed in bytes."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        number, i = _varint(value, i)
        out.append(number)
    return out
