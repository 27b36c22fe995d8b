"""A static upper bound of what evaluating a CEL program costs, after Kubernetes' estimator.

Only :mod:`.cel` uses this; the units and what each function costs are :mod:`.costmodel`.
Kubernetes' (``k8s.io/apiserver/pkg/apis/cel``) ``PerCallLimit`` of 1,000,000 is "roughly 0.1
second" per expression and its ``RuntimeCELCostBudget`` of 10,000,000 about a second per policy
evaluation.

Sizes
    Values from the request (``object``, ``params``...) are taken at the sizes of one of
    :data:`TIERS`: first the largest request the API server accepts (3 MiB, lists as long as
    a loop can run); a program over budget there is estimated for smaller requests, and is
    admitted with the first tier it fits, which the request is then checked against before
    every evaluation (:class:`Estimate`). A program over budget at every tier is refused.
    The check measures only what the cost depends on: the bytes of each variable the program
    reads, and the entries (characters of a string) of the request data it iterates or hands
    to a function whose cost or result depends on them (``size``, ``in``, ``+``...), by the
    paths it reads them from (:attr:`Estimate.paths`, alternatives included: a pod spec found
    by kind); a long list elsewhere in the request costs nothing.
    Lists made by our functions hold at most :data:`.costmodel.FUNCTION_ITEMS` (enforced when they run; a
    literal ``range(n)`` counts ``n``); constants have their own sizes.

Iteration
    cel-cpp stops an evaluation after :data:`MAX_ITERATIONS` comprehension iterations in all,
    so no loop body runs more often than that, however loops nest; and all loops together run
    that many iterations at most, so the evaluation costs at most what runs outside loops plus
    :data:`MAX_ITERATIONS` times the costliest single iteration of any loop (what the loop's
    body costs, nested loops aside). The estimate is the lesser of that bound and the sum over
    loops (each iterating as often as its list is long, nesting multiplying): the first is
    what bounds many loops side by side (``..`` unrolled, unions of filters), the second few
    short ones. ``map`` and ``filter`` copy
    their growing result at every step (measured: quadratic), so they cost the square of their
    length. The elements of a list from the request share its size: what a loop body spends on
    its own element's size is charged once per pass over the list, not once per element.

Parts of elements
    A loop over a list read from the element of an enclosing loop (``l.exists(x,
    x.ports.exists(p, ...))``, each level of an unrolled ``..``) iterates a different part of
    the request at every pass: what its elements' sizes cost sums, over all those passes, to
    the enclosing list's size at most, so it is charged once per pass of the enclosing loop.

Calls
    Our functions (:mod:`.celext`) convert their arguments to Python and their result back,
    charged per byte; a few have their own cost (``range(n)`` is ``n``): :mod:`.costmodel`.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, replace
from typing import Any

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.engine.evaluation.celcheck import fields
from kinitiras_py.engine.evaluation.costmodel import (
    ANY,
    CONST,
    CONVERSION,
    DATA,
    EVERYWHERE,
    FUNCTIONS,
    LENGTH_FREE,
    ONE,
    Path,
    Val,
    default,
    join,
    merge,
    retag,
)


@functools.lru_cache(maxsize=16384)
def _parts(message: bytes) -> tuple[tuple[int, Any], ...]:
    """:func:`celcheck.fields`, decoded once: every tier walks the same messages."""
    return tuple(fields(message))


MAX_ITERATIONS = 10_000
"""cel-cpp's comprehension iteration limit per evaluation (measured: the 10,000th fails)."""
BUDGET = 10_000_000
"""Refuse a program whose estimate exceeds this: Kubernetes' RuntimeCELCostBudget (~1 s)."""
MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""Kubernetes' MaxRequestSizeBytes: no object the API server accepts is larger."""
TIERS = ((MAX_ITERATIONS, MAX_REQUEST_BYTES), (1_000, MAX_REQUEST_BYTES), (512, MAX_REQUEST_BYTES),
         (256, MAX_REQUEST_BYTES), (256, 1024 * 1024), (64, 256 * 1024))
