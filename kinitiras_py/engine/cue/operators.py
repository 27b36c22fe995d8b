"""CUE expressions of the subset as CEL: literals, operators, structs, lists and comprehensions.

Every operand is bound once and its type checked, so a mismatch fails as it does in CUE
(``1 == "a"`` is an error, not false). Numbers: CUE computes with exact decimals and unbounded
integers; the compiled program computes with int64 and fails on float arithmetic rather than
give a rounded result (comparisons of floats are exact in both).
"""

from __future__ import annotations

import re

from kinitiras_py.engine.cue import packages
from kinitiras_py.engine.cue import tree as s
from kinitiras_py.engine.cue.compiler import Compiler, _Ctx, err
from kinitiras_py.engine.cue.tree import Unsupported
from kinitiras_py.engine.rendering.environment import cel_literal, cel_string

_NUM = "(type({0}) == int || type({0}) == double)"
_ATOM = r"""(?:[A-Za-z_][A-Za-z0-9_]*|-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|'[^'\\]*'|"[^"\\]*")"""
_SIMPLE = re.compile(rf"""(?:dyn\({_ATOM}\)|{_ATOM})(?:\[(?:-?[0-9]+|'[^'\\]*'|"[^"\\]*")\])*""")
"""CEL that reads a variable, a constant or a path of constant steps from one: cheap to repeat."""
_FAILS = re.compile(r"dyn\(\{\}\)\[(?:'[^'\\]*'|\"[^\"\\]*\")\]")
"""CEL that always fails (:func:`.compiler.err`): reading below it, or looping over it, fails alike."""
_MAX_DUPLICATES = 4


def expr(c: Compiler, node: s.Node, ctx: _Ctx) -> str:
    """The CEL of one expression."""
    if isinstance(node, s.Lit):
        return cel_literal(node.value)
    if isinstance(node, s.Interp):
        return "(" + " + ".join(cel_string(p) if isinstance(p, str) else _interpolated(c, p, ctx)
                                for p in node.parts) + ")"
    if isinstance(node, s.Top):
        return err("incomplete", "incomplete value _")
    if isinstance(node, s.Bottom):
        return err("invalid", "explicit error (_|_ literal)")
    if isinstance(node, s.Ref):
        return c.ref(node, ctx)
    if isinstance(node, s.Sel):
        base = expr(c, node.base, ctx)
        # An unset input stays one failure however deep it is read (and costs nothing to estimate).
        return base if _FAILS.fullmatch(base) else f"{_dyn(node.base, base)}[{cel_string(node.name)}]"
    if isinstance(node, s.Index):
        return _index(c, node, ctx)
    if isinstance(node, s.Unary):
        return _unary(c, node, ctx)
    if isinstance(node, s.Binary):
        return _binary(c, node, ctx)
    if isinstance(node, s.Call):
        return _call(c, node, ctx)
    if isinstance(node, s.Disjunction):
        return _disjunction(node)
    if isinstance(node, s.Struct):
        return struct(c, node, ctx)
    if isinstance(node, s.ListLit):
        return _list(c, node, ctx)
    raise Unsupported(node.pos, f"{type(node).__name__} is not supported")


def _dyn(node: s.Node, source: str) -> str:
    """``source`` as ``dyn``: a selection already is one (and a chain of ``dyn()`` would nest past
    what CEL's parser accepts on long paths)."""
    return source if isinstance(node, s.Sel | s.Index) else f"dyn({source})"


def _bind2(c: Compiler, left: str, right: str, body: str) -> str:
    """``body`` with ``{l}`` and ``{r}`` standing for the bound operands. Both are evaluated first:
    CEL's ``&&`` would otherwise absorb a failing operand's error in the kind checks, and the program
    would fail as a mismatch where CUE reports the operand's own (e.g. incomplete) error."""
    lv = left if _SIMPLE.fullmatch(left) else c.fresh("l")
    rv = right if _SIMPLE.fullmatch(right) else c.fresh("r")
    body = body.replace("{l}", f"dyn({lv})" if lv == left else lv).replace("{r}", f"dyn({rv})" if rv == right else rv)
    result = f"(size([{lv}, {rv}]) == 2 ? ({body}) : {err('invalid', '')})"
    # A variable, a constant or a path from a variable is read where used (binding it would nest the
    # program deeper, and CEL's parser takes 32 levels); anything else is bound once.
    if rv != right:
        result = f"cel.bind({rv}, dyn({right}), {result})"
    if lv != left:
        result = f"cel.bind({lv}, dyn({left}), {result})"
    return result


