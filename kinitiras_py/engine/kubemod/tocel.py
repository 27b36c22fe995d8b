"""A parsed select (:mod:`.syntax`) compiled to CEL that never fails on any object.

Paths are compiled in continuation-passing style: each segment checks the kind of the value it
steps into (``type(v) == map && "k" in v``) and hands the value on to the rest of the path, or
gives the *miss* result of the context (``false`` under ``exists``, ``true`` under ``all``,
``[]`` when collecting). So KubeMod's ``undefined`` never becomes a value: a missing key, an
index out of range, or a step into a string all end that branch, and a comparison with an
undefined operand is false, as KubeMod's README says. Comparisons have gval's meaning
(:mod:`.compare`); ``&&``/``||``/``!`` on values that are not booleans, errors in KubeMod, are
false.

Fan-out segments (``[*]``, ``.*``, unions, filters) become CEL comprehensions over the list, or
the keys of the map: ``exists`` when asking whether any selected value passes a test, ``all``
for every value, ``map`` when collecting one result per value together with its *key parts*
(the indexes or keys each fan-out segment took, which ``#0``, ``#1``... refer to), a count
when a function reads the array a select with several values gives (``length``, ``isEmpty``,
``isNotEmpty``: KubeMod's array of the values, undefined ones left out).

Recursive descent ``..`` is unrolled :data:`DESCENT_DEPTH` levels below where it appears: each
level is one nested comprehension, so the CEL grows linearly with the depth and runs at CEL
speed without any value leaving CEL. Values deeper than that are not visited: ``$..image``
reaches a Deployment's container images (``spec.template.spec.containers[*]`` is 5 levels
down), ``$..containerPort`` does not reach its ports (7 levels). The depth is what CEL's parser
allows (32 levels of nesting) with room for the rest of a select. What bounds its cost is
cel-cpp's limit of 10,000 loop iterations per evaluation, all loops together (:mod:`.cost`):
``$.spec..ports[? @.containerPort < 1024]`` fits the budget for any request, and an object with
more values than that fails the rule rather than stalling it. A select whose CEL would still
cost more than the budget is admitted for the requests it can afford, or refused, like any
CEL. ``..`` is for tests over the selected values (match criteria, filters, functions); a patch
select refuses it, since its key parts would have no fixed number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kinitiras_py.engine.kubemod import syntax
from kinitiras_py.engine.kubemod.compare import Operand, compare
from kinitiras_py.engine.kubemod.syntax import (
    Call,
    Compare,
    Descend,
    Expr,
    Field,
    Filter,
    Index,
    Literal,
    Logical,
    Not,
    Path,
    SelectError,
    Union,
    Wildcard,
)
from kinitiras_py.engine.rendering.environment import cel_literal, cel_string

MAX_CEL_BYTES = 64 * 1024
"""The CEL a select may become (what the CEL adapter accepts): unions and ``..`` repeat the rest
of the path, so a short select can grow past it."""
DESCENT_DEPTH = 5
"""Levels below its starting point that ``..`` visits."""


@dataclass(frozen=True)
class Key:
    """One key part: a CEL expression, and whether it is a list index (int) or a map key (string)."""

    expr: str
    index: bool | None
    """True for a list index, False for a map key, None when only known at run time."""

    def token(self) -> str:
        """CEL for this key as a JSON pointer reference token."""
        escaped = f'{self.expr}.replace("~", "~0").replace("/", "~1")'
        if self.index is None:
            return f"(type({self.expr}) == string ? {escaped} : string({self.expr}))"
        return f"string({self.expr})" if self.index else escaped


Leaf = Callable[[str, tuple[Key, ...]], str]
"""Given the CEL identifier of a selected value and its key parts, the CEL of what to do with it."""


class Compiler:
    """Fresh variable names for one CEL program; every select of a program shares one compiler."""

    def __init__(self, root: str = "object", synthetic_namespace: str = "namespaceObject") -> None:
        self.counter = 0
        self.miss_override: str | None = None
        self.root = root
        self.synthetic_namespace = synthetic_namespace

    def fresh(self) -> str:
        """A variable name no user text can clash with (selects have no identifiers of their own)."""
        self.counter += 1
        return f"km{self.counter}"

    # -- paths ------------------------------------------------------------------------------------

    def start(self, path: Path, current: str | None) -> tuple[str, tuple[syntax.Segment, ...]]:
        """The CEL value a path starts from, and the segments left to walk from it."""
        if path.root == "@":
            if current is None:
                raise SelectError("@ (the current item) is only meaningful inside a filter [? ...]")
            return current, path.segments
        segments = path.segments
        if segments[:1] == (Field("syntheticRefs"),):
            if segments[1:2] == (Field("namespace"),):
                return self.synthetic_namespace, segments[2:]
            if segments[1:2] and isinstance(segments[1], Field):
                # The policy's valueRefs, resolved per request into params.
                return "params", segments[1:]
            raise SelectError("name a synthetic reference: $.syntheticRefs.namespace (the object's "
                              "Namespace) or $.syntheticRefs.<name> (one of the policy's valueRefs)")
        return self.root, segments

    def walk(self, path: Path, mode: str, leaf: Leaf, current: str | None = None, miss: str | None = None) -> str:
        """CEL applying ``leaf`` to every value ``path`` selects, combined by ``mode``.

        ``mode`` is ``any`` (a bool: some value passes), ``all`` (a bool: every value passes),
        ``list`` (a list nested one level per fan-out segment, with ``leaf``'s result innermost)
        or ``count`` (an int: the sum of ``leaf``'s results, ints).
        ``miss`` replaces the result of a plain path that selects nothing.
        """
        start, segments = self.start(path, current)
        if mode == "list" and any(isinstance(s, Descend) for s in segments):
            raise SelectError("recursive descent '..' cannot be used to select what a patch changes: "
                              "write the path with [*] or filters, whose indexes #0, #1... can name")
        saved, self.miss_override = self.miss_override, miss
        try:
            source = self._steps(start, segments, mode, leaf, (), current)
        finally:
            self.miss_override = saved
        if len(source) > MAX_CEL_BYTES:
            raise SelectError(f"the select is too complex: its CEL would be {len(source):,} bytes (at most "
                              f"{MAX_CEL_BYTES:,}); unions and '..' repeat the rest of the path")
        return source

    def _miss(self, mode: str) -> str:
        return {"any": "false", "all": "true", "list": "[]", "count": "0"}[mode]

    def _steps(self, value: str, segments: tuple[syntax.Segment, ...], mode: str, leaf: Leaf,
               keys: tuple[Key, ...], current: str | None) -> str:
        if not segments:
            return leaf(value, keys)
        segment = segments[0]
        miss = self.miss_override if self.miss_override is not None else self._miss(mode)

        def then(item: str, key: Key | None = None, skip: int = 1) -> str:
            return self._steps(item, segments[skip:], mode, leaf, keys if key is None else (*keys, key), current)

        if isinstance(segment, Field | Index):
            # A run of plain steps: one guard, one binding (CEL's && is false when any operand
            # is, whatever errors the others raise, so later guards may read what earlier ones check).
            run = 0
            guards: list[str] = []
            expr = value
            for step in segments:
                if not isinstance(step, Field | Index):
                    break
                run += 1
                if isinstance(step, Index):
                    if step.index < 0:
                        return miss
                    # KubeMod reads [n] of a map as its key "n".
                    n, key = step.index, cel_string(str(step.index))
                    guards.append(f"(type({expr}) == list ? size({expr}) > {n} "
                                  f": type({expr}) == map && {key} in {expr})")
                    expr = f"{expr}[type({expr}) == list ? dyn({n}) : dyn({key})]"
                else:
                    name = cel_string(step.name)
                    guards.append(f"type({expr}) == map && {name} in {expr}")
                    expr = f"{expr}[{name}]"
            v = self.fresh()
            return f"({' && '.join(guards)} ? cel.bind({v}, {expr}, {then(v, None, run)}) : {miss})"
        if isinstance(segment, Union):
            return self._union(value, segment, mode, then)
        if isinstance(segment, Wildcard | Filter):
            test = segment.condition if isinstance(segment, Filter) else None
            return self._each(value, mode, then, test)
        return self._descend(value, segments[1:], mode, leaf, keys, current, DESCENT_DEPTH)

    def _union(self, value: str, segment: Union, mode: str, then: Callable[[str, Key | None], str]) -> str:
        parts = []
        for key in segment.keys:
            v = self.fresh()
            if isinstance(key, int):
                cond = (f"type({value}) == list && size({value}) > {key}" if key >= 0 else "false")
                body = then(v, Key(str(key), True)) if mode == "list" else then(v, None)
                found = f"cel.bind({v}, {value}[{key}], {body})"
            else:
                name = cel_string(key)
                cond = f"type({value}) == map && {name} in {value}"
                body = then(v, Key(name, False)) if mode == "list" else then(v, None)
                found = f"cel.bind({v}, {value}[{name}], {body})"
            if mode == "list":
                parts.append(f"({cond} ? [dyn({found})] : [])")
            else:
                parts.append(f"({cond} ? {found} : {self._miss(mode)})")
        joiner = {"any": " || ", "all": " && ", "list": " + ", "count": " + "}[mode]
        return "(" + joiner.join(parts) + ")"

    def _each(self, value: str, mode: str, then: Callable[[str, Key | None], str], test: Expr | None) -> str:
        # One loop body for lists and maps: a list's loop variable is the item, a map's the key.
        x, v = self.fresh(), self.fresh()
        item = f"(type({value}) == map ? {value}[{x}] : {x})"
        if mode == "list":
            # Over the indexes of a list or the keys of a map (a loop over a map is over its keys),
            # so that each value comes with its key.
            over = f"(type({value}) == map ? dyn({value}) : dyn(range(size({value}))))"
            key = Key(x, None)
            # No parentheses or dyn() around the result where CEL does not need them: each is a
            # level of nesting, and a value template sits below every level of the select.
            body = f"cel.bind({v}, {value}[{x}], {then(v, key)})"
            if test is None:
                looped = f"{over}.map({x}, {body})"
            else:
                looped = f"{over}.map({x}, cel.bind({v}, {value}[{x}], {self.boolean(test, v)}), {body})"
            return f"(type({value}) in [list, map] ? {looped} : [])"
        if mode == "count":
            return f"(type({value}) in [list, map] ? {self._count(value, then, test, x, v)} : 0)"
        macro = "exists" if mode == "any" else "all"
        body = then(v, None)
        if test is not None:
            cond = self.boolean(test, v)
            body = f"{cond} && {body}" if mode == "any" else f"!({cond}) || {body}"
        return (f"(type({value}) in [list, map] ? {value}.{macro}({x}, cel.bind({v}, {item}, {body})) "
                f": {self._miss(mode)})")

    def _count(self, value: str, then: Callable[[str, Key | None], str], test: Expr | None, x: str, v: str) -> str:
        """CEL int: the values below ``value`` (a list or map) that ``test`` keeps, counted by ``then``."""
        item = f"(type({value}) == map ? {value}[{x}] : {x})"
        body = then(v, None)
        if body == "1":  # nothing follows: the kept items themselves
            if test is None:
                return f"size({value})"
            return f"size({value}.filter({x}, cel.bind({v}, {item}, {self.boolean(test, v)})))"
        if test is not None:
            body = f"({self.boolean(test, v)} ? {body} : 0)"
        return f"{value}.map({x}, cel.bind({v}, {item}, {body})).sum()"

    def _descend(self, value: str, rest: tuple[syntax.Segment, ...], mode: str, leaf: Leaf,
                 keys: tuple[Key, ...], current: str | None, depth: int) -> str:
        here = self._steps(value, rest, mode, leaf, keys, current)
        if depth == 0:
            return here
        x, v = self.fresh(), self.fresh()
        below = self._descend(v, rest, mode, leaf, keys, current, depth - 1)
        item = f"(type({value}) == map ? {value}[{x}] : {x})"
        # The guard goes into the range, not around the loop: CEL's parser allows 32 levels of
        # nesting, and every level saved is one more level ``..`` can reach.
        over = f"(type({value}) in [list, map] ? dyn({value}) : dyn([]))"
        if mode == "count":
            return f"({here} + {over}.map({x}, cel.bind({v}, {item}, {below})).sum())"
        macro, joiner = ("exists", "||") if mode == "any" else ("all", "&&")
        return f"({here} {joiner} {over}.{macro}({x}, cel.bind({v}, {item}, {below})))"

    # -- expressions ------------------------------------------------------------------------------

    def value(self, expr: Expr, then: Callable[[str], str], current: str | None) -> str:
        """CEL passing the single value of ``expr`` to ``then``; false when it is undefined."""
        if isinstance(expr, Literal):
            return then(f"dyn({cel_literal(expr.value)})")
        if isinstance(expr, Path):
            if not expr.plain:
                raise SelectError("a path with [*], '..', a union or a filter selects several values: "
                                  "it can be the whole select, or be tested inside a filter, but it "
                                  "cannot be an operand")
            return self.walk(expr, "any", lambda v, _keys: then(v), current)
        if isinstance(expr, Call) and expr.name == "length":
            def named(size: str) -> str:
                n = self.fresh()
                return f"cel.bind({n}, dyn({size}), {then(n)})"

            if isinstance(expr.argument, Path) and not expr.argument.plain:
                return named(self.count(expr.argument, current))

            def length(v: str) -> str:
                return (f"(type({v}) == string ? {named(f'size(bytes({v}))')} : type({v}) in [list, map] "
                        f"? {named(f'size({v})')} : type({v}) == null_type ? {named('0')} : false)")
            return self._argument(expr.argument, length, named("0"), current)
        return then(self.boolean(expr, current))

    def count(self, path: Path, current: str | None) -> str:
        """CEL int: how many values a path with several values selects (KubeMod's array of them)."""
        return self.walk(path, "count", lambda _v, _keys: "1", current)

    def _argument(self, expr: Expr, then: Callable[[str], str], undefined: str, current: str | None) -> str:
        """Like :meth:`value`, but ``undefined`` instead of false when the argument is undefined."""
        if isinstance(expr, Path):
            if not expr.plain:
                raise SelectError("a function's argument must be a path to one value (no [*], '..', "
                                  "union or filter)")
            return self.walk(expr, "any", lambda v, _keys: then(v), current, miss=undefined)
        return self.value(expr, then, current)

    def boolean(self, expr: Expr, current: str | None = None) -> str:
        """CEL bool for ``expr`` used as a condition (a filter, an operand of ``&&``...)."""
        if isinstance(expr, Logical):
            return f"({self.boolean(expr.left, current)} {expr.op} {self.boolean(expr.right, current)})"
        if isinstance(expr, Not):
            return f"!{self.boolean(expr.operand, current)}"
        if isinstance(expr, Compare):
            return self._compare(expr, current)
        if isinstance(expr, Literal):
            return ("true" if expr.value else "false") if isinstance(expr.value, bool) else "false"
        if isinstance(expr, Call):
            return self._predicate(expr, current)
        if not expr.plain:
            raise SelectError("a path with [*], '..', a union or a filter selects several values: it "
                              "cannot be a condition")
        return self.walk(expr, "any", lambda v, _keys: f"(type({v}) == bool && {v})", current)

    def _predicate(self, call: Call, current: str | None) -> str:
        name, arg = call.name, call.argument
        if name == "length":
            return "false"
        if name in ("isDefined", "isUndefined"):
            if isinstance(arg, Path) and arg.plain:
                defined = self.walk(arg, "any", lambda _v, _keys: "true", current)
            else:  # a literal, or the array a path with several values gives (empty or not)
                defined = "true"
            return defined if name == "isDefined" else f"!{defined}"
        empty = name == "isEmpty"
        if isinstance(arg, Path) and not arg.plain:  # the array of values: empty when there is none
            found = self.walk(arg, "any", lambda _v, _keys: "true", current)
            return f"!{found}" if empty else found

        def test(v: str) -> str:
            sized = f"type({v}) in [list, map, string] && size({v}) {'==' if empty else '!='} 0"
            return f"(type({v}) == null_type || ({sized}))" if empty else f"({sized})"

        return self._argument(arg, test, "true" if empty else "false", current)

    def _compare(self, cmp: Compare, current: str | None) -> str:
        if cmp.op in ("=~", "!~"):
            assert isinstance(cmp.right, Literal)
            pattern = cel_string(str(cmp.right.value))
            sign = "" if cmp.op == "=~" else "!"
            return self.value(cmp.left, lambda a: f"(type({a}) == string && {sign}{a}.matches({pattern}))",
                              current)

        def side(expr: Expr, v: str) -> Operand:
            return Operand(v, expr.value, True) if isinstance(expr, Literal) else Operand(v)

        def both(a: str) -> str:
            return self.value(cmp.right, lambda b: compare(cmp.op, side(cmp.left, a), side(cmp.right, b)), current)

        return self.value(cmp.left, both, current)
