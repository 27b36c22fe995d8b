"""A static upper bound of what evaluating a CEL program costs, after Kubernetes' estimator.

Only :mod:`.cel` uses this. Units follow Kubernetes (``k8s.io/apiserver/pkg/apis/cel``): about
100 ns each, 1 per identifier, field selection or call, 0.1 per character a string operation
traverses; its ``PerCallLimit`` of 1,000,000 is "roughly 0.1 second" per expression and its
``RuntimeCELCostBudget`` of 10,000,000 about a second per policy evaluation.

Sizes
    Values from the request (``object``, ``params``...) are taken at the sizes of one of
    :data:`TIERS`: first the largest request the API server accepts (3 MiB, lists as long as
    a loop can run); a program over budget there is estimated for smaller requests, and is
    admitted with the first tier it fits, which the request is then checked against before
    every evaluation (:class:`Estimate`). A program over budget at every tier is refused.
    Lists made by our functions hold at most :data:`FUNCTION_ITEMS` (enforced when they run; a
    literal ``range(n)`` counts ``n``); constants have their own sizes. ``size(x)`` of request
    data is taken as its entries, though a string may be longer: the error is bounded by
    ``range``'s limit.

Iteration
    cel-cpp stops an evaluation after :data:`MAX_ITERATIONS` comprehension iterations in all,
    so no loop body runs more often than that, however loops nest. ``map`` and ``filter`` copy
    their growing result at every step (measured: quadratic), so they cost the square of their
    length. The elements of a list from the request share its size: what a loop body spends on
    its own element's size is charged once per pass over the list, not once per element.

Calls
    Our functions (:mod:`.celext`) convert their arguments to Python and their result back,
    charged per byte; a few have their own cost (``range(n)`` is ``n``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any

from kinitiras_py.engine.evaluation.celcheck import fields

MAX_ITERATIONS = 10_000
"""cel-cpp's comprehension iteration limit per evaluation (measured: the 10,000th fails)."""
FUNCTION_ITEMS = 1_000
"""The longest list ``range``, ``enumerate``, ``flatten`` and ``findAll`` may return."""
BUDGET = 10_000_000
"""Refuse a program whose estimate exceeds this: Kubernetes' RuntimeCELCostBudget (~1 s)."""
MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""Kubernetes' MaxRequestSizeBytes: no object the API server accepts is larger."""
TIERS = ((MAX_ITERATIONS, MAX_REQUEST_BYTES), (1_000, MAX_REQUEST_BYTES), (512, MAX_REQUEST_BYTES),
         (256, 1024 * 1024), (64, 256 * 1024))
"""Request data a program's estimate is taken for, largest first: (entries of the longest list
or map, bytes of each variable). MAX_ITERATIONS entries is as good as any number: no loop runs
longer."""
SCAN = 0.01  # per byte of size() or a conversion (measured ~1 ns per byte)
TRAVERSAL = 0.1  # per character a string operation reads (Kubernetes' StringTraversalCostFactor)
CONVERSION = 0.25  # per byte converted between CEL and Python (measured ~22 ns per byte)
COPY = 0.5  # per list element copied (measured ~32 ns in a map accumulator)
CALL = 50  # a call of one of our functions (measured 2-12 µs warm: escapeKey, quantity, scale)
QUANTITY = 300  # parsing a quantity (measured ~15-30 µs uncached); scale() does it twice and rounds

# Kinds of origin: a constant, request data, or an element of the request-data list of loop N.
_CONST, _DATA = -1, -2


@dataclass(frozen=True, slots=True)
class _Val:
    """An upper bound on a value: ``items`` (list/map entries or string characters) and ``bytes``."""

    items: float
    bytes: float
    origin: int = _CONST
    literal: bool = False  # an int whose value is at most ``items`` (a literal, a size())
    element: _Val | None = None  # of a list built in the expression
    fields: tuple[tuple[str, _Val], ...] | None = None  # of a map literal with string keys
    distinct: bool = False  # a list of distinct indexes (range): indexing with them visits each once

    def small(self) -> _Val:
        """The value as one of many list elements sharing the list's size (see module doc)."""
        return _Val(1, 1, self.origin) if self.origin >= 0 else self

    def field(self, name: str | None) -> _Val | None:
        """What selecting ``name`` gives, when the value's shape is known."""
        if self.fields is not None and name is not None:
            return dict(self.fields).get(name, _ONE)
        return None