def _interpolated(c: Compiler, node: s.Node, ctx: _Ctx) -> str:
    source = expr(c, node, ctx)
    if isinstance(node, s.Ref) and node.name in ctx.env and source.startswith("cue_idx"):
        return f"string({source})"  # a for clause's index: an int
    return _text(c, source)


def _text(c: Compiler, source: str) -> str:
    v = c.fresh("s")
    return (f"cel.bind({v}, dyn({source}), type({v}) == string ? {v} : type({v}) == int ? string({v}) : "
            f"type({v}) == bool ? ({v} ? 'true' : 'false') : type({v}) == double ? "
            f"{err('unsupported', 'interpolation of a float')} : "
            f"{err('invalid', 'interpolation of a value that is not a string, a number or a bool')})")


_BOOLEAN = frozenset(("==", "!=", "<", "<=", ">", ">=", "=~", "!~", "&&", "||"))


def _boolean(node: s.Node) -> bool:
    """Whether ``node`` compiles to CEL that gives a bool or fails (never another kind)."""
    return (isinstance(node, s.Binary) and node.op in _BOOLEAN) or (isinstance(node, s.Unary) and node.op == "!") \
        or (isinstance(node, s.Lit) and isinstance(node.value, bool))


def condition(c: Compiler, node: s.Node, ctx: _Ctx, what: str) -> str:
    """``node`` as a truth value: checked to be a bool unless it can be nothing else."""
    source = expr(c, node, ctx)
    return source if _boolean(node) else strict_bool(c, source, what)


def strict_bool(c: Compiler, source: str, what: str) -> str:
    """``source`` when it is a bool, else a failure (CUE never reads another kind as a truth value)."""
    v = c.fresh("b")
    return f"cel.bind({v}, dyn({source}), type({v}) == bool ? {v} : {err('invalid', f'{what} must be a bool')})"


def _index(c: Compiler, node: s.Index, ctx: _Ctx) -> str:
    base = expr(c, node.base, ctx)
    if isinstance(node.index, s.Lit) and type(node.index.value) in (int, str):
        return base if _FAILS.fullmatch(base) else f"{_dyn(node.base, base)}[{cel_literal(node.index.value)}]"
    base = f"dyn({base})"
    v = c.fresh("i")
    return (f"cel.bind({v}, dyn({expr(c, node.index, ctx)}), type({v}) == int || type({v}) == string ? "
            f"{base}[{v}] : {err('invalid', 'an index must be an int or a string')})")


def _unary(c: Compiler, node: s.Unary, ctx: _Ctx) -> str:
    if node.op == "!":
        return f"!({condition(c, node.operand, ctx, 'the operand of !')})"
    if node.op == "-":
        if isinstance(node.operand, s.Lit) and type(node.operand.value) in (int, float):
            return f"({cel_literal(-node.operand.value)})"  # type: ignore[operator]
        v = c.fresh("n")
        return f"cel.bind({v}, dyn({expr(c, node.operand, ctx)}), {_NUM.format(v)} ? -{v} : " \
               f"{err('invalid', 'the operand of - must be a number')})"
    raise Unsupported(node.pos, f"unary `{node.op}` is not supported here (a default `*` belongs in a disjunction)")


