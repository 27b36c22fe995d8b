"""A kinitiras ``cue`` program compiled into one CEL expression with the same result.

The expression evaluates to the program's output (``patches`` for an override, ``validate`` as
``{valid, reason}`` for a validation) or fails where CUE fails: a reference to a missing field,
an incomplete value, a conflict or a type mismatch. CUE evaluates both operands of every
operator (``&&`` and ``||`` do not short-circuit) and never compares values of different kinds,
so each operator is emitted with its operands bound first and their types checked.

CUE also checks every field of the program, not only the output. A helper (another field, a
hidden field, a definition, a ``let``) is therefore bound before the output is built, and is
accepted only when that is exact: it is a constant, a path one step below an input, or the output
reads it on every evaluation (outside any comprehension). Anything else is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kinitiras_py.engine.cue import syntax
from kinitiras_py.engine.cue import tree as s
from kinitiras_py.engine.cue.tree import Unsupported
from kinitiras_py.engine.rendering.environment import cel_string

INPUTS = ("object", "oldObject", "data")
OUTPUTS = {"override": "patches", "validate": "validate"}
DATA = "{'object': object, 'oldObject': oldObject, 'extraParams': params}"
"""``data`` in kinitiras' template contract: the object, the old object (``{}`` or ``null`` when
there is none) and the values of the template's references (``params``)."""


def err(kind: str, message: str) -> str:
    """CEL failing with ``cue: <kind>: <message>``: ``incomplete``, ``conflict`` and ``invalid`` (CUE's
    other errors) where CUE fails too, ``unsupported`` where CUE would compute a value the compiled
    program does not (docs/cue.md); :mod:`.errors` turns the kind into the rule error's class."""
    return f"dyn({{}})[{cel_string(f'cue: {kind}: {message}')}]"


@dataclass
class _Helper:
    decl: s.Field | s.Let
    var: str
    source: str | None = None
    busy: bool = False


@dataclass
class _Ctx:
    env: dict[str, str] = field(default_factory=dict)
    """Comprehension variables in scope: CUE name -> CEL variable."""
    conditional: bool = False
    shadow: frozenset[str] = frozenset()
    """Labels of enclosing nested structs (a reference to one is refused)."""