def _retag(val: _Val, loop: int) -> _Val:
    """An element of a list iterated by ``loop``: its per-element parts become that loop's."""
    fields = None if val.fields is None else tuple((k, _retag(v, loop)) for k, v in val.fields)
    return replace(val, origin=loop if val.origin >= 0 else val.origin, fields=fields)


def _join(vals: list[_Val]) -> _Val | None:
    """A bound on each of ``vals`` (the elements of one list)."""
    if not vals:
        return None
    keys = {tuple(k for k, _ in v.fields) for v in vals if v.fields is not None}
    fields = None
    if len(keys) == 1 and all(v.fields is not None for v in vals):
        fields = tuple((k, _join([dict(v.fields or ())[k] for v in vals]) or _ONE) for k in keys.pop())
    filled = [v for v in vals if v.items > 0]  # an empty list says nothing of the elements
    elements = [v.element for v in filled if v.element is not None]
    origins = {v.origin for v in vals}
    # Elements of different loops' lists are each still one element: iterating retags them.
    origin = max(origins) if min(origins) >= 0 else _merge(*vals)
    return _Val(max(v.items for v in vals), max(v.bytes for v in vals), origin,
                element=_join(elements) if elements and len(elements) == len(filled) else None, fields=fields)


_ONE = _Val(1, 8)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A program's cost bound, and the request data it holds for.

    ``items`` bounds the entries of every list and map in the request, ``bytes`` the serialized
    size of each variable; both are None when the bound holds for any request. ``base`` is the
    cost with one-byte request data: what the program costs by itself.
    """

    cost: int
    items: int | None = None
    bytes: int | None = None
    base: int = 0


def estimate(serialized: bytes) -> Estimate:
    """The cost bound of a checked program (``Expression.serialize()``).

    The first of :data:`TIERS` whose estimate is within :data:`BUDGET` (the first tier needs
    no check of the request); over budget at every tier, the estimate at the last one.
    """
    base = int(_Walker(serialized, _Val(1, 1, _DATA)).run())
    for tier, (items, size) in enumerate(TIERS):
        cost = int(_Walker(serialized, _Val(items, size, _DATA)).run())
        if cost <= BUDGET:
            return Estimate(cost, base=base) if tier == 0 else Estimate(cost, items, size, base)
    return Estimate(cost, items, size, base)


def _string_constant(expr: bytes) -> str | None:
    """The text of a string literal expression, else None."""
    constant = dict(fields(expr)).get(3) if expr else None
    if not isinstance(constant, bytes):
        return None
    text = dict(fields(constant)).get(6)
    return text.decode() if isinstance(text, bytes) else None


def _merge(*vals: _Val) -> int:
    """The origin of a value computed from ``vals``: one loop's element, else data, else constant."""
    origins = {v.origin for v in vals if v.origin != _CONST}
    if not origins:
        return _CONST
    return origins.pop() if len(origins) == 1 else _DATA


