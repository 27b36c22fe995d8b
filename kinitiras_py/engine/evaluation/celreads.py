"""Which parts of its variables a CEL program reads, and those parts alone (a workaround module).

Only :mod:`.cel` uses this. cel-expr-python converts a variable whole on the first evaluation
that touches it (about 95 µs for a 9.5 KB Pod), and a converted value cannot be handed to a
later activation. A rule reading ``object.metadata.labels`` need not pay for the pod spec, and a
rule reading the pod spec need not be converted again because an earlier rule added a label:
:func:`reads` finds, in the checked AST, the paths at which a program reads each variable, and
:func:`project` keeps only those parts of a value. Evaluating the projection gives the same
result as evaluating the whole value, since every access of the program lies inside it.

A path follows constant field names from a variable: ``object.spec``, ``object.?spec``,
``object["spec"]``, ``object[?"spec"]`` and ``has(object.spec)`` all read ``("spec",)``;
wherever else a variable's value is used (an argument, a loop's range, a comparison, a
computed index), the value at the path reached so far is read whole.
"""

from __future__ import annotations

from typing import Any

from kinitiras_py.engine.evaluation.celcheck import fields

Path = tuple[str, ...]
Reads = tuple[tuple[str, tuple[Path, ...]], ...]
"""Per variable read (by name, sorted): its paths, none a prefix of another; ``((),)`` is all of it."""

# Expr fields: const 3, ident 4 {name 1}, select 5 {operand 1, field 2}, call 6 {target 1,
# function 2, args 3}, list 7, map 8, comprehension 9 {iter_var 1, range 2, accu_var 3, init 4,
# condition 5, step 6, result 7, iter_var2 8}. Constant: string 6.
_INDEXES = ("_[_]", "_[?_]", "_?._")


def reads(serialized: bytes, variables: tuple[str, ...]) -> Reads | None:
    """The paths at which the program (``Expression.serialize()``) reads each of ``variables``;
    None when it may read anything (a compiler-made ``@`` name, which could hold any value)."""
    checked = fields(dict(fields(serialized))[2])  # Any.value is the CheckedExpr
    found: dict[str, set[Path]] = {}
    pending: list[tuple[bytes, frozenset[str]]] = [(v, frozenset()) for n, v in checked if n == 4]
    while pending:
        body, local = pending.pop()
        chain = _chain(body, local, variables)
        if chain is not None:
            name, path, keys = chain
            found.setdefault(name, set()).add(path)
            pending.extend((key, local) for key in keys)
            continue
        for kind, value in fields(body):
            if kind == 4:
                name = dict(fields(value)).get(1, b"").decode()
                if name.startswith("@") and name not in local:
                    return None
            elif kind in (5, 6, 7):
                pending.extend((v, local) for n, v in fields(value) if n in _CHILDREN[kind])
            elif kind == 8:
                pending.extend((v, local) for n, entry in fields(value) if n == 2
                               for k, v in fields(entry) if k in (3, 4))
            elif kind == 9:
                parts = fields(value)
                inner = local | {v.decode() for n, v in parts if n in (1, 3, 8)}
                pending.extend((v, local if n in (2, 4) else inner) for n, v in parts if n in (2, 4, 5, 6, 7))
    return tuple((name, _minimal(paths)) for name, paths in sorted(found.items()))


_CHILDREN = {5: (1,), 6: (1, 3), 7: (1,)}


def _chain(body: bytes, local: frozenset[str], variables: tuple[str, ...]
           ) -> tuple[str, Path, list[bytes]] | None:
    """(variable, path, index expressions) when ``body`` is a variable followed by constant field
    accesses, else None. The index expressions are the constants (walked like any other)."""
    path: list[str] = []
    keys: list[bytes] = []
    node = body
    while True:
        parts = dict(fields(node))
        if 4 in parts:
            name = dict(fields(parts[4])).get(1, b"").decode()
            if name in local or name not in variables:
                return None
            return name, tuple(reversed(path)), keys
        if 5 in parts:
            select = dict(fields(parts[5]))
            path.append(select.get(2, b"").decode())
            node = select.get(1, b"")
            continue
        if 6 in parts:
            call = fields(parts[6])
            function = next((v.decode() for n, v in call if n == 2), "")
            args = [v for n, v in call if n == 3]
            key = _string_constant(args[1]) if function in _INDEXES and len(args) == 2 else None
            if key is None:
                return None
            path.append(key)
            keys.append(args[1])
            node = args[0]
            continue
        return None


def _string_constant(body: bytes) -> str | None:
    constant = dict(fields(body)).get(3)
    if not isinstance(constant, bytes):
        return None
    value = dict(fields(constant)).get(6)
    return value.decode() if isinstance(value, bytes) else None


def _minimal(paths: set[Path]) -> tuple[Path, ...]:
    """``paths`` without those below another one, sorted."""
    kept: list[Path] = []
    for path in sorted(paths, key=len):
        if not any(path[:len(p)] == p for p in kept):
            kept.append(path)
    return tuple(sorted(kept))


def project(value: Any, paths: tuple[Path, ...]) -> tuple[Any, tuple[Path, ...]]:
    """``value`` with only what lies on ``paths`` (maps rebuilt on the way, in their own key order),
    and where the projection depends on ``value``: each path cut at the first value that is not a
    map (taken whole) or the first missing key. A change of ``value`` at none of those paths, nor
    above or below one, leaves the projection as it is."""
    if () in paths or type(value) is not dict:
        return value, ((),)
    trie: dict[str, Any] = {}
    for path in paths:
        node = trie
        for segment in path[:-1]:
            child = node.setdefault(segment, {})
            if child is None:
                break
            node = child
        else:
            node[path[-1]] = None
    taken: list[Path] = []
    return _take(value, trie, (), taken), tuple(taken)


def _take(value: dict[str, Any], trie: dict[str, Any], at: Path, taken: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in value:
        if key not in trie:
            continue
        child, below = value[key], trie[key]
        if below is None or type(child) is not dict:
            out[key] = child
            taken.append((*at, key))
        else:
            out[key] = _take(child, below, (*at, key), taken)
    taken.extend((*at, key) for key in trie if key not in value)
    return out


def touches(taken: tuple[Path, ...], changed: list[tuple[str, ...]]) -> bool:
    """Whether a change at any of ``changed`` lies on, above or below one of ``taken``."""
    for change in changed:
        for path in taken:
            n = min(len(change), len(path))
            if change[:n] == path[:n]:
                return True
    return False
