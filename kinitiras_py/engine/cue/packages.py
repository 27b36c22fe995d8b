"""Calls of CUE's ``strings``, ``strconv``, ``regexp`` and ``list`` functions as CEL.

Each function is compiled only where CEL computes exactly what Go does (CUE's builtins are Go's).
Where they part, the compiled program fails with ``cue: unsupported`` instead of giving another
value: Go counts bytes and cases Unicode, CEL counts code points and cases ASCII, so
``ToUpper``, ``ToLower`` and ``Index`` take ASCII strings only; an empty separator or search
string (Go splits or inserts between runes) and ``FormatInt`` in a base other than 10 fail too.
``Atoi`` accepts exactly Go's syntax (a sign, then decimal digits; CEL's ``int`` also skips spaces).
"""

from __future__ import annotations

from kinitiras_py.engine.cue import tree as s
from kinitiras_py.engine.cue.compiler import Compiler, _Ctx, err
from kinitiras_py.engine.cue.tree import Unsupported

_ASCII = "'^[\\\\x00-\\\\x7f]*$'"
# Go's spellings of a bool; braces doubled because the bodies go through str.format.
_BOOLS = "{{'1': true, 't': true, 'T': true, 'TRUE': true, 'true': true, 'True': true, " \
         "'0': false, 'f': false, 'F': false, 'FALSE': false, 'false': false, 'False': false}}"

# name -> (the CEL type of each argument, or "" for any; the body over {a0}, {a1}, ... with {e} a
# fresh variable, {bad} an invalid-argument failure and {no} a case compiled as unsupported).
_TABLE: dict[str, tuple[tuple[str, ...], str]] = {
    "strings.HasPrefix": (("string", "string"), "{a0}.startsWith({a1})"),
    "strings.HasSuffix": (("string", "string"), "{a0}.endsWith({a1})"),
    "strings.Contains": (("string", "string"), "{a0}.contains({a1})"),
    "strings.Join": (("list", "string"), "{a0}.all({e}, type({e}) == string) ? {a0}.join({a1}) : {bad}"),
    "strings.ToUpper": (("string",), "{a0}.matches(" + _ASCII + ") ? {a0}.upperAscii() : {no}"),
    "strings.ToLower": (("string",), "{a0}.matches(" + _ASCII + ") ? {a0}.lowerAscii() : {no}"),
    "strings.TrimPrefix": (("string", "string"), "{a0}.startsWith({a1}) ? {a0}.substring(size({a1})) : {a0}"),
    "strings.TrimSuffix": (("string", "string"),
                           "{a0}.endsWith({a1}) ? {a0}.substring(0, size({a0}) - size({a1})) : {a0}"),
    "strings.Replace": (("string", "string", "string", "int"),
                        "{a1} == '' ? {no} : {a0}.replace({a1}, {a2}, {a3})"),
    "strings.Split": (("string", "string"), "{a1} == '' ? {no} : {a0}.split({a1})"),
    "strings.Index": (("string", "string"), "{a0}.matches(" + _ASCII + ") ? {a0}.indexOf({a1}) : {no}"),
    "strconv.Atoi": (("string",), "{a0}.matches('^[+-]?[0-9]+$') ? int({a0}) : {bad}"),
    "strconv.FormatInt": (("int", "int"), "{a1} == 10 ? string({a0}) : {no}"),
    "strconv.FormatBool": (("bool",), "{a0} ? 'true' : 'false'"),
    "strconv.ParseBool": (("string",), "{a0} in " + _BOOLS + " ? " + _BOOLS + "[{a0}] : {bad}"),
    "regexp.Match": (("string", "string"), "{a1}.matches({a0})"),
    "list.Concat": (("list",), "{a0}.all({e}, type({e}) == list) ? {a0}.flatten() : {bad}"),
    # list.Contains compares strictly (1 and 1.0 differ); structs and lists inside are not compared.
    "list.Contains": (("list", ""), "type({a1}) == map || type({a1}) == list || "
                      "{a0}.exists({e}, type({e}) == map || type({e}) == list) ? {nested} : "
                      "{a0}.exists({e}, type({e}) == type({a1}) && {e} == {a1})"),
}
FUNCTIONS = tuple(_TABLE)


def call(c: Compiler, node: s.Call, ctx: _Ctx) -> str:
    """The CEL of a call of one of :data:`FUNCTIONS` (its package imported, checked by the caller)."""
    kinds, body = _TABLE[node.name]
    if len(node.args) != len(kinds):
        raise Unsupported(node.pos, f"`{node.name}` takes {len(kinds)} argument{'s' * (len(kinds) > 1)}")
    names = [c.fresh("a") for _ in kinds]
    checks = [f"type({v}) == {k}" for v, k in zip(names, kinds, strict=True) if k]
    filled = body.format(**{f"a{i}": v for i, v in enumerate(names)}, e=c.fresh("e"),
                         bad=err("invalid", f"invalid arguments to {node.name}"),
                         no=err("unsupported", f"{node.name} of these arguments (see docs/cue.md)"),
                         nested=err("unsupported", "list.Contains of structs or lists"))
    result = f"{' && '.join(checks)} ? ({filled}) : {err('invalid', f'invalid arguments to {node.name}')}"
    for var, arg in reversed(list(zip(names, node.args, strict=True))):
        result = f"cel.bind({var}, dyn({c.expr(arg, ctx)}), {result})"
    return result
