"""Calls of CUE's ``strings``, ``strconv``, ``regexp``, ``list`` and ``math`` functions as CEL.

Each function is compiled only where CEL computes exactly what Go does (CUE's builtins are Go's).
Where they part, the compiled program fails with ``cue: unsupported`` instead of giving another
value: Go counts bytes and cases Unicode, CEL counts code points and cases ASCII, so
``ToUpper``, ``ToLower`` and ``Index`` take ASCII strings only; an empty separator or search
string (Go splits or inserts between runes) and ``FormatInt`` in a base other than 10 fail too.
``Atoi`` accepts exactly Go's syntax (a sign, then decimal digits; CEL's ``int`` also skips spaces).
``Quote`` takes printable ASCII (Go escapes other runes its own way). ``math`` rounds and takes
absolute values only: CUE computes on the decimal a JSON float is, CEL on the double it parses to,
and the two round alike below 2^52 (beyond, CUE gives other, sometimes wrong, integers). The other
``math`` functions compute in decimals of 34 digits and are refused (:data:`REFUSED`).
"""

from __future__ import annotations

from kinitiras_py.engine.cue import tree as s
from kinitiras_py.engine.cue.compiler import Compiler, _Ctx, err
from kinitiras_py.engine.cue.tree import Unsupported

_ASCII = "'^[\\\\x00-\\\\x7f]*$'"
# Go's spellings of a bool; braces doubled because the bodies go through str.format.
_BOOLS = "{{'1': true, 't': true, 'T': true, 'TRUE': true, 'true': true, 'True': true, " \
         "'0': false, 'f': false, 'F': false, 'FALSE': false, 'false': false, 'False': false}}"

# name -> (the CEL type of each argument, or "" for any; the body over {a0}, {a1}, ... with {e} and
# {f} fresh variables, {nomatch} regexp's failure, {bad} an invalid-argument failure and {no} a case
# compiled as unsupported).
# FlattenN's negative depth flattens 32 levels; a list left deeper fails as unsupported.
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
_SMALL = "4503599627370496.0"  # 2^52: below it a double and its shortest decimal round alike
_ROUND = "type({a0}) == int ? {a0} : type({a0}) == double ? ({a0} > -" + _SMALL + " && {a0} < " + _SMALL \
    + " ? int(math.%s({a0})) : {no}) : {bad}"
_TABLE.update({
    "strconv.Quote": (("string",), "{a0}.matches('^[\\\\x07-\\\\x0d\\\\x20-\\\\x7e]*$') ? strings.quote({a0}) : {no}"),
    "regexp.Find": (("string", "string"), "{a1}.matches({a0}) ? {a1}.find({a0}) : {nomatch}"),
    "regexp.FindAll": (("string", "string", "int"), "{a2} != 0 && {a1}.matches({a0}) ? "
                       "{a1}.findAll({a0}, {a2}) : {nomatch}"),
    "list.FlattenN": (("list", "int"), "{a1} >= 0 ? {a0}.flatten({a1}) : cel.bind({e}, {a0}.flatten(32), "
                      "{e}.exists({f}, type({f}) == list) ? {no} : {e})"),
    "list.SortStrings": (("list",), "{a0}.all({e}, type({e}) == string) ? {a0}.sort() : {bad}"),
    # list.Sort(l, list.Ascending | list.Descending): the order is read by :func:`call`.
    "list.Sort": (("list",), "size({a0}) <= 1 ? {a0} : {a0}.all({e}, type({e}) == int) || "
                  "{a0}.all({e}, type({e}) == string) ? {sorted} : {a0}.all({e}, type({e}) == int || "
                  "type({e}) == double) ? {no} : {bad}"),
    "math.Floor": (("",), _ROUND % "floor"),
    "math.Ceil": (("",), _ROUND % "ceil"),
    "math.Round": (("",), _ROUND % "round"),
    "math.Trunc": (("",), _ROUND % "trunc"),
    "math.Abs": (("",), "type({a0}) == int ? ({a0} < 0 ? -{a0} : {a0}) : type({a0}) == double ? "
                 "math.abs({a0}) : {bad}"),
})
FUNCTIONS = tuple(_TABLE)
_ORDERS = {"Ascending": "{a0}.sort()",
           "Descending": "cel.bind({e}, {a0}.sort(), range(size({e})).map({f}, {e}[size({e}) - 1 - {f}]))"}
_DECIMAL = "computes in decimals of 34 digits, which CEL's doubles cannot reproduce"
REFUSED = {
    **{f"math.{n}": _DECIMAL for n in ("Pow", "Sqrt", "Cbrt", "Exp", "Exp2", "Log", "Log10", "Log2", "Log1p",
                                       "Pow10", "Mod", "Remainder", "Dim", "Hypot", "Sin", "Cos", "Tan", "Asin",
                                       "Acos", "Atan", "Atan2", "Sinh", "Cosh", "Tanh", "Expm1", "Jacobi")},
    "math.RoundToEven": "rounds half to even, which CEL has no function for",
    **{f"regexp.{n}": "returns capture groups, which CEL's regular expressions do not give"
       for n in ("FindSubmatch", "FindAllSubmatch", "FindNamedSubmatch", "FindAllNamedSubmatch")},
}
"""Functions refused with their reason (other functions of the packages are refused as unknown)."""


def call(c: Compiler, node: s.Call, ctx: _Ctx) -> str:
    """The CEL of a call of one of :data:`FUNCTIONS` (its package imported, checked by the caller)."""
    kinds, body = _TABLE[node.name]
    args = node.args
    if node.name == "list.Sort":
        if len(args) != 2:
            raise Unsupported(node.pos, "`list.Sort` takes 2 arguments")
        order = args[1]
        if not (isinstance(order, s.Sel) and isinstance(order.base, s.Ref) and order.base.name == "list"
                and order.name in _ORDERS):
            raise Unsupported(order.pos, "`list.Sort` takes `list.Ascending` or `list.Descending` only "
                                         "(other comparators are not supported)")
        body = body.replace("{sorted}", _ORDERS[order.name])
        args = args[:1]
    if len(args) != len(kinds):
        raise Unsupported(node.pos, f"`{node.name}` takes {len(kinds)} argument{'s' * (len(kinds) > 1)}")
    names = [c.fresh("a") for _ in kinds]
    fail = err("invalid", f"invalid arguments to {node.name}")
    checks = [f"type({v}) == {k}" for v, k in zip(names, kinds, strict=True) if k]
    filled = body.format(**{f"a{i}": v for i, v in enumerate(names)}, e=c.fresh("e"), f=c.fresh("e"), bad=fail,
                         nomatch=err("invalid", f"{node.name}: no match"),
                         no=err("unsupported", f"{node.name} of these arguments (see docs/cue.md)"),
                         nested=err("unsupported", "list.Contains of structs or lists"))
    result = f"{' && '.join(checks)} ? ({filled}) : {fail}" if checks else f"({filled})"
    for var, arg in reversed(list(zip(names, args, strict=True))):
        result = f"cel.bind({var}, dyn({c.expr(arg, ctx)}), {result})"
    return result
