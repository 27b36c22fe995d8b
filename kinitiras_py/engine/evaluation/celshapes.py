"""A checked CEL program read against the declared shapes of its variables, when a policy is
admitted: what can never succeed is found then, not on every object.

The environment declares every variable ``dyn`` (:mod:`.cel`), so the CEL checker cannot know
that ``request`` has four fields, which names ``params`` holds or that ``namespaceObject`` is
null for cluster-scoped objects. Kubernetes declares its admission policies' ``request`` and
``params`` with their types and refuses an undefined field when the policy is written; this
module does the same on the checked AST (:mod:`.celcheck` reads it):

* ``request.f`` or ``request['f']`` where ``f`` is none of its fields, ``params.x`` or
  ``params['x']`` where ``x`` is none of the rule's parameters, anywhere in the program, as
  Kubernetes' type check does (``has()`` and ``.?`` only test: they are left alone);
* reading a field of ``namespaceObject`` where it is always null, wherever the read is made on
  every evaluation;
* a subexpression made of literals only (``[][0]``, ``quantity('x')``) that fails, wherever
  it is evaluated on every evaluation: it is evaluated once, now (constant folding).

"Evaluated on every evaluation" follows CEL's error propagation: an error reaches the result
through every call but ``&&``, ``||``, the branches of ``?:``, ``or``/``orValue`` and a
comprehension's loop (its range, its initial value and its result are always evaluated).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from kinitiras_py.base.errors import CelCompileError, CelEvalError
from kinitiras_py.engine.evaluation import cel, celcheck


@dataclass(frozen=True)
class Shapes:
    """What the variables a program may read are known to hold."""

    request: tuple[str, ...]
    """The fields of ``request``."""
    params: frozenset[str]
    """The names ``params`` can hold (the rule's references and the policy's valueRefs)."""
    namespace: bool
    """Whether ``namespaceObject`` can be other than null."""


_INFIX = {"_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "_==_": "==", "_!=_": "!=", "_<_": "<",
          "_<=_": "<=", "_>_": ">", "_>=_": ">=", "_&&_": "&&", "_||_": "||", "@in": "in"}
_PREFIX = {"!_": "!", "-_": "-"}
_LAZY = frozenset({"_&&_", "_||_", "@not_strictly_false", "or", "orValue"})
"""Calls whose arguments (all of them, or beyond the target) need not be evaluated."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_READS = frozenset({"_[_]", "_[?_]", "_?._"})
"""Calls that read a member of their first argument."""


@dataclass
class _Walk:
    """One walk's findings."""

    shapes: Shapes
    problems: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)
    """CEL text of the constant subexpressions evaluated on every evaluation."""

    def note(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)


@dataclass(frozen=True)
class _Node:
    """A subexpression: its CEL text when it is made of literals only (None otherwise), and the
    variable it is, when it is an identifier naming one."""

    text: str | None = None
    variable: str | None = None
    literal: Any = None
    """The value of a string constant (to read ``x.?f`` back), else None."""


@functools.lru_cache(maxsize=4096)
def problems(program: cel.Program, shapes: Shapes) -> tuple[str, ...]:
    """Why ``program`` fails on every evaluation, or can never read what it reads, given ``shapes``."""
    checked = celcheck.fields(dict(celcheck.fields(program.checked()))[2])
    walk = _Walk(shapes)
    for n, expr in checked:
        if n == 4:
            _visit(expr, walk, True, frozenset())
    for text in walk.constants:
        failure = _failure(text)
        if failure is not None:
            walk.note(f"the constant {text} fails on every evaluation: {failure}")
    return tuple(walk.problems)


def _failure(text: str) -> str | None:
    """The error evaluating the constant CEL ``text`` gives, or None. Compared with itself, its
    value need not be one JSON can hold (an optional, a duration)."""
    try:
        program = cel.compile_program(f"({text}) == ({text})")
    except CelCompileError:
        return None  # not ours to judge: the program itself compiled
    try:
        program.evaluate({}, remember=False)
    except CelEvalError as e:
        return str(e)
    return None


def _visit(expr: bytes, walk: _Walk, strict: bool, shadowed: frozenset[str]) -> _Node:
    """Walk ``expr`` (an Expr message); ``strict``: it is evaluated on every evaluation."""
    node = _Node()
    start = len(walk.constants)
    for kind, body in celcheck.fields(expr):
        if kind == 3:
            node = _constant(body)
        elif kind == 4:
            name = dict(celcheck.fields(body)).get(1, b"").decode()
            node = _Node(variable=None if name in shadowed else name)
        elif kind == 5:
            node = _select(dict(celcheck.fields(body)), walk, strict, shadowed)
        elif kind == 6:
            node = _call(celcheck.fields(body), walk, strict, shadowed)
        elif kind == 7:
            node = _list(celcheck.fields(body), walk, strict, shadowed)
        elif kind == 8:
            node = _map(celcheck.fields(body), walk, strict, shadowed)
        elif kind == 9:
            _comprehension(dict(celcheck.fields(body)), walk, strict, shadowed)
        if node.text is not None and kind != 3:  # literals only, and more than one: keep the largest
            del walk.constants[start:]
            if strict:
                walk.constants.append(node.text)
    return node


def _constant(body: bytes) -> _Node:
    for kind, value in celcheck.fields(body):
        if kind == 1:
            return _Node("null")
        if kind == 2:
            return _Node("true" if value else "false")
        if kind == 3:
            number = value - (1 << 64) if value >= 1 << 63 else value
            return _Node(f"({number})" if number < 0 else str(number))
        if kind == 4:
            return _Node(f"{value}u")
        if kind == 5:
            double = struct.unpack("<d", value)[0]
            return _Node(f"({double!r})" if math.isfinite(double) else None)
        if kind == 6:
            text = value.decode()
            return _Node(orjson.dumps(text).decode(), literal=text)
        if kind == 7:
            return _Node('b"' + "".join(f"\\x{b:02x}" for b in value) + '"')
    return _Node()


