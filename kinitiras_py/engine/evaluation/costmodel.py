"""The cost model of CEL estimates: units, value bounds and what each function costs.

Only :mod:`.cost` uses this. Units follow Kubernetes (``k8s.io/apiserver/pkg/apis/cel``): about
100 ns each, 1 per identifier, field selection or call, 0.1 per character a string operation
traverses. Where cel-expr-python or our Python functions cost more, the factors below say what
was measured.

A value is bounded by :class:`Val`: its entries or characters, its serialized bytes, where
it comes from (a constant, request data, or one element of a request list a loop iterates), and
for request data the paths it was read from (``("object", "spec", "*")``, ``*`` any element), so
that a request can be checked where the program's cost depends on the length of what it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

FUNCTION_ITEMS = 1_000
"""The longest list ``range``, ``enumerate``, ``flatten`` and ``findAll`` may return."""
SCAN = 0.01  # per byte of size() or a conversion (measured ~1 ns per byte)
TRAVERSAL = 0.1  # per character a string operation reads (Kubernetes' StringTraversalCostFactor)
CONVERSION = 0.25  # per byte converted between CEL and Python (measured ~22 ns per byte)
COPY = 0.5  # per list element copied (measured ~32 ns in a map accumulator)
CALL = 50  # a call of one of our functions (measured 2-12 µs warm: escapeKey, quantity, scale)
QUANTITY = 300  # parsing a quantity (measured ~15-30 µs uncached); scale() does it twice and rounds

# Kinds of origin: a constant, request data, or an element of the request-data list of loop N.
CONST, DATA = -1, -2
ANY = "*"
"""A path segment for any element of a list or value of a map."""
EVERYWHERE = "**"
"""A path root for any list or map at any depth of any variable."""
Path = tuple[str, ...]


@dataclass(slots=True)
class Val:
    """An upper bound on a value: ``items`` (list/map entries or string characters) and ``bytes``.

    Never changed once made (not frozen: building frozen dataclasses slowed estimates down).
    """

    items: float
    bytes: float
    origin: int = CONST
    literal: bool = False  # an int whose value is at most ``items`` (a literal, a size())
    element: Val | None = None  # of a list built in the expression
    fields: tuple[tuple[str, Val], ...] | None = None  # of a map literal with string keys
    distinct: bool = False  # a list of distinct indexes (range): indexing with them visits each once
    listed: bool = False  # known to be a list (a literal, a loop's result): `+` copies handles, not bytes
    paths: tuple[Path, ...] = ()  # the request data it may be, when its ``items`` are the request's

    def small(self) -> Val:
        """The value as one of many list elements sharing the list's size (see module doc)."""
        return Val(1, 1, self.origin) if self.origin >= 0 else self

    def at(self, segment: str) -> Val:
        """Request data one level below this value (its items and bytes bound what it holds)."""
        return Val(self.items, self.bytes, self.origin, paths=tuple((*p, segment) for p in self.paths))

    def field(self, name: str | None) -> Val | None:
        """What selecting ``name`` gives, when the value's shape is known."""
        if self.fields is not None and name is not None:
            return next((v for k, v in self.fields if k == name), ONE)
        return None


def retag(val: Val, loop: int) -> Val:
    """An element of a list iterated by ``loop``: its per-element parts become that loop's."""
    fields = None if val.fields is None else tuple((k, retag(v, loop)) for k, v in val.fields)
    return replace(val, origin=loop if val.origin >= 0 else val.origin, fields=fields)


def paths(vals: list[Val]) -> tuple[Path, ...]:
    """The request paths any of ``vals`` may have been read from."""
    found = [v.paths for v in vals if v.paths]
    if len(found) <= 1:  # most values: none, or one value's own
        return found[0] if found else ()
    return tuple(dict.fromkeys(p for f in found for p in f))