class _Walker:
    def __init__(self, serialized: bytes, data: _Val) -> None:
        checked = fields(dict(fields(serialized))[2])  # Any.value is the CheckedExpr
        self.root = next(v for n, v in checked if n == 4)
        self.refs: dict[int, str] = {}
        for n, v in checked:
            if n == 2:
                entry = dict(fields(v))
                self.refs[entry[1]] = dict(fields(entry[2])).get(1, b"").decode()
        self.data = data
        self.total = 0.0
        self.loops: list[tuple[int, float]] = []  # enclosing comprehensions: (id, iterations)

    def run(self) -> float:
        result = self.expr(self.root, {})
        return self.total + CONVERSION * result.bytes  # the result is converted to Python

    def _times(self, exclude: int | None = None) -> float:
        product = 1.0
        for loop, n in self.loops:
            if loop != exclude:
                product *= n
        return min(product, MAX_ITERATIONS) if self.loops else 1.0

    def charge(self, cost: Any, args: list[_Val]) -> None:
        """Charge ``cost(args)`` for every execution of the current node.

        Arguments that are elements of a request list cost their full size once per pass over
        that list, and their per-element size at every iteration.
        """
        small = float(cost([a.small() for a in args]))
        self.total += small * self._times()
        for loop in {a.origin for a in args if a.origin >= 0}:
            big = float(cost([a if a.origin == loop else a.small() for a in args]))
            self.total += max(0.0, big - small) * self._times(exclude=loop)

    def expr(self, body: bytes, env: dict[str, _Val]) -> _Val:
        parts = fields(body)
        node_id = next((v for n, v in parts if n == 2), 0)
        for kind, value in parts:
            if kind == 3:
                return self.const(value)
            if kind == 4:
                self.charge(lambda _: 1, [])
                name = dict(fields(value)).get(1, b"").decode()
                return env.get(name, self.data)
            if kind == 5:
                return self.select(value, env)
            if kind == 6:
                return self.call(value, env, self.refs.get(node_id, ""))
            if kind == 7:
                return self.list(value, env)
            if kind == 8:
                return self.map(value, env)
            if kind == 9:
                return self.comprehension(value, env, node_id)
        return _ONE

    def const(self, body: bytes) -> _Val:
        for kind, value in fields(body):
            if kind in (6, 7):
                return _Val(len(value), len(value))
            if kind in (3, 4) and isinstance(value, int):
                return _Val(value if value < 2**63 else 0, 8, literal=True)
            if kind == 5 and isinstance(value, bytes):
                return _Val(struct.unpack("<d", value)[0], 8)
        return _ONE

    def select(self, body: bytes, env: dict[str, _Val]) -> _Val:
        parts = dict(fields(body))
        operand = self.expr(parts.get(1, b""), env)
        self.charge(lambda _: 1, [])
        known = operand.field(parts.get(2, b"").decode())
        if known is not None:
            return known
        return _Val(operand.items, operand.bytes, operand.origin)

    def list(self, body: bytes, env: dict[str, _Val]) -> _Val:
        elements = [self.expr(v, env) for n, v in fields(body) if n == 1]
        self.charge(lambda _: 10 + len(elements), [])
        return _Val(len(elements), sum(e.bytes for e in elements) + 2, _merge(*elements), element=_join(elements))

    def map(self, body: bytes, env: dict[str, _Val]) -> _Val:
        vals: list[_Val] = []
        named: list[tuple[str, _Val]] | None = []
        for n, entry in fields(body):
            if n == 2:
                parts = dict(fields(entry))
                key, value = (self.expr(parts[k], env) if k in parts else _ONE for k in (3, 4))
                vals += [key, value]
                name = _string_constant(parts.get(3, b""))
                if name is None or named is None:
                    named = None
                else:
                    named.append((name, value))
        self.charge(lambda _: 30 + len(vals), [])
        return _Val(len(vals) // 2, sum(v.bytes for v in vals) + 2, _merge(*vals),
                    fields=tuple(named) if named is not None else None)

    def call(self, body: bytes, env: dict[str, _Val], function: str) -> _Val:
        parts = fields(body)
        name = next((v.decode() for n, v in parts if n == 2), function)
        args = [self.expr(v, env) for n, v in parts if n in (1, 3)]
        if name in ("_[_]", "_[?_]") and len(args) == 2:
            key = _string_constant(next((v for n, v in parts if n == 3), b""))
            shaped = args[0].field(key) or args[0].element
            if shaped is None and args[1].origin >= 0 and args[0].origin != _CONST:
                # Indexed by a loop's distinct indexes: one element per iteration, each once a pass.
                shaped = replace(args[0], origin=args[1].origin)
            if shaped is not None:
                self.charge(lambda _: 1, [])
                return shaped
        rule = _FUNCTIONS.get(name, _default)
        self.charge(lambda vals: rule(vals)[0], args)
        return rule(args)[1]

    def comprehension(self, body: bytes, env: dict[str, _Val], node_id: int) -> _Val:
        parts = dict(fields(body))
        names = {k: parts.get(k, b"").decode() for k in (1, 3, 8)}
        source = self.expr(parts[2], env)
        init = self.expr(parts[4], env)
        n = min(source.items, MAX_ITERATIONS)
        if n <= 0:  # cel.bind: an empty range, the bound value is the accumulator
            return self.expr(parts[7], {**env, names[3]: init})
        if source.distinct:  # each index once: what it selects is one element per iteration
            element = replace(source.element or _ONE, origin=node_id)
        elif source.origin == _CONST:
            element = source.element or _Val(source.items, source.bytes)
        elif source.element is None:
            element = _Val(source.items, source.bytes, node_id)
        else:
            element = _retag(source.element, node_id)
        inner = {**env, names[1]: element if names[8] == "" else _ONE}
        if names[8]:
            inner[names[8]] = element
        # The accumulator grows by what one step adds, n times (map and filter add one element).
        self.loops.append((node_id, n))
        saved = self.total
        step = self.expr(parts[6], {**inner, names[3]: init})
        one = self.expr(parts[6], {**inner, names[1]: element.small(), names[3]: init}) if names[8] == "" else step
        self.total = saved
        # What the elements of a request list add sums to the list's size at most.
        grown = n * max(0.0, one.bytes - init.bytes) + max(0.0, step.bytes - one.bytes)
        origin = _merge(init, step)
        accumulator = _Val(init.items + n * max(0.0, step.items - init.items), init.bytes + grown,
                           _DATA if origin >= 0 else origin, element=step.element)
        scope = {**inner, names[3]: accumulator}
        self.expr(parts[5], scope)
        self.expr(parts[6], scope)
        self.loops.pop()
        return self.expr(parts[7], {**env, names[3]: accumulator})