def _read(variable: str | None, member: object, walk: _Walk, strict: bool, test: bool) -> None:
    """``variable`` (when the operand is one) has ``member`` read: check it against the shapes.
    ``test``: only whether it is there is asked (``has()``, ``.?``, ``[?]``)."""
    shapes = walk.shapes
    if variable == "namespaceObject" and strict and not shapes.namespace:
        walk.note("namespaceObject is null for every object the policy selects (they are all cluster-scoped), "
                  "and reading a field of null fails; test namespaceObject != null first")
    if test or not isinstance(member, str):
        return
    if variable == "request" and member not in shapes.request:
        walk.note(f"request has no field {member!r}; it has {', '.join(shapes.request)}")
    if variable == "params" and member not in shapes.params:
        names = ", ".join(sorted(shapes.params)) or "none"
        walk.note(f"params has no {member!r}: the rule's parameters (its references and the policy's "
                  f"spec.valueRefs) are {names}")


def _select(parts: dict[int, Any], walk: _Walk, strict: bool, shadowed: frozenset[str]) -> _Node:
    operand = _visit(parts.get(1, b""), walk, strict, shadowed)
    member = parts.get(2, b"").decode()
    test = bool(parts.get(3))
    _read(operand.variable, member, walk, strict, test)
    if operand.text is None or not _IDENTIFIER.fullmatch(member):
        return _Node()
    text = f"({operand.text}).{member}"
    return _Node(f"has({text})" if test else text)


def _call(parts: list[tuple[int, Any]], walk: _Walk, strict: bool, shadowed: frozenset[str]) -> _Node:
    name = next((v.decode() for n, v in parts if n == 2), "")
    lazy = name in _LAZY
    target = next((_visit(v, walk, strict and name != "@not_strictly_false", shadowed)
                   for n, v in parts if n == 1), None)
    args = [_visit(v, walk, strict and not lazy and (name != "_?_:_" or i == 0), shadowed)
            for i, v in enumerate(v for n, v in parts if n == 3)]
    if name in _READS and args:
        member = args[1].literal if len(args) > 1 else None
        _read(args[0].variable, member, walk, strict, name != "_[_]")
    texts = [a.text for a in args]
    if (target is not None and target.text is None) or None in texts or "@" in name.replace("@in", ""):
        return _Node()
    return _Node(_text(name, target.text if target is not None else None, [t for t in texts if t is not None],
                       args))


def _text(name: str, target: str | None, args: list[str], nodes: list[_Node]) -> str | None:
    """The CEL text of a call of ``name`` whose target and arguments have the texts given."""
    if name in _INFIX and len(args) == 2:
        return f"({args[0]} {_INFIX[name]} {args[1]})"
    if name in _PREFIX and len(args) == 1:
        return f"({_PREFIX[name]}{args[0]})"
    shapes: dict[str, Callable[[], str | None]] = {
        "_[_]": lambda: f"({args[0]})[{args[1]}]",
        "_[?_]": lambda: f"({args[0]})[?{args[1]}]",
        "_?_:_": lambda: f"({args[0]} ? {args[1]} : {args[2]})",
        "_?._": lambda: (f"({args[0]}).?{nodes[1].literal}"
                         if isinstance(nodes[1].literal, str) and _IDENTIFIER.fullmatch(nodes[1].literal) else None),
    }
    if name in shapes:
        return shapes[name]()
    joined = ", ".join(args)
    return f"({target}).{name}({joined})" if target is not None else f"{name}({joined})"


def _list(parts: list[tuple[int, Any]], walk: _Walk, strict: bool, shadowed: frozenset[str]) -> _Node:
    optional = {i for n, v in parts if n == 2 for i in celcheck.packed(v)}
    items = [_visit(v, walk, strict, shadowed) for n, v in parts if n == 1]
    if any(item.text is None for item in items):
        return _Node()
    return _Node("[" + ", ".join(("?" if i in optional else "") + str(item.text) for i, item in enumerate(items))
                 + "]")


def _map(parts: list[tuple[int, Any]], walk: _Walk, strict: bool, shadowed: frozenset[str]) -> _Node:
    entries = [dict(celcheck.fields(v)) for n, v in parts if n == 2]
    texts: list[str | None] = []
    for entry in entries:
        key = _visit(entry.get(3, b""), walk, strict, shadowed) if 3 in entry else _Node()
        value = _visit(entry.get(4, b""), walk, strict, shadowed)
        optional = "?" if entry.get(5) else ""
        texts.append(f"{optional}{key.text}: {value.text}" if key.text and value.text else None)
    if any(n == 1 for n, _ in parts) or None in texts:  # a message, or not literals only
        return _Node()
    return _Node("{" + ", ".join(str(t) for t in texts) + "}")


def _comprehension(parts: dict[int, Any], walk: _Walk, strict: bool, shadowed: frozenset[str]) -> None:
    _visit(parts.get(2, b""), walk, strict, shadowed)
    _visit(parts.get(4, b""), walk, strict, shadowed)
    inner = shadowed | {parts[n].decode() for n in (1, 3, 8) if isinstance(parts.get(n), bytes)}
    _visit(parts.get(5, b""), walk, False, inner)
    _visit(parts.get(6, b""), walk, False, inner)
    _visit(parts.get(7, b""), walk, strict, inner)
