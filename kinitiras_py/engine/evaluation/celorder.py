"""Maps iterated in the order of their keys (a workaround module).

Only :mod:`.cel` uses this. cel-cpp keeps a map in a hash table whose order changes from one
table to the next (absl's per-table salt): ``object.metadata.labels.map(k, k)`` gave orders that
differed between evaluations of the same input, and the CEL result cache froze whichever came
first. A JSON object has no order that survives the conversion, so kinitiras-py chooses one:
**keys sorted** (strings by code point; of a map with other keys, booleans, then integers,
then strings).

:func:`ordered` rewrites a checked program so that every loop (``all``, ``exists``,
``exists_one``, ``map``, ``filter``) whose range may be a map runs over
``[range].map(r, type(r) == map ? @sortedKeys(r.map(k, k)) : r)[0]`` instead: a list runs as
it is, a map as its keys in order (only the keys cross into Python). The range is evaluated
once (``cel.bind`` would do too, but cel-expr-python 0.1.3 evaluates a ``cel.bind`` placed in
a loop's range wrongly inside some nestings: "Invalid container type"). The rewritten program is
evaluated; what a program reads (:mod:`.celreads`) and costs (:mod:`.cost`) are taken from the
program as written, whose loop over a map reads its keys too. Maps a program returns, and maps
handed to our functions, are ordered alike (:func:`.celvalues.ordered`).

Checked AST fields (cel.expr): Any {value 2}; CheckedExpr {reference_map 2, type_map 3, expr 4}
(map entries {key 1, value 2}); Expr {id 2, ident 4 {name 1}, select 5, call 6 {function 2},
list 7, struct 8 {entries 2}, comprehension 9 {range 2, iter_var2 8}}; Type {list_type 6}.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from cel_expr_python import cel

from kinitiras_py.engine.evaluation import celbridge, celvalues
from kinitiras_py.engine.evaluation.celcheck import CHILDREN, fields

FUNCTION: Final = "@sortedKeys"
"""The function giving a map's keys in order; the @ keeps it out of reach of policies' CEL."""
_SPELLED: Final = "sortedKeys"
"""How the template spells it (a name its own environment declares)."""
_OVERLOAD: Final = "sorted_keys_list"
_PLACEHOLDER: Final = "range"
_Fields = list[tuple[int, Any]]


def sorted_keys(keys: list[Any]) -> list[Any]:
    """``keys`` in the documented order (see the module docstring)."""
    return sorted(keys, key=celvalues.key_order)


def declaration() -> cel.FunctionDecl:
    """The declaration of :data:`FUNCTION` for the environment programs are evaluated in."""
    return _declared(FUNCTION)


def _declared(name: str) -> cel.FunctionDecl:
    dyn_list = cel.Type.List(cel.Type.DYN)
    return cel.FunctionDecl(name, [cel.Overload(_OVERLOAD, dyn_list, [dyn_list],
                                                impl=celbridge.bridge(name, sorted_keys))])


@functools.cache
def _template() -> tuple[bytes, _Fields, int]:
    """The wrapper of a range, checked: its Expr, its reference and type entries (CheckedExpr
    fields 2 and 3), and its largest id."""
    env = cel.NewEnv(variables={_PLACEHOLDER: cel.Type.DYN}, functions=[_declared(_SPELLED)])
    source = f"[{_PLACEHOLDER}].map(r, type(r) == map ? {_SPELLED}(r.map(k, k)) : r)[0]"
    checked = fields(dict(fields(env.compile(source).serialize()))[2])
    expr = next(v for n, v in checked if n == 4)
    return expr, [(n, v) for n, v in checked if n in (2, 3)], max(_ids(expr))


def _ids(expr: bytes) -> list[int]:
    """The ids of ``expr`` and of every expression in it."""
    found: list[int] = []

    def note(buf: bytes) -> bytes:
        found.append(dict(fields(buf)).get(2, 0))
        return _rebuilt(buf, note)

    note(expr)
    return found


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _message(parts: _Fields) -> bytes:
    """Encode fields as :func:`.celcheck.fields` reads them: ints as varints, bytes length-delimited
    (no fixed-width field is ever re-encoded here: constants are kept as they are)."""
    out = bytearray()
    for number, value in parts:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
        else:
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def _rebuilt(expr: bytes, child: Callable[[bytes], bytes],
             field: Callable[[int, int, Any], Any] = lambda kind, number, value: value) -> bytes:
    """``expr`` with ``child`` applied to each of its sub-expressions and ``field(kind, number,
    value)`` to its own fields (kind 0) and to those of its kind's message (a struct's entries:
    kind -8); the very bytes when nothing changed."""

    def parts_of(kind: int, buf: bytes) -> bytes:
        parts = fields(buf)
        out: _Fields = []
        for number, value in parts:
            if kind == 8 and number == 2:
                new = parts_of(-8, value)
            elif kind != 8 and number in CHILDREN.get(-kind if kind < 0 else kind, ()):
                new = child(value)
            else:
                new = field(kind, number, value)
            out.append((number, new))
        return _same(buf, parts, out)

    parts = fields(expr)
    return _same(expr, parts, [(kind, parts_of(kind, body) if kind in CHILDREN else field(0, kind, body))
                               for kind, body in parts])


def _same(buf: bytes, parts: _Fields, out: _Fields) -> bytes:
    """``buf`` when ``out`` holds the very values of ``parts``, else ``out`` encoded."""
    return buf if all(new is old for (_, new), (_, old) in zip(out, parts, strict=True)) else _message(out)


class _Rewriter:
    """Wraps the ranges of one program's loops that may be maps; :attr:`entries` gathers the
    reference and type entries of the wrappers spliced in."""

    def __init__(self, types: dict[int, bytes], next_id: int) -> None:
        self.types = types
        self.next_id = next_id
        self.entries: _Fields = []

    def expr(self, buf: bytes) -> bytes:
        rewritten = _rebuilt(buf, self.expr)
        loop = dict(fields(rewritten)).get(9)
        if loop is None or not self.may_be_map(fields(loop)):
            return rewritten
        parts = [(n, self.wrap(v) if n == 2 else v) for n, v in fields(loop)]
        return _message([(n, _message(parts) if n == 9 else v) for n, v in fields(rewritten)])

    def may_be_map(self, loop: _Fields) -> bool:
        """Whether the loop's range may be a map: not an empty list (``cel.bind``), not a
        two-variable loop, not typed a list by the checker (Type field 6)."""
        if any(n == 8 and v for n, v in loop):
            return False
        found = dict(fields(dict(loop).get(2, b"")))
        body = found.get(7)
        if isinstance(body, bytes) and not any(n == 1 for n, _ in fields(body)):
            return False
        return 6 not in dict(fields(self.types.get(found.get(2, -1), b"")))

    def wrap(self, range_expr: bytes) -> bytes:
        """The template around ``range_expr``: its ids moved past every id used so far, the
        placeholder replaced by the range, the function renamed to :data:`FUNCTION`."""
        template, entries, largest = _template()
        offset = self.next_id
        self.next_id += largest + 1
        replaced: list[int] = []

        def field(kind: int, number: int, value: Any) -> Any:
            if (kind == 0 and number == 2) or (kind == -8 and number == 1):  # an Expr's or an entry's id
                return value + offset
            if kind == 6 and number == 2 and value == _SPELLED.encode():
                return FUNCTION.encode()
            return value

        def moved(buf: bytes) -> bytes:
            found = dict(fields(buf))
            if 4 in found and dict(fields(found[4])).get(1) == _PLACEHOLDER.encode():
                replaced.append(found.get(2, 0) + offset)
                return range_expr
            return _rebuilt(buf, moved, field)

        spliced = moved(template)
        for number, entry in entries:
            key_value = dict(fields(entry))
            key = key_value.get(1, 0) + offset
            if key not in replaced:  # the placeholder's entries: the range has its own
                self.entries.append((number, _message([(1, key), (2, key_value.get(2, b""))])))
        return spliced


def ordered(serialized: bytes) -> bytes | None:
    """The program ``serialized`` (``Expression.serialize()``) with its loops over maps in key
    order, for ``Env.deserialize``; None when it has no loop that may run over a map."""
    wrapper = fields(serialized)
    checked = fields(dict(wrapper)[2])
    expr = next((v for n, v in checked if n == 4), None)
    if expr is None:
        return None
    types = {dict(fields(entry)).get(1, 0): dict(fields(entry)).get(2, b"") for n, entry in checked if n == 3}
    rewriter = _Rewriter(types, max(_ids(expr)) + 1)
    new = rewriter.expr(expr)
    if new is expr:
        return None
    rebuilt = [(n, new if n == 4 else v) for n, v in checked] + rewriter.entries
    return _message([(n, _message(rebuilt) if n == 2 else v) for n, v in wrapper])