def _binary(c: Compiler, node: s.Binary, ctx: _Ctx) -> str:
    op = node.op
    if op in ("==", "!=") and (isinstance(node.left, s.Bottom) or isinstance(node.right, s.Bottom)):
        other = node.right if isinstance(node.left, s.Bottom) else node.left
        test = c.defined(other, ctx)
        return f"!{test}" if op == "==" else test
    if op == "/":
        raise Unsupported(node.pos, "`/` is not supported: CUE divides into exact decimals, CEL into floats")
    if op == "|":
        raise Unsupported(node.pos, "disjunctions are supported of constants only")
    mismatch = err("invalid", f"invalid operands to {op}")
    if op in ("==", "!=", "<", "<=", ">", ">=") and isinstance(node.right, s.Lit):
        return _against_literal(c, op, expr(c, node.left, ctx), node.right.value, mismatch)
    left, right = expr(c, node.left, ctx), expr(c, node.right, ctx)
    if op in ("&&", "||"):
        # Both sides are evaluated (an error on either fails), the left must be a bool, and the
        # right's kind matters only when the left does not decide: `false && 3` is false in CUE.
        decides = "false" if op == "&&" else "true"
        return _bind2(c, left, right, "size([type({l}), type({r})]) == 2 && type({l}) == bool ? ({l} == " + decides
                      + " ? " + decides + " : type({r}) == bool ? {r} : " + mismatch + ") : " + mismatch)
    if op in ("==", "!="):
        same = ("(type({l}) == type({r}) && type({l}) != map) || ({l} == null || {r} == null) || "
                f"({_NUM.format('{l}')} && {_NUM.format('{r}')})")
        return _bind2(c, left, right, f"{same} ? {{l}} {op} {{r}} : {mismatch}")
    if op in ("<", "<=", ">", ">="):
        ok = f"(type({{l}}) == string && type({{r}}) == string) || ({_NUM.format('{l}')} && {_NUM.format('{r}')})"
        return _bind2(c, left, right, f"{ok} ? {{l}} {op} {{r}} : {mismatch}")
    if op in ("=~", "!~"):
        neg = "!" if op == "!~" else ""
        return _bind2(c, left, right, "type({l}) == string && type({r}) == string ? " + neg + "{l}.matches({r}) : "
                      + mismatch)
    if op == "&":
        return _unify(c, left, right)
    floats = err("unsupported", f"{op} of floats (CUE computes exact decimals)")
    ints = "type({l}) == int && type({r}) == int ? {l} " + op + " {r} : "
    if op == "+":
        same = "(type({l}) == string || type({l}) == list) && type({l}) == type({r}) ? {l} + {r} : "
        return _bind2(c, left, right, ints + same + f"{_NUM.format('{l}')} && {_NUM.format('{r}')} ? {floats} : "
                      + mismatch)
    repeat = ""
    if op == "*":
        repeat = ("(type({l}) == int && (type({r}) == string || type({r}) == list)) || (type({r}) == int && "
                  "(type({l}) == string || type({l}) == list)) ? "
                  + err("unsupported", "repeating a string or a list with *") + " : ")
    return _bind2(c, left, right, ints + repeat + f"{_NUM.format('{l}')} && {_NUM.format('{r}')} ? {floats} : "
                  + mismatch)


def _against_literal(c: Compiler, op: str, left: str, value: object, mismatch: str) -> str:
    """``left op <constant>``: the constant's kind is known, so only the other operand is checked
    (and the cost estimate sees a comparison with a constant)."""
    v = c.fresh("l")
    lit = cel_literal(value)
    # CEL binds lazily: the operand is read first so that its own failure (a missing field) wins.
    fails = f"cel.bind({v}, dyn({left}), size([{v}]) == 1 ? {mismatch} : {mismatch})"
    if value is None:
        if op not in ("==", "!="):
            return fails
        return f"cel.bind({v}, dyn({left}), {v} {op} null)"
    if isinstance(value, bool):
        kind = f"type({v}) == bool"
    elif isinstance(value, int | float):
        kind = _NUM.format(v)
    else:
        kind = f"type({v}) == string"
    if op in ("==", "!="):
        absent = "false" if op == "==" else "true"
        return f"cel.bind({v}, dyn({left}), {kind} ? {v} {op} {lit} : type({v}) == null_type ? {absent} : {mismatch})"
    if isinstance(value, bool):
        return fails
    return f"cel.bind({v}, dyn({left}), {kind} ? {v} {op} {lit} : {mismatch})"


FUNCTIONS = ("len", *packages.FUNCTIONS)