"""Request data a program's estimate is taken for, largest first: (entries of the longest list
or map, bytes of each variable). MAX_ITERATIONS entries is as good as any number: no loop runs
longer."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A program's cost bound, and the request data it holds for.

    ``items`` bounds the entries of the lists and maps at ``paths`` in the request (the paths
    the cost depends on), ``bytes`` the serialized size of each variable in ``variables`` (those
    the program reads; ``**`` for all); all four are None when the bound holds for any request. ``base`` is the
    cost with one-byte request data, what the program costs by itself (taken only when ``cost``
    is above the caller's threshold; else ``cost``, which bounds it).
    """

    cost: int
    items: int | None = None
    bytes: int | None = None
    base: int = 0
    paths: tuple[Path, ...] | None = None
    variables: tuple[str, ...] | None = None


class _Over(KinitirasError):
    """A walk passed its limit: the rest of the program can only add to the cost."""


def estimate(serialized: bytes, threshold: float = 0) -> Estimate:
    """The cost bound of a checked program (``Expression.serialize()``).

    The first of :data:`TIERS` whose estimate is within :data:`BUDGET` (the first tier needs
    no check of the request); over budget at every tier, the estimate at the last one. A walk
    stops once over budget (a policy's CEL is estimated when it is admitted, on the loop).
    """
    for tier, (items, size) in enumerate(TIERS):
        last = tier == len(TIERS) - 1
        walker = _Walker(serialized, Val(items, size, DATA), float("inf") if last else BUDGET)
        try:
            cost = int(walker.run())
        except _Over:
            continue
        if cost <= BUDGET or last:
            base = cost if cost <= threshold else int(_Walker(serialized, Val(1, 1, DATA)).run())
            return Estimate(cost, base=base) if tier == 0 else Estimate(cost, items, size, base, tuple(walker.read),
                                                                     tuple(walker.roots))
    raise AssertionError("the last tier always returns")


_TYPE_NAMES = frozenset(("bool", "bytes", "double", "dyn", "int", "list", "map", "null_type", "string", "type",
                         "uint"))
"""CEL's type denotations: identifiers that name a type, never a variable."""


def _string_constant(expr: bytes) -> str | None:
    """The text of a string literal expression, else None."""
    constant = dict(_parts(expr)).get(3) if expr else None
    if not isinstance(constant, bytes):
        return None
    text = dict(_parts(constant)).get(6)
    return text.decode() if isinstance(text, bytes) else None


@functools.lru_cache(maxsize=64)
def _root(serialized: bytes) -> bytes:
    """The expression of a checked program (every tier walks it)."""
    checked = _parts(dict(_parts(serialized))[2])  # Any.value is the CheckedExpr
    return bytes(next(v for n, v in checked if n == 4))