# -- function costs: (cost, result) from argument bounds -----------------------------------------


def _traverse(vals: list[_Val]) -> tuple[float, _Val]:
    return 1 + TRAVERSAL * sum(v.bytes for v in vals), _Val(1, 8)


def _size(vals: list[_Val]) -> tuple[float, _Val]:
    return _scan(vals)[0], _Val(vals[0].items if vals else 1, 8, literal=True)


def _scan(vals: list[_Val]) -> tuple[float, _Val]:
    """Counting code points or checking UTF-8 (``size``, conversions): ~1 ns a byte (measured)."""
    return 1 + SCAN * sum(v.bytes for v in vals), _Val(1, 8)


def _prefix(vals: list[_Val]) -> tuple[float, _Val]:
    """startsWith, endsWith: as long as the argument; comparisons: the shorter operand."""
    return 1 + TRAVERSAL * min(v.bytes for v in vals), _Val(1, 8)


def _member(vals: list[_Val]) -> tuple[float, _Val]:
    needle, haystack = [*vals, _ONE, _ONE][:2]
    return 1 + haystack.items * max(1.0, TRAVERSAL * min(needle.bytes, haystack.bytes)), _Val(1, 8)


def _concat(vals: list[_Val]) -> tuple[float, _Val]:
    # Lists copy their elements, strings their characters; with dyn operands assume the dearer.
    items = sum(v.items for v in vals)
    filled = [v for v in vals if v.items > 0]  # `[] + l`: the empty list says nothing of the elements
    elements = [v.element for v in filled if v.element is not None]
    return 1 + COPY * items, _Val(items, sum(v.bytes for v in vals), _merge(*vals),
                                  element=_join(elements) if len(elements) == len(filled) else None)


def _pass(vals: list[_Val]) -> tuple[float, _Val]:
    """dyn(), optionals, ``c ? a : b``: a value handed on, not copied."""
    if len(vals) == 3:  # the conditional: either branch
        return 1, _join(vals[1:]) or _ONE
    return 1, vals[0] if vals else _ONE