def _call(c: Compiler, node: s.Call, ctx: _Ctx) -> str:
    package = node.name.split(".")[0] if "." in node.name else None
    if node.name in packages.REFUSED:
        raise Unsupported(node.pos, f"`{node.name}` is not supported: it {packages.REFUSED[node.name]}")
    if node.name not in FUNCTIONS or (package and (package not in c.tree.imports or package in c.helpers
                                                   or package in ctx.env)):
        raise Unsupported(node.pos, f"call of `{node.name}` is not supported (only {', '.join(FUNCTIONS)}, "
                                    "with their package imported)")
    if node.name != "len":
        return packages.call(c, node, ctx)
    if len(node.args) != 1:
        raise Unsupported(node.pos, "`len` takes 1 argument")
    v = c.fresh("n")
    return (f"cel.bind({v}, dyn({expr(c, node.args[0], ctx)}), type({v}) == string ? size(bytes({v})) : "
            f"type({v}) == list || type({v}) == map || type({v}) == bytes ? size({v}) : "
            f"{err('invalid', 'len of a value that has no length')})")


def _disjunction(node: s.Disjunction) -> str:
    for option in node.options:
        if not isinstance(option, s.Lit):
            raise Unsupported(option.pos, "disjunctions are supported of constants only")
    values = [o.value for o in node.options if isinstance(o, s.Lit)]
    if node.default is not None:
        return cel_literal(values[node.default])
    if all(type(v) is type(values[0]) and v == values[0] for v in values):
        return cel_literal(values[0])
    return err("incomplete", "a disjunction without a default has no single value")


def _guarded(c: Compiler, clauses: tuple[s.Clause, ...], guard: str | None, binds: list[tuple[str, str]],
             ctx: _Ctx) -> str:
    """The guard variable of a struct comprehension's ``if`` clauses (bound in ``binds``)."""
    for clause in clauses:
        if clause.kind != "if":
            raise Unsupported(clause.pos, "`for` inside a struct (dynamic field names) is not supported")
        var = c.fresh("g")
        cond = condition(c, clause.source, ctx, "an if condition")
        binds.append((var, cond if guard is None else f"({guard} ? {cond} : false)"))
        guard = var
    assert guard is not None
    return guard


def _collect(c: Compiler, decls: tuple[s.Decl, ...], guard: str | None, binds: list[tuple[str, str]],
             entries: dict[str, list[tuple[str | None, s.Node]]], ctx: _Ctx) -> None:
    for decl in decls:
        if isinstance(decl, s.Field):
            if decl.label.startswith(("_", "#")):
                raise Unsupported(decl.pos, "hidden fields and definitions are supported at the top level only")
            entries.setdefault(decl.label, []).append((guard, decl.value))
        elif isinstance(decl, s.Comprehension):
            inner = _guarded(c, decl.clauses, guard, binds, ctx)
            _collect(c, decl.body.decls, inner, binds, entries, ctx)
        elif isinstance(decl, s.Let):
            raise Unsupported(decl.pos, "`let` is supported at the top level only")
        elif isinstance(decl.value, s.Struct):
            _collect(c, decl.value.decls, guard, binds, entries, ctx)
        else:
            raise Unsupported(decl.pos, "embedding a value other than a struct literal is supported only as "
                                        "the whole body of a list comprehension")


def struct(c: Compiler, node: s.Struct, ctx: _Ctx) -> str:
    """A struct literal as a CEL map; fields of ``if`` comprehensions present when their guards hold."""
    labels = frozenset(_labels(node.decls))
    inner = _Ctx(ctx.env, ctx.conditional, ctx.shadow | labels)
    binds: list[tuple[str, str]] = []
    entries: dict[str, list[tuple[str | None, s.Node]]] = {}
    _collect(c, node.decls, None, binds, entries, inner)
    items = []
    for label, found in entries.items():
        if len(found) > _MAX_DUPLICATES:
            raise Unsupported(node.pos, f"field `{label}` is declared more than {_MAX_DUPLICATES} times")
        if len(found) > 1 and sum(isinstance(v, s.Struct | s.ListLit) for _, v in found) > 1:
            raise Unsupported(found[1][1].pos, f"field `{label}` is declared twice with struct or list values")
        present, value = "false", ""
        for guard, value_node in found:
            sub = _Ctx(ctx.env, ctx.conditional or guard is not None, inner.shadow)
            source = f"dyn({expr(c, value_node, sub)})"
            g = guard or "true"
            value = source if not value else \
                f"({present} && {g} ? {_unify(c, value, source)} : {g} ? {source} : {value})"
            present = g if present == "false" else f"({present} || {g})"
        key = cel_string(label)
        items.append(f"{key}: {value}" if present == "true" else
                     f"?{key}: {present} ? optional.of({value}) : optional.none()")
    result = "{" + ", ".join(items) + "}"
    if binds:
        # Every condition is evaluated, as CUE does, even where ``||`` would skip a failing one.
        result = f"size([{', '.join(var for var, _ in binds)}]) == {len(binds)} ? {result} : {err('invalid', '')}"
    for var, cond in reversed(binds):
        result = f"cel.bind({var}, dyn({cond}), {result})"
    return result