class _Walker:
    def __init__(self, serialized: bytes, data: Val, limit: float = float("inf")) -> None:
        self.root = _root(serialized)
        self.data = data
        self.limit = limit
        self.total = 0.0
        self.outside = 0.0  # the cost outside every loop
        self.own: dict[int, float] = {}  # what one iteration of each loop costs, nested loops aside
        self.costliest = 0.0  # the most any one iteration costs
        self.loops: list[tuple[int, float]] = []  # enclosing comprehensions: (id, iterations)
        self.parents: dict[int, int] = {}  # loop -> the loop whose element its list was read from
        self.one_step: int | None = None  # the loop whose step is being sized with one small element
        self.read: dict[Path, None] = {}  # request paths whose entries the cost depends on, in order
        self.roots: dict[str, None] = {}  # the variables read

    def measured(self, vals: list[Val]) -> None:
        """The cost depends on the entries of ``vals``: the request must be measured where they are."""
        for val in vals:
            self.read.update(dict.fromkeys(val.paths))

    def run(self) -> float:
        result = self.expr(self.root, {})
        return self.bound() + CONVERSION * result.bytes  # the result is converted to Python

    def bound(self) -> float:
        """The lesser of the two bounds on what the walk has charged so far (see module doc)."""
        return min(self.total, self.outside + MAX_ITERATIONS * self.costliest)

    def _add(self, amount: float, exclude: frozenset[int] = frozenset()) -> None:
        """Charge ``amount`` for each run of the current node (once per pass over the loops ``exclude``)."""
        self.total += amount * self._times(exclude)
        loop = next((lid for lid, _ in reversed(self.loops) if lid not in exclude), None)
        if loop is None:
            self.outside += amount
        else:
            own = self.own.get(loop, 0.0) + amount
            self.own[loop] = own
            self.costliest = max(self.costliest, own)

    def _times(self, exclude: frozenset[int] = frozenset()) -> float:
        product = 1.0
        for loop, n in self.loops:
            if loop not in exclude:
                product *= n
        return min(product, MAX_ITERATIONS) if self.loops else 1.0

    def _lineage(self, loop: int) -> frozenset[int]:
        """``loop`` and the loops whose elements its list was read from, one inside the other."""
        found = {loop}
        while loop in self.parents:
            loop = self.parents[loop]
            found.add(loop)
        return frozenset(found)

    def charge(self, cost: Any, args: list[Val]) -> None:
        """Charge ``cost(args)`` for every execution of the current node.

        Arguments that are elements of a request list cost their full size once per pass over
        that list, and their per-element size at every iteration.
        """
        if not args:  # identifiers, selections, literals: a constant cost
            self._add(cost(args))
            if self.bound() > self.limit:
                raise _Over
            return
        small = float(cost([a.small() for a in args]))
        self._add(small)
        for loop in {a.origin for a in args if a.origin >= 0}:
            big = float(cost([a if a.origin == loop else a.small() for a in args]))
            self._add(max(0.0, big - small), exclude=self._lineage(loop))
        if self.bound() > self.limit:
            raise _Over

    def expr(self, body: bytes, env: dict[str, Val]) -> Val:
        parts = _parts(body)
        node_id = next((v for n, v in parts if n == 2), 0)
        for kind, value in parts:
            if kind == 3:
                return self.const(value)
            if kind == 4:
                self.charge(lambda _: 1, [])
                name = dict(_parts(value)).get(1, b"").decode()
                if name in env:
                    return env[name]
                if name in _TYPE_NAMES:  # `type(x) == map`: a constant, not request data
                    return ONE
                # A variable; a compiler-made name (cel.@block's @index0) may hold any part of the request.
                root = EVERYWHERE if name.startswith("@") else name
                self.roots[root] = None
                return replace(self.data, paths=((root,),))
            if kind == 5:
                return self.select(value, env)
            if kind == 6:
                return self.call(value, env)
            if kind == 7:
                return self.list(value, env)
            if kind == 8:
                return self.map(value, env)
            if kind == 9:
                return self.comprehension(value, env, node_id)
        return ONE

    def const(self, body: bytes) -> Val:
        for kind, value in _parts(body):
            if kind in (6, 7):
                return Val(len(value), len(value))
            if kind in (3, 4) and isinstance(value, int):
                return Val(value if value < 2**63 else 0, 8, literal=True)
            if kind == 5 and isinstance(value, bytes):
                return Val(struct.unpack("<d", value)[0], 8)
        return ONE

    def select(self, body: bytes, env: dict[str, Val]) -> Val:
        parts = dict(_parts(body))
        operand = self.expr(parts.get(1, b""), env)
        self.charge(lambda _: 1, [])
        name = parts.get(2, b"").decode()
        known = operand.field(name)
        return known if known is not None else operand.at(name)

    def list(self, body: bytes, env: dict[str, Val]) -> Val:
        elements = [self.expr(v, env) for n, v in _parts(body) if n == 1]
        self.charge(lambda _: 10 + len(elements), [])
        return Val(len(elements), sum(e.bytes for e in elements) + 2, merge(*elements), element=join(elements),
                   listed=True)

    def map(self, body: bytes, env: dict[str, Val]) -> Val:
        vals: list[Val] = []
        named: list[tuple[str, Val]] | None = []
        for n, entry in _parts(body):
            if n == 2:
                parts = dict(_parts(entry))
                key, value = (self.expr(parts[k], env) if k in parts else ONE for k in (3, 4))
                vals += [key, value]
                name = _string_constant(parts.get(3, b""))
                if name is None or named is None:
                    named = None
                else:
                    named.append((name, value))
        self.charge(lambda _: 30 + len(vals), [])
        return Val(len(vals) // 2, sum(v.bytes for v in vals) + 2, merge(*vals),
                    fields=tuple(named) if named is not None else None)

    def call(self, body: bytes, env: dict[str, Val]) -> Val:
        parts = _parts(body)
        name = next((v.decode() for n, v in parts if n == 2), "")
        args = [self.expr(v, env) for n, v in parts if n in (1, 3)]
        if name in ("_[_]", "_[?_]", "_?._") and len(args) == 2:
            key = _string_constant([v for n, v in parts if n == 3][-1])  # the index: the last argument
            shaped = args[0].field(key) or args[0].element
            if shaped is None and args[0].fields:  # a map literal indexed by a computed key: any value
                shaped = join([v for _, v in args[0].fields])
            if shaped is None and args[1].origin >= 0 and args[0].origin != CONST:
                # Indexed by a loop's distinct indexes: one element per iteration, each once a pass.
                shaped = replace(args[0].at(ANY), origin=args[1].origin)
                if args[0].origin >= 0 and args[0].origin != args[1].origin and not args[0].listed:
                    self.parents.setdefault(args[1].origin, args[0].origin)  # a part of that loop's element
                if args[1].origin == self.one_step:  # the element the step reads by its index
                    shaped = shaped.small()
            if shaped is None and args[0].paths:
                shaped = args[0].at(ANY if key is None else key)
            if shaped is not None:
                self.charge(lambda _: 1, [])
                return shaped
        rule = FUNCTIONS.get(name, default)
        if rule not in LENGTH_FREE:
            self.measured(args)
        self.charge(lambda vals: rule(vals)[0], args)
        return rule(args)[1]

    def comprehension(self, body: bytes, env: dict[str, Val], node_id: int) -> Val:
        parts = dict(_parts(body))
        names = {k: parts.get(k, b"").decode() for k in (1, 3, 8)}
        source = self.expr(parts[2], env)
        init = self.expr(parts[4], env)
        n = min(source.items, MAX_ITERATIONS)
        self.measured([source])
        if n <= 0:  # cel.bind: an empty range, the bound value is the accumulator
            return self.expr(parts[7], {**env, names[3]: init})
        if source.distinct:  # each index once: what it selects is one element per iteration
            element = replace(source.element or ONE, origin=node_id)
        elif source.origin == CONST:
            element = source.element or Val(source.items, source.bytes)
        elif source.element is None:
            element = replace(source.at(ANY), origin=node_id)
        else:
            element = retag(source.element, node_id)
        if source.origin >= 0 and not source.listed:
            self.parents[node_id] = source.origin  # a part of that loop's element
        inner = {**env, names[1]: element if names[8] == "" else ONE}
        if names[8]:
            inner[names[8]] = element
        self.loops.append((node_id, n))
        accumulator = init  # all, exists, exists_one: a bool or a count
        if init.listed:  # map, filter: the list grows by what one step adds, n times
            saved = (self.total, self.outside, dict(self.own), self.costliest)
            step = self.expr(parts[6], {**inner, names[3]: init})
            one = step
            if names[8] == "" and element.origin >= 0:
                sizing, self.one_step = self.one_step, node_id
                one = self.expr(parts[6], {**inner, names[1]: element.small(), names[3]: init})
                self.one_step = sizing
            self.total, self.outside, self.own, self.costliest = saved
            # What the elements of a request list add sums to the list's size at most.
            grown = n * max(0.0, one.bytes - init.bytes) + max(0.0, step.bytes - one.bytes)
            origin = merge(init, step)
            accumulator = Val(init.items + n * max(0.0, step.items - init.items), init.bytes + grown,
                              DATA if origin >= 0 else origin, element=step.element, listed=True)
        scope = {**inner, names[3]: accumulator}
        self.expr(parts[5], scope)
        self.expr(parts[6], scope)
        self.loops.pop()
        return self.expr(parts[7], {**env, names[3]: accumulator})