def _same(vals: list[_Val]) -> tuple[float, _Val]:
    """A function returning something as large as its receiver (``lowerAscii``, ``replace``...)."""
    largest = max(vals, key=lambda v: v.bytes) if vals else _ONE
    return 1 + TRAVERSAL * sum(v.items for v in vals), _Val(largest.items, largest.bytes, _merge(*vals))


def _index(vals: list[_Val]) -> tuple[float, _Val]:
    return 1, vals[0] if vals else _ONE


def _cheap(_vals: list[_Val]) -> tuple[float, _Val]:
    return 1, _ONE


def _regex(vals: list[_Val]) -> tuple[float, _Val]:
    # RE2 is linear in the text; Kubernetes charges text length x pattern length x 0.25.
    text, pattern = [*vals, _ONE, _ONE][:2]
    return 1 + 0.25 * text.bytes * max(1.0, pattern.bytes / 10), _Val(1, 8)


def _converted(vals: list[_Val], result: _Val) -> tuple[float, _Val]:
    return CALL + CONVERSION * (sum(v.bytes for v in vals) + result.bytes), result


def _default(vals: list[_Val]) -> tuple[float, _Val]:
    """One of our functions without a rule of its own: a result as large as its arguments."""
    size = sum(v.bytes for v in vals)
    return _converted(vals, _Val(min(size, FUNCTION_ITEMS), size, _merge(*vals)))


def _range(vals: list[_Val]) -> tuple[float, _Val]:
    # A literal beyond FUNCTION_ITEMS fails at run time; its estimate says what it would cost.
    n = vals[0].items if vals and vals[0].literal else FUNCTION_ITEMS
    return _converted(vals, _Val(n, 8 * n, element=_Val(1, 8), distinct=True))


def _listed(vals: list[_Val]) -> tuple[float, _Val]:
    """enumerate, flatten, findAll: up to FUNCTION_ITEMS elements, as large as the input."""
    size = sum(v.bytes for v in vals)
    return _converted(vals, _Val(FUNCTION_ITEMS, 2 * size + 32 * FUNCTION_ITEMS, _merge(*vals)))


def _scalar(vals: list[_Val]) -> tuple[float, _Val]:
    return _converted(vals, _Val(1, 64))


def _quantity(vals: list[_Val]) -> tuple[float, _Val]:
    cost, result = _scalar(vals)
    return cost + QUANTITY * len([v for v in vals if v.items != 0]), result


_FUNCTIONS: dict[str, Any] = {
    "size": _size,
    **dict.fromkeys(("int", "uint", "double", "string", "bytes", "bool"), _scan),
    **dict.fromkeys(("contains", "indexOf", "lastIndexOf", "charAt", "base64.encode", "base64.decode", "isSorted"),
                    _traverse),
    **dict.fromkeys(("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "startsWith", "endsWith"), _prefix),
    "@in": _member,
    **dict.fromkeys(("_+_",), _concat),
    **dict.fromkeys(("lowerAscii", "upperAscii", "replace", "split", "substring", "trim", "reverse",
                     "join", "strings.quote", "format", "sum", "min", "max"), _same),
    **dict.fromkeys(("dyn", "optional.of", "value", "orValue", "optional.ofNonZeroValue", "or", "_?_:_"), _pass),
    **dict.fromkeys(("_[_]", "_[?_]", "_?._"), _index),
    **dict.fromkeys(("_&&_", "_||_", "!_", "-_", "_-_", "_*_", "_/_", "_%_", "@not_strictly_false",
                     "hasValue", "optional.none", "type", "math.greatest", "math.least", "cel.@block"),
                    _cheap),
    "matches": _regex,
    "find": _regex,
    "range": _range,
    "lists.range": _range,
    "enumerate": _listed,
    "flatten": _listed,
    "findAll": _listed,
    **dict.fromkeys(("quantity", "isQuantity", "sign", "isGreaterThan", "isLessThan", "compareTo", "add",
                     "sub", "asInteger", "isInteger", "asApproximateFloat", "scale", "canonical"), _quantity),
    **dict.fromkeys(("jsonpatch.escapeKey", "cond.equal", "cond.isIn", "cond.compare", "cond.process",
                     "workload.podSpecPath"), _scalar),
}