class Compiler:
    """One program; :meth:`compile` gives its CEL source."""

    def __init__(self, text: str, kind: str, expression: Callable[[Compiler, s.Node, _Ctx], str],
                 template: bool = False) -> None:
        self.kind = kind
        self.expression = expression
        """The compiler of one expression (:func:`.operators.expr`, which calls back into this one)."""
        self.template = template
        self.output = OUTPUTS[kind]
        self.tree = syntax.parse(text)
        self.helpers: dict[str, _Helper] = {}
        self.inputs: set[str] = set()
        self.order: list[_Helper] = []
        self.used: set[str] = set()
        self.always: set[str] = set()
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"cue_{stem}{self.counter}"

    def compile(self) -> str:
        out: s.Field | None = None
        for decl in self.tree.decls:
            if isinstance(decl, s.Comprehension | s.Embed):
                raise Unsupported(decl.pos, "top-level comprehensions and embeddings are not supported")
            name = decl.label if isinstance(decl, s.Field) else decl.name
            if name in self.helpers or name in self.inputs or (out is not None and name == out.label):
                raise Unsupported(decl.pos, f"`{name}` is declared twice; unifying declarations is not supported")
            attrs = decl.attrs if isinstance(decl, s.Field) else ()
            if isinstance(decl, s.Field) and decl.label in INPUTS:
                if any(a != f"@tag({decl.label})" for a in attrs):
                    raise Unsupported(decl.pos, f"attribute {attrs[0]} is not supported (only @tag({decl.label}))")
                if isinstance(decl.value, s.Top):
                    self.inputs.add(decl.label)
                    continue
                if not _data_path(decl.value):
                    raise Unsupported(decl.value.pos, f"the input `{decl.label}` may only be declared as `_` "
                                                      "or as a path below `data` (`object: data.object`)")
                # `object: data.object`, as kinitiras' templates render: a path read where used.
                self.helpers[name] = _Helper(decl, self.fresh("h_"))
                continue
            if attrs:
                raise Unsupported(decl.pos, f"attribute {attrs[0]} is not supported on `{name}`")
            if isinstance(decl, s.Field) and decl.label == self.output:
                out = decl
            else:
                self.helpers[name] = _Helper(decl, self.fresh("h_"))
        if out is None:
            raise Unsupported((1, 1), f"the program has no `{self.output}` field: kinitiras reads its output there")
        body = self.expr(out.value, _Ctx())
        self._check_helpers()
        if self.kind == "override":
            result = f"cel.bind(cue_out, dyn({body}), type(cue_out) == list ? cue_out : " \
                     f"{err('invalid', 'patches must be a list')})"
        else:
            result = (f"cel.bind(cue_out, dyn({body}), type(cue_out) == map ? "
                      f"{{'valid': 'valid' in cue_out ? {self._bool('cue_out.valid', 'valid')} : true, "
                      f"'reason': 'reason' in cue_out ? cel.bind(cue_r, dyn(cue_out.reason), type(cue_r) == string ? "
                      f"cue_r : {err('invalid', 'reason must be a string')}) : ''}} : "
                      f"{err('invalid', 'validate must be a struct')})")
        for helper in reversed(self.order):
            if helper.source is not None:
                result = f"cel.bind({helper.var}, dyn({helper.source}), {result})"
        return result

    def _check_helpers(self) -> None:
        for name, helper in self.helpers.items():
            value = helper.decl.value
            if name in self.used and name not in self.always and not _chain_helper(self, value):
                raise Unsupported(helper.decl.pos, f"`{name}` is read only inside a comprehension: CUE checks "
                                  "it on every evaluation, which the compiled program cannot reproduce; read it "
                                  "outside any comprehension")
            if name in self.used:
                continue
            if isinstance(helper.decl, s.Let):
                raise Unsupported(helper.decl.pos, f"unreferenced let clause `{name}` (an error in CUE)")
            if not (_constant(value) or _shallow_path(value)):
                raise Unsupported(helper.decl.pos, f"`{name}` is not read by `{self.output}`: CUE checks it "
                                  "on its own, which the compiled program cannot reproduce; remove it")

    # -- references ---------------------------------------------------------------------------

    def ref(self, node: s.Ref, ctx: _Ctx) -> str:
        if node.name in ctx.env:
            return ctx.env[node.name]
        if node.name in ctx.shadow:
            raise Unsupported(node.pos, f"a reference to `{node.name}`, a field of a nested struct, is not supported")
        if node.name in self.helpers:
            return self._helper(node.name, ctx)
        return self._input(node)

    def _input(self, node: s.Ref) -> str:
        name = node.name
        declared = name in self.inputs
        if self.template:
            if name == "data":
                return DATA
            if declared:
                return err("incomplete", f"{name} is not set")
            raise Unsupported(node.pos, f"reference `{name}` not found")
        if name == "object":
            return "object"
        if name == "oldObject" and self.kind == "validate":
            return f"(request.operation == 'UPDATE' ? oldObject : {err('incomplete', 'oldObject is not set')})"
        if declared:
            return err("incomplete", f"{name} is not set")
        raise Unsupported(node.pos, f"reference `{name}` not found")

    def _helper(self, name: str, ctx: _Ctx) -> str:
        helper = self.helpers[name]
        self.used.add(name)
        if not ctx.conditional:
            self.always.add(name)
        if _chain_helper(self, helper.decl.value):
            return self.expr(helper.decl.value, _Ctx(conditional=ctx.conditional))
        if helper.busy:
            raise Unsupported(helper.decl.pos, f"`{name}` refers to itself")
        if helper.source is None:
            helper.busy = True
            helper.source = self.expr(helper.decl.value, _Ctx())
            helper.busy = False
            self.order.append(helper)
        return helper.var

    def defined(self, node: s.Node, ctx: _Ctx) -> str:
        """CEL true when the path ``node`` leads to a value (never failing): ``node != _|_``."""
        steps: list[object] = []
        while isinstance(node, s.Sel | s.Index):
            if isinstance(node, s.Sel):
                steps.append(node.name)
            elif isinstance(node.index, s.Lit) and isinstance(node.index.value, int | str) \
                    and not isinstance(node.index.value, bool):
                steps.append(node.index.value)
            else:
                raise Unsupported(node.pos, "`_|_` tests take paths with constant indexes only")
            node = node.base
        if not isinstance(node, s.Ref):
            raise Unsupported(node.pos, "`_|_` tests are supported on paths from the inputs only")
        if node.name in ctx.env:
            root_ok, root = "true", ctx.env[node.name]
        elif node.name in self.helpers and node.name not in ctx.shadow:
            self.used.add(node.name)
            return self._chain_defined(self.helpers[node.name].decl.value, steps, ctx)
        elif self.template and node.name == "data":
            root_ok, root = "true", DATA
        elif node.name == "object" and not self.template:
            root_ok, root = "true", "object"
        elif node.name == "oldObject" and self.kind == "validate" and not self.template:
            root_ok, root = "request.operation == 'UPDATE'", "oldObject"
        else:
            self._input(node)
            root_ok, root = "false", "null"
        # One flat conjunction (CEL's parser refuses deep nesting): each step is read only after the
        # tests before it hold, and a false test decides `&&` whatever the rest would give.
        terms, value = [], "cue_d0"
        for step in reversed(steps):
            key = cel_string(step) if isinstance(step, str) else str(step)
            terms.append(f"type({value}) == map && {key} in {value}" if isinstance(step, str) else
                         f"type({value}) == list && {key} >= 0 && {key} < size({value})")
            value = f"{value}[{key}]"
        test = " && ".join(terms) or "true"
        walk = f"cel.bind(cue_d0, dyn({root}), {test})"
        return f"({walk})" if root_ok == "true" else f"({root_ok} && {walk})"

    def _chain_defined(self, value: s.Node, steps: list[object], ctx: _Ctx) -> str:
        if not _chain_helper(self, value):
            raise Unsupported(value.pos, "`_|_` tests are supported on paths from the inputs only")
        node: s.Node = value
        for step in reversed(steps):
            node = s.Sel(value.pos, node, step) if isinstance(step, str) else \
                s.Index(value.pos, node, s.Lit(value.pos, step))
        return self.defined(node, _Ctx(conditional=ctx.conditional))

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: s.Node, ctx: _Ctx) -> str:
        return self.expression(self, node, ctx)

    def _bool(self, source: str, what: str) -> str:
        var = self.fresh("b")
        return f"cel.bind({var}, dyn({source}), type({var}) == bool ? {var} : " \
               f"{err('invalid', f'{what} must be a bool')})"