def join(vals: list[Val]) -> Val | None:
    """A bound on each of ``vals`` (the elements of one list)."""
    if not vals:
        return None
    first = vals[0]
    if all(v is first for v in vals):  # one element, or the same bound repeated: itself
        return replace(first, distinct=False) if first.distinct else first
    keys = {tuple(k for k, _ in v.fields) for v in vals if v.fields is not None}
    fields = None
    if len(keys) == 1 and all(v.fields is not None for v in vals):
        fields = tuple((k, join([dict(v.fields or ())[k] for v in vals]) or ONE) for k in keys.pop())
    filled = [v for v in vals if v.items > 0]  # an empty list says nothing of the elements
    elements = [v.element for v in filled if v.element is not None]
    origins = {v.origin for v in vals}
    # Elements of different loops' lists are each still one element: iterating retags them.
    origin = max(origins) if min(origins) >= 0 else merge(*vals)
    return Val(max(v.items for v in vals), max(v.bytes for v in vals), origin,
               element=join(elements) if elements and len(elements) == len(filled) else None, fields=fields,
               listed=all(v.listed for v in vals), paths=paths(vals))


ONE = Val(1, 8)


def merge(*vals: Val) -> int:
    """The origin of a value computed from ``vals``: one loop's element, else data, else constant."""
    origins = {v.origin for v in vals if v.origin != CONST}
    if not origins:
        return CONST
    return origins.pop() if len(origins) == 1 else DATA


# -- function costs: (cost, result) from argument bounds -----------------------------------------


def _traverse(vals: list[Val]) -> tuple[float, Val]:
    return 1 + TRAVERSAL * sum(v.bytes for v in vals), Val(1, 8)


def _size(vals: list[Val]) -> tuple[float, Val]:
    return _scan(vals)[0], Val(vals[0].items if vals else 1, 8, literal=True)


def _scan(vals: list[Val]) -> tuple[float, Val]:
    """Counting code points or checking UTF-8 (``size``, conversions): ~1 ns a byte (measured)."""
    return 1 + SCAN * sum(v.bytes for v in vals), Val(1, 8)


def _prefix(vals: list[Val]) -> tuple[float, Val]:
    """startsWith, endsWith: as long as the argument; comparisons: the shorter operand."""
    return 1 + TRAVERSAL * min(v.bytes for v in vals), Val(1, 8)


def _member(vals: list[Val]) -> tuple[float, Val]:
    needle, haystack = [*vals, ONE, ONE][:2]
    return 1 + haystack.items * max(1.0, TRAVERSAL * min(needle.bytes, haystack.bytes)), Val(1, 8)


def _concat(vals: list[Val]) -> tuple[float, Val]:
    if all(v.bytes <= 8 and not v.listed for v in vals):  # numbers (a size() counts as many items as it says)
        return 1, Val(sum(v.items for v in vals), 8, literal=all(v.literal for v in vals))
    # Lists copy their elements, strings their characters (dyn operands could be either).
    items, size = sum(v.items for v in vals), sum(v.bytes for v in vals)
    listed = any(v.listed for v in vals)
    filled = [v for v in vals if v.items > 0]  # `[] + l`: the empty list says nothing of the elements
    elements = [v.element for v in filled if v.element is not None]
    return 1 + COPY * items + (0 if listed else SCAN * size), Val(
        items, size, merge(*vals), element=join(elements) if len(elements) == len(filled) else None, listed=listed,
        paths=paths(vals))


def _pass(vals: list[Val]) -> tuple[float, Val]:
    """dyn(), optionals, ``c ? a : b``: a value handed on, not copied."""
    if len(vals) == 3:  # the conditional: either branch
        return 1, join(vals[1:]) or ONE
    if len(vals) == 2:  # orValue, or: the value or the alternative
        return 1, join(vals) or ONE
    return 1, vals[0] if vals else ONE


def _same(vals: list[Val]) -> tuple[float, Val]:
    """A function returning something as large as its receiver (``lowerAscii``, ``replace``...)."""
    largest = max(vals, key=lambda v: v.bytes) if vals else ONE
    return 1 + TRAVERSAL * sum(v.items for v in vals), Val(largest.items, largest.bytes, merge(*vals),
                                                           paths=paths(vals))


