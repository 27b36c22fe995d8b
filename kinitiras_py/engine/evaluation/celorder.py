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
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings

from kinitiras_py.engine.evaluation import celbridge, celvalues
from kinitiras_py.engine.evaluation.celcheck import fields

FUNCTION: Final = "@sortedKeys"
"""The function giving a map's keys in order; the @ keeps it out of reach of policies' CEL."""
_SPELLED: Final = "sortedKeys"
"""How the template spells it (a name its own environment declares)."""
_OVERLOAD: Final = "sorted_keys_list"
_PLACEHOLDER: Final = "range"
_CHILDREN: Final = {5: (1,), 6: (1, 3), 7: (1,), 9: (2, 4, 5, 6, 7)}
"""Sub-expression fields per Expr kind (a struct's are in its entries, :data:`_ENTRY`)."""
_ENTRY: Final = (3, 4)


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
def _template() -> tuple[bytes, list[tuple[int, bytes]], list[tuple[int, bytes]], int]:
    """The wrapper of a range, checked: its Expr, reference and type entries, and its largest id."""
    env = cel.NewEnv(variables={_PLACEHOLDER: cel.Type.DYN}, extensions=[ext_bindings.ExtBindings()],
                     functions=[_declared(_SPELLED)])
    source = f"[{_PLACEHOLDER}].map(r, type(r) == map ? {_SPELLED}(r.map(k, k)) : r)[0]"
    checked = fields(dict(fields(env.compile(source).serialize()))[2])
    expr = next(v for n, v in checked if n == 4)
    references, types = _entries(checked, 2), _entries(checked, 3)
    return expr, references, types, max(_ids(expr))


def _entries(checked: list[tuple[int, Any]], number: int) -> list[tuple[int, bytes]]:
    out = []
    for n, entry in checked:
        if n == number:
            parts = dict(fields(entry))
            out.append((parts.get(1, 0), parts.get(2, b"")))
    return out


def _ids(expr: bytes) -> list[int]:
    out: list[int] = []
    pending = [expr]
    while pending:
        for kind, body in fields(pending.pop()):
            if kind == 2:
                out.append(body)
            elif kind in _CHILDREN:
                pending.extend(v for n, v in fields(body) if n in _CHILDREN[kind])
            elif kind == 8:
                pending.extend(v for m, entry in fields(body) if m == 2 for n, v in fields(entry) if n in _ENTRY)
    return out


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _message(parts: list[tuple[int, Any]]) -> bytes:
    """Encode fields as :func:`.celcheck.fields` reads them: ints as varints, bytes length-delimited
    (no fixed-width field is ever re-encoded here: constants are kept as they are)."""
    out = bytearray()
    for number, value in parts:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
        else:
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


class _Rewriter:
    """Rewrites the ranges of one program; :attr:`references` and :attr:`types` gather the entries
    of the wrappers spliced in."""

    def __init__(self, types: dict[int, bytes], next_id: int) -> None:
        self.types = types
        self.next_id = next_id
        self.references: list[tuple[int, bytes]] = []
        self.added_types: list[tuple[int, bytes]] = []

    def expr(self, buf: bytes) -> bytes:
        parts = fields(buf)
        changed = False
        out = []
        for kind, body in parts:
            new = body
            if kind in _CHILDREN or kind == 8:
                new = self.children(kind, body)
            changed |= new is not body
            out.append((kind, new))
        return _message(out) if changed else buf

    def children(self, kind: int, body: bytes) -> bytes:
        parts = fields(body)
        changed = False
        out = []
        for n, value in parts:
            new = value
            if kind == 8 and n == 2:
                new = self.children(-1, value)  # an entry
            elif (kind == -1 and n in _ENTRY) or (kind in _CHILDREN and n in _CHILDREN[kind]):
                new = self.expr(value)
                if kind == 9 and n == 2 and self.wrapped(parts, value):
                    new = self.wrap(new)
            changed |= new is not value
            out.append((n, new))
        return _message(out) if changed else body

    def wrapped(self, comprehension: list[tuple[int, Any]], range_expr: bytes) -> bool:
        """Whether the loop's range may be a map: not an empty list (``cel.bind``), not a
        two-variable loop, not typed a list by the checker."""
        if any(n == 8 and v for n, v in comprehension):
            return False
        found = dict(fields(range_expr))
        body = found.get(7)
        if isinstance(body, bytes) and not any(n == 1 for n, _ in fields(body)):
            return False
        return 6 not in dict(fields(self.types.get(found.get(2, -1), b"")))

    def wrap(self, range_expr: bytes) -> bytes:
        template, references, types, largest = _template()
        offset = self.next_id
        self.next_id += largest + 1
        placeholder: list[int] = []
        spliced = self.renumbered(template, offset, range_expr, placeholder)
        self.references += [(key + offset, value) for key, value in references if key + offset not in placeholder]
        self.added_types += [(key + offset, value) for key, value in types if key + offset not in placeholder]
        return spliced

    def renumbered(self, buf: bytes, offset: int, range_expr: bytes, placeholder: list[int]) -> bytes:
        """The template's ``buf`` with ids moved by ``offset``, the placeholder replaced by the
        range and the function renamed to :data:`FUNCTION`."""
        parts = fields(buf)
        found = dict(parts)
        if 4 in found and dict(fields(found[4])).get(1) == _PLACEHOLDER.encode():
            placeholder.append(found[2] + offset)
            return range_expr
        out: list[tuple[int, Any]] = []
        for kind, body in parts:
            if kind == 2:
                out.append((kind, body + offset))
            elif kind in _CHILDREN or kind == 8:
                out.append((kind, self.renumbered_children(kind, body, offset, range_expr, placeholder)))
            else:
                out.append((kind, body))
        return _message(out)

    def renumbered_children(self, kind: int, body: bytes, offset: int, range_expr: bytes,
                            placeholder: list[int]) -> bytes:
        out: list[tuple[int, Any]] = []
        for n, value in fields(body):
            if kind == 8 and n == 2:
                value = self.renumbered_children(-1, value, offset, range_expr, placeholder)
            elif kind == -1 and n == 1:
                value = value + offset  # an entry's id
            elif (kind == -1 and n in _ENTRY) or (kind in _CHILDREN and n in _CHILDREN[kind]):
                value = self.renumbered(value, offset, range_expr, placeholder)
            elif kind == 6 and n == 2 and value == _SPELLED.encode():
                value = FUNCTION.encode()
            out.append((n, value))
        return _message(out)


def ordered(serialized: bytes) -> bytes | None:
    """The program ``serialized`` (``Expression.serialize()``) with its loops over maps in key
    order, for ``Env.deserialize``; None when it has no loop that may run over a map."""
    wrapper = fields(serialized)
    checked = fields(dict(wrapper)[2])
    expr = next((v for n, v in checked if n == 4), None)
    if expr is None:
        return None
    rewriter = _Rewriter(dict(_entries(checked, 3)), max(_ids(expr), default=0) + 1)
    new = rewriter.expr(expr)
    if new is expr:
        return None
    entries = [(2, _message([(1, key), (2, value)])) for key, value in rewriter.references] + \
              [(3, _message([(1, key), (2, value)])) for key, value in rewriter.added_types]
    rebuilt = [(n, new if n == 4 else v) for n, v in checked] + entries
    return _message([(n, _message(rebuilt) if n == 2 else v) for n, v in wrapper])