def _constant(node: s.Node) -> bool:
    if isinstance(node, s.Lit | s.Top):
        return True
    if isinstance(node, s.Disjunction):
        return all(isinstance(o, s.Lit) for o in node.options)
    if isinstance(node, s.ListLit):
        return all(isinstance(e, s.Node) and _constant(e) for e in node.elems)
    if isinstance(node, s.Struct):
        return all(isinstance(d, s.Field) and _constant(d.value) for d in node.decls)
    return False


def _shallow_path(node: s.Node) -> bool:
    """``object.kind``: one step below an input, which CUE can only find missing (an input is a struct)."""
    return isinstance(node, s.Sel) and isinstance(node.base, s.Ref) and node.base.name in INPUTS


def _data_path(node: s.Node) -> bool:
    """``data.object``, ``data.extraParams."otherObject"``: constant selectors below ``data``."""
    if not isinstance(node, s.Sel):
        return False
    while isinstance(node, s.Sel):
        node = node.base
    return isinstance(node, s.Ref) and node.name == "data"


def _chain_helper(compiler: Compiler, node: s.Node, seen: frozenset[str] = frozenset()) -> bool:
    """A path (constant steps) from an input or from another such helper: inlined where read."""
    while isinstance(node, s.Sel | s.Index):
        if isinstance(node, s.Index) and not (isinstance(node.index, s.Lit)
                                              and type(node.index.value) in (int, str)):
            return False
        node = node.base
    if not isinstance(node, s.Ref):
        return False
    helper = compiler.helpers.get(node.name)
    if helper is not None:
        return node.name not in seen and _chain_helper(compiler, helper.decl.value, seen | {node.name})
    return node.name in INPUTS