def _sum(vals: list[Val]) -> tuple[float, Val]:
    """``l.sum()``: one pass over the list, a number."""
    return 1 + TRAVERSAL * sum(v.items for v in vals), Val(1, 8)


def _index(vals: list[Val]) -> tuple[float, Val]:
    return 1, vals[0] if vals else ONE


def _cheap(_vals: list[Val]) -> tuple[float, Val]:
    return 1, ONE


def _regex(vals: list[Val]) -> tuple[float, Val]:
    # RE2 is linear in the text; Kubernetes charges text length x pattern length x 0.25.
    text, pattern = [*vals, ONE, ONE][:2]
    return 1 + 0.25 * text.bytes * max(1.0, pattern.bytes / 10), Val(1, 8)


def _converted(vals: list[Val], result: Val) -> tuple[float, Val]:
    return CALL + CONVERSION * (sum(v.bytes for v in vals) + result.bytes), result


def default(vals: list[Val]) -> tuple[float, Val]:
    """One of our functions without a rule of its own: a result as large as its arguments."""
    size = sum(v.bytes for v in vals)
    return _converted(vals, Val(min(size, FUNCTION_ITEMS), size, merge(*vals)))


def _range(vals: list[Val]) -> tuple[float, Val]:
    # A literal beyond FUNCTION_ITEMS fails at run time; its estimate says what it would cost.
    n = vals[0].items if vals and vals[0].literal else FUNCTION_ITEMS
    return _converted(vals, Val(n, 8 * n, element=Val(1, 8), distinct=True, listed=True))


def _listed(vals: list[Val]) -> tuple[float, Val]:
    """enumerate, flatten, findAll: up to FUNCTION_ITEMS elements, as large as the input."""
    size = sum(v.bytes for v in vals)
    return _converted(vals, Val(FUNCTION_ITEMS, 2 * size + 32 * FUNCTION_ITEMS, merge(*vals), listed=True))


def _scalar(vals: list[Val]) -> tuple[float, Val]:
    return _converted(vals, Val(1, 64))


def _printed(_vals: list[Val]) -> tuple[float, Val]:
    # Declared for int, double and bool only: its argument is one number or boolean.
    return CALL + CONVERSION * 128, Val(1, 64)


def _quantity(vals: list[Val]) -> tuple[float, Val]:
    cost, result = _scalar(vals)
    return cost + QUANTITY * len([v for v in vals if v.items != 0]), result


Rule = Callable[[list[Val]], tuple[float, Val]]

FUNCTIONS: dict[str, Rule] = {
    "size": _size,
    **dict.fromkeys(("int", "uint", "double", "string", "bytes", "bool"), _scan),
    **dict.fromkeys(("contains", "indexOf", "lastIndexOf", "charAt", "base64.encode", "base64.decode", "isSorted"),
                    _traverse),
    **dict.fromkeys(("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "startsWith", "endsWith"), _prefix),
    "@in": _member,
    **dict.fromkeys(("_+_",), _concat),
    **dict.fromkeys(("lowerAscii", "upperAscii", "replace", "split", "substring", "trim", "reverse",
                     "join", "strings.quote", "format", "min", "max", "sort"), _same),
    "sum": _sum,
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
                     "workload.podSpecPath", "kubemod.compare"), _scalar),
    "kubemod.printed": _printed,
}


LENGTH_FREE: frozenset[Rule] = frozenset((_traverse, _scan, _prefix, _pass, _index, _cheap, _regex, default, _range,
                                          _listed, _scalar, _quantity, _printed))
"""Rules whose cost and result do not depend on the entries of request data they are given (bytes
are checked separately; ``_pass`` and ``_index`` hand the value on, paths included): the request
paths of the arguments of any other rule are measured before an evaluation."""