def _labels(decls: tuple[s.Decl, ...]) -> list[str]:
    out = []
    for decl in decls:
        if isinstance(decl, s.Field):
            out.append(decl.label)
        elif isinstance(decl, s.Comprehension):
            out += _labels(decl.body.decls)
    return out


def _unify(c: Compiler, left: str, right: str) -> str:
    """Concrete values unified: equal scalars give the value, others conflict; two structs or two
    lists would merge in CUE, which the compiled program does not do."""
    same = "type({l}) == type({r}) && type({l}) != map && type({l}) != list && {l} == {r}"
    merge = "type({l}) == type({r}) && (type({l}) == map || type({l}) == list)"
    return _bind2(c, left, right, f"{same} ? {{l}} : {merge} ? {err('unsupported', 'unifying structs or lists')} : "
                  f"{err('conflict', 'conflicting values')}")


def _list(c: Compiler, node: s.ListLit, ctx: _Ctx) -> str:
    parts = []
    for elem in node.elems:
        if isinstance(elem, s.Comprehension):
            parts.append(_clauses(c, elem.clauses, elem.body, ctx))
        else:
            parts.append(f"[dyn({expr(c, elem, ctx)})]")
    return "(" + " + ".join(parts) + ")" if parts else "[]"


def _clauses(c: Compiler, clauses: tuple[s.Clause, ...], body: s.Struct, ctx: _Ctx) -> str:
    """A list comprehension as a CEL list. ``for`` with only ``if`` clauses after it is a filter and a
    map (no nested lists, which the cost estimate would count as large)."""
    if not clauses:
        return f"[{_element(c, body, ctx)}]"
    clause, rest = clauses[0], clauses[1:]
    deeper = _Ctx(dict(ctx.env), True, ctx.shadow)
    if clause.kind == "if":
        cond = condition(c, clause.source, ctx, "an if condition")
        return f"({cond} ? {_clauses(c, rest, body, deeper)} : [])"
    src, idx = c.fresh("src"), c.fresh("idx")
    assert clause.value is not None
    value = c.fresh("v")
    deeper.env[clause.value] = value
    if clause.key is not None:
        deeper.env[clause.key] = idx
    pair = f"{idx}_p"

    def bound(source: str) -> str:
        if clause.key is None:
            return source
        return f"cel.bind({idx}, {pair}.index, cel.bind({value}, {pair}.value, {source}))"

    items, var = (src, value) if clause.key is None else (f"{src}.enumerate()", pair)
    conds = [cl for cl in rest if cl.kind == "if"]
    if len(conds) == len(rest):
        guard = ""
        for cl in reversed(conds):
            test = condition(c, cl.source, deeper, "an if condition")
            guard = test if not guard else f"({test} ? {guard} : false)"
        loop = f"{items}.filter({var}, {bound(guard)})" if guard else items
        loop += f".map({var}, {bound(_element(c, body, deeper))})"
    else:
        loop = f"{items}.map({var}, {bound(_clauses(c, rest, body, deeper))}).flatten()"
    source = expr(c, clause.source, ctx)
    if _FAILS.fullmatch(source):
        return source
    if isinstance(clause.source, s.ListLit):
        # A literal list: its length is known, to CEL's cost estimate too.
        return f"cel.bind({src}, {source}, {loop})"
    return (f"cel.bind({src}, dyn({source}), type({src}) == list ? {loop} : "
            f"type({src}) == map ? {err('unsupported', 'for over a struct')} : "
            f"{err('invalid', 'for over a value that is neither a list nor a struct')})")


def _element(c: Compiler, body: s.Struct, ctx: _Ctx) -> str:
    if len(body.decls) == 1 and isinstance(body.decls[0], s.Embed):
        return f"dyn({expr(c, body.decls[0].value, ctx)})"
    return f"dyn({struct(c, body, ctx)})"
