"""Which parts of its variables a CEL program reads, and those parts alone (a workaround module).

Only :mod:`.cel` uses this. cel-expr-python converts a variable whole on the first evaluation
that touches it (about 95 µs for a 9.5 KB Pod), and a converted value cannot be handed to a
later activation. A rule reading ``object.metadata.labels`` need not pay for the pod spec, a
rule reading the containers' resources need not pay for their environment, and a rule reading
the pod spec need not be converted again because an earlier rule added a label: :func:`reads`
finds, in the checked AST, where a program reads each variable and how, :func:`project` keeps
only those parts of a value. Evaluating the projection gives the same result as evaluating the
whole value, since every access of the program lies inside it.

How a program reads
    A path follows field names and indexes from a variable (``*``: any element or value, for a
    computed index or a loop's element), through names bound by ``cel.bind`` (and the macros
    built on it: ``optMap``, ``optFlatMap``) and through what passes a value on unchanged
    (``orValue``, ``value()``, ``dyn``, ``optional.of``, the branches of ``c ? a : b``). At the
    end of a path the value is read in one of three ways: its **kind** only (``type(x)``,
    ``has(x.f)``, ``x.hasValue()``), its **size** (``size(x)``, or a loop over it: every element
    is visited, though perhaps not read), or **all** of it (anything else: compared, handed to
    a function, put in a list or map). The walker fails closed: a compiler-made ``@`` name
    outside a loop, a name that is neither a variable, a bound name nor a type, or a kind of
    node it does not know could hold anything, and such a program reads everything.

How a value is cut
    Maps keep the keys read (all of them under a size read or ``*``), lists every element under
    a size read or ``*`` and none under a kind read; what nothing reads of an element is
    ``null``, of a map or list read for its kind only, an empty one. :func:`project` also says
    where the projection depends on the value, for :func:`touches`: everywhere at and below a
    part kept whole and a map keeping all its keys (a key added to an empty map matters); only
    at the path itself for a map looked up by named keys (each key noted on its own) and for a
    list (a change of its length notes the list itself, :mod:`.patchlog`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinitiras_py.base import identity
from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.engine.evaluation.celcheck import fields

Path = tuple[str, ...]
ANY = "*"
"""A path segment for any element of a list or value of a map."""
Read = tuple[Path, str]
"""A path and how the value there is read: ``all``, ``size`` or ``kind``."""
Reads = tuple[tuple[str, tuple[Read, ...]], ...]
"""Per variable read (by name, sorted): its reads, sorted; ``(((), "all"),)`` is all of it."""
Taken = tuple[tuple[Path, bool], ...]
"""Where a projection depends on the value: at a path and (True) below it, or (False) only on
what is at the path itself (its kind, its length)."""

_Sources = frozenset[tuple[str, Path]]
_NONE: _Sources = frozenset()
_INDEXES = ("_[_]", "_[?_]", "_?._")
_PASSING = ("value", "dyn", "optional.of")
_KIND_OF = ("type", "hasValue")
_TYPE_NAMES = frozenset(("bool", "bytes", "double", "dyn", "int", "list", "map", "null_type", "optional_type",
                         "string", "type", "uint"))
"""Names that denote a type (``type(x) == map``), the only names besides variables and those a
program binds that read nothing."""


class _Anything(KinitirasError):
    """The program may read any part of any variable."""


def reads(serialized: bytes, variables: tuple[str, ...]) -> Reads | None:
    """How the program (``Expression.serialize()``) reads each of ``variables``; None when it
    may read anything."""
    checked = fields(dict(fields(serialized))[2])  # Any.value is the CheckedExpr
    reader = _Reader(variables)
    try:
        for n, expr in checked:
            if n == 4:
                reader.use(expr, {})
    except _Anything:
        return None
    grouped: dict[str, set[Read]] = {}
    for name, path, how in reader.found:
        grouped.setdefault(name, set()).add((path, how))
    return tuple((name, _minimal(_widened(found))) for name, found in sorted(grouped.items()))


def _widened(found: set[Read]) -> set[Read]:
    """``found`` with a map read whole where a program only looks it up by constant keys (its
    kind, then some of its keys, nothing deeper): ``labels[?"a"]`` and ``labels[?"b"]`` then read
    the same, so programs differing only in the keys share one conversion (maps looked up so are
    small, as a rule)."""
    below: dict[Path, bool] = {}  # whether every read below a path is a lookup of one of its keys
    for path, _ in found:
        for depth in range(len(path)):
            parent = path[:depth]
            below[parent] = below.get(parent, True) and depth == len(path) - 1 and path[-1] != ANY
    lookups = {path for path, how in found if how == "kind" and below.get(path)}
    return {(path[:-1], "all") if path and path[:-1] in lookups else (path, how) for path, how in found}


def _minimal(found: set[Read]) -> tuple[Read, ...]:
    """``found`` without the reads inside a path read whole, sorted."""
    whole = [path for path, how in found if how == "all"]
    return tuple(sorted((path, how) for path, how in found
                        if not any(path[:len(w)] == w and (how != "all" or len(w) < len(path)) for w in whole)))


class _Reader:
    """Walks a checked AST, noting the reads of :data:`variables` (see the module docstring).

    Expr fields: const 3, ident 4 {name 1}, select 5 {operand 1, field 2, test_only 3}, call 6
    {target 1, function 2, args 3}, list 7 {elements 1}, map 8 {entries 2 {key 3, value 4}},
    comprehension 9 {iter_var 1, range 2, accu_var 3, init 4, condition 5, step 6, result 7,
    iter_var2 8}.
    """

    def __init__(self, variables: tuple[str, ...]) -> None:
        self.variables = variables
        self.found: set[tuple[str, Path, str]] = set()

    def use(self, expr: bytes, env: dict[str, _Sources], how: str = "all") -> None:
        """``expr`` is evaluated and its value read ``how``."""
        self.found.update((name, path, how) for name, path in self.value(expr, env))

    def value(self, expr: bytes, env: dict[str, _Sources]) -> _Sources:
        """Note what evaluating ``expr`` reads; return the request data its value may be."""
        for kind, body in fields(expr):
            if kind == 4:
                name = dict(fields(body)).get(1, b"").decode()
                if name in env:
                    return env[name]
                if name in self.variables:
                    return frozenset({(name, ())})
                if name in _TYPE_NAMES or name.startswith("google.protobuf."):
                    return _NONE
                raise _Anything  # a compiler-made @ name, or one this walker does not know
            if kind == 5:
                select = dict(fields(body))
                found = self.value(select.get(1, b""), env)
                name = select.get(2, b"").decode()
                if select.get(3):  # has(x.f): whether f is there
                    self.found.update((n, (*p, name), "kind") for n, p in found)
                    return _NONE
                return frozenset((n, (*p, name)) for n, p in found)
            if kind == 6:
                return self.call(body, env)
            if kind == 7:
                for n, element in fields(body):
                    if n == 1:
                        self.use(element, env)
                return _NONE
            if kind == 8:
                for n, entry in fields(body):
                    if n == 2:
                        for k, part in fields(entry):
                            if k in (3, 4):
                                self.use(part, env)
                return _NONE
            if kind == 9:
                return self.comprehension(body, env)
            if kind not in (2, 3):  # neither the id nor a constant: a kind of node not known here
                raise _Anything
        return _NONE

    def call(self, body: bytes, env: dict[str, _Sources]) -> _Sources:
        parts = fields(body)
        function = next((v.decode() for n, v in parts if n == 2), "")
        operands = [v for n, v in parts if n == 1] + [v for n, v in parts if n == 3]
        if function in _INDEXES and len(operands) == 2:
            found = self.value(operands[0], env)
            key = _string_constant(operands[1])
            if key is None:
                self.use(operands[1], env)
                key = ANY
            return frozenset((n, (*p, key)) for n, p in found)
        if function in ("orValue", "or") and len(operands) == 2:
            return self.value(operands[0], env) | self.value(operands[1], env)
        if function in _PASSING and len(operands) == 1:
            return self.value(operands[0], env)
        if function in _KIND_OF and len(operands) == 1:
            self.use(operands[0], env, "kind")
            return _NONE
        if function == "size" and len(operands) == 1:
            self.use(operands[0], env, "size")
            return _NONE
        if function == "_?_:_" and len(operands) == 3:
            self.use(operands[0], env)
            return self.value(operands[1], env) | self.value(operands[2], env)
        for operand in operands:
            self.use(operand, env)
        return _NONE

    def comprehension(self, body: bytes, env: dict[str, _Sources]) -> _Sources:
        parts = dict(fields(body))
        names = {k: parts.get(k, b"").decode() for k in (1, 3, 8)}
        source = parts.get(2, b"")
        if _empty_list(source):  # cel.bind(accu, init, result): the loop never runs
            return self.value(parts.get(7, b""), {**env, names[3]: self.value(parts.get(4, b""), env)})
        found = self.value(source, env)
        self.found.update((n, p, "size") for n, p in found)  # every element (or key) is visited
        element = frozenset((n, (*p, ANY)) for n, p in found)
        self.use(parts.get(4, b""), env)
        inner = {**env, names[1]: element, names[3]: _NONE}
        if names[8]:
            inner[names[8]] = element
        for k in (5, 6):
            self.use(parts.get(k, b""), inner)
        self.use(parts.get(7, b""), {**env, names[3]: _NONE})
        return _NONE


def _empty_list(expr: bytes) -> bool:
    body = dict(fields(expr)).get(7)
    return isinstance(body, bytes) and not any(n == 1 for n, _ in fields(body))


def _string_constant(body: bytes) -> str | None:
    constant = dict(fields(body)).get(3)
    if not isinstance(constant, bytes):
        return None
    value = dict(fields(constant)).get(6)
    return value.decode() if isinstance(value, bytes) else None


# -- projection ----------------------------------------------------------------------------------

class _Node:
    """How the value at ``path`` is read, and the nodes below it (each named one already
    merged with ``every``, the node for any element or value)."""

    __slots__ = ("as_map", "children", "deep", "every", "named", "path", "shallow", "size", "whole")

    def __init__(self, path: Path, how: set[str], below: dict[str, _Node]) -> None:
        self.path = path
        self.whole = "all" in how
        self.size = "size" in how
        # The entries a projection notes for this node (see _take), made once: a projection
        # collects them by identity instead of hashing path tuples for every value it visits.
        self.deep: tuple[Path, bool] = (path, True)
        self.shallow: tuple[Path, bool] = (path, False)
        self.every = below.get(ANY)
        # A map keeps every key when read for its size or through any key (a computed key, a
        # loop): it then depends on a key added below it, even to an empty map. Looked up by
        # named keys only, it depends on its kind here and on each named key (noted apart).
        self.as_map = self.deep if self.size or self.every is not None else self.shallow
        self.named = any(key != ANY for key in below)
        self.children = {key: _merged(node, self.every) for key, node in below.items() if key != ANY}


def _merged(a: _Node, b: _Node | None) -> _Node:
    if b is None:
        return a
    how = {"all"} if a.whole or b.whole else set()
    how |= {"size"} if a.size or b.size else set()
    below = dict(b.children)
    if b.every is not None:
        below[ANY] = b.every
    for key, node in a.children.items():
        below[key] = _merged(node, below.get(key))
    if a.every is not None:
        below[ANY] = _merged(a.every, below.get(ANY))
    return _Node(a.path, how, below)


@identity.by_identity(4096)  # programs' reads are interned: hashing them would cost more than the look-up
def _trie(found: tuple[Read, ...]) -> _Node:
    """``found`` as a tree of nodes, built once per program (and shared by those reading alike)."""
    def build(path: Path) -> _Node:
        depth = len(path)
        hows = {how for p, how in found if p == path}
        segments = dict.fromkeys(p[depth] for p, _ in found if len(p) > depth and p[:depth] == path)
        return _Node(path, hows, {segment: build((*path, segment)) for segment in segments})

    return build(())


def project_all(variables: Mapping[str, Any], reads: Reads | None, names: tuple[str, ...]
                ) -> tuple[dict[str, Any], dict[str, Taken]]:
    """The parts of ``variables`` that ``reads`` names (all of ``names`` for None; a variable
    read but not supplied is null), and for each variable where they depend on it."""
    whole: Taken = (((), True),)
    if reads is None:
        return {name: variables.get(name) for name in names}, dict.fromkeys(names, whole)
    data: dict[str, Any] = {}
    taken: dict[str, Taken] = {}
    for name, found in reads:
        if name in variables:
            data[name], taken[name] = project(variables[name], found)
        else:
            data[name], taken[name] = None, whole
    return data, taken


def project(value: Any, found: tuple[Read, ...]) -> tuple[Any, Taken]:
    """``value`` with only the parts ``found`` reads, and where that depends on ``value``.

    A change of ``value`` at a path that none of the returned paths is on, above or (for the
    deep ones) below leaves the projection as it is (:func:`touches`)."""
    taken: dict[int, tuple[Path, bool]] = {}
    part = _take(value, _trie(found), taken)
    return part, tuple(taken.values())


def _take(value: Any, node: _Node, taken: dict[int, tuple[Path, bool]]) -> Any:
    kind = type(value)
    if node.whole or (kind is not dict and kind is not list):
        taken[id(node.deep)] = node.deep
        return value
    every = node.every
    if kind is list:
        if node.named:  # a list indexed by a name: an error either way
            taken[id(node.deep)] = node.deep
            return value
        taken[id(node.shallow)] = node.shallow  # an element added or removed notes the list itself
        if every is None:
            return [None] * len(value) if node.size else []
        return [_take(item, every, taken) for item in value]
    # A map read for its size depends on its keys: on every change below it.
    taken[id(node.as_map)] = node.as_map
    out: dict[str, Any] = {}
    if every is None and not node.size:
        for key, child in node.children.items():  # no loop over the map reads it: its order is free
            if key in value:
                out[key] = _take(value[key], child, taken)
            else:
                taken[id(child.deep)] = child.deep
        return out
    for key, item in value.items():
        found = node.children.get(key, every)
        out[key] = None if found is None else _take(item, found, taken)
    for key, child in node.children.items():
        if key not in value:
            taken[id(child.deep)] = child.deep
    return out


def reaches(reads: Reads | None, name: str, path: Path) -> bool:
    """Whether a program reading ``reads`` may depend on what lies at ``path`` in the variable
    ``name``: it reads there or below, or on the way there reads more than a value's kind (a
    map's size or keys, or all of it). None reads everything."""
    if reads is None:
        return True
    for variable, found in reads:
        if variable != name:
            continue
        for read, how in found:
            if all(r in (ANY, p) for r, p in zip(read, path, strict=False)) and (
                    len(read) >= len(path) or how != "kind"):
                return True
    return False


def touches(taken: Taken, changed: list[tuple[str, ...]]) -> bool:
    """Whether a change at any of ``changed`` may change a projection that depends on ``taken``."""
    for change in changed:
        if not change:
            return True
        first, size = change[0], len(change)
        for path, deep in taken:
            if path and path[0] != first and path[0] != ANY:  # most paths part at the first segment
                continue
            if size > len(path) and not deep:
                continue
            if all(p in (ANY, c) for p, c in zip(path, change, strict=False)):
                return True
    return False
