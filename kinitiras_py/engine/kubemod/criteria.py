"""``matchConditions`` rendered to one CEL bool: every condition must hold for the policy to apply.

A condition is either CEL (``expression``, as in Kubernetes' matchConditions) or a KubeMod match
criterion, rendered with KubeMod's semantics:

* a select that is a boolean expression (a comparison, ``&&``, ``isDefined(...)``...), or a
  plain path to a boolean value, decides by itself;
* otherwise the select's values are tested: a plain path gives its value (the items, when the
  value is a list), a path with ``[*]``, ``..``, a union or a filter every value it reaches;
  undefined values are never among them, and ``null`` alone is no value;
* a value passes when ``matchValue`` equals it, else when one of ``matchValues`` does, else when
  ``matchRegex`` (RE2, unanchored: CEL's ``matches``) finds a match in it, else (none given)
  always; non-string values are compared in their printed form (Go's, see
  :func:`.kubemodlib.go_printed`); lists and maps have none and pass only when nothing is
  given to compare with;
* ``matchFor: Any`` (the default) needs one passing value, ``All`` every value and at least one;
  no value means no match;
* ``negate`` inverts the outcome.
"""

from __future__ import annotations

from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.engine.kubemod import syntax
from kinitiras_py.engine.kubemod.syntax import Call, Path, SelectError
from kinitiras_py.engine.kubemod.tocel import MAX_CEL_BYTES, Compiler
from kinitiras_py.engine.rendering.environment import cel_string

PRINTED_TYPES = "[int, double, bool]"


def _printed(v: str) -> str:
    """CEL for the printed form of ``v``: a string, or null for a list or map."""
    return (f"(type({v}) == string ? dyn({v}) : type({v}) in {PRINTED_TYPES} ? dyn(kubemod.printed({v})) "
            f": type({v}) == null_type ? dyn(\"<nil>\") : dyn(null))")


def _passes(condition: MatchCondition, v: str, compiler: Compiler) -> str:
    """CEL bool: the value ``v`` passes the comparison ``condition`` asks for."""
    p = compiler.fresh()
    if condition.match_value is not None:
        test = f"{p} == {cel_string(str(condition.match_value))}"
    elif condition.match_values:
        values = ", ".join(cel_string(str(x)) for x in condition.match_values)
        test = f"{p} in [{values}]"
    elif condition.match_regex is not None:
        test = f"{p}.matches({cel_string(str(condition.match_regex))})"
    else:
        return "true"
    return f"cel.bind({p}, {_printed(v)}, type({p}) == string && {test})"


def criterion(condition: MatchCondition, path: str) -> str:
    """CEL bool for one KubeMod criterion; raises PolicyError naming ``path.select`` when bad."""
    try:
        expr = syntax.parse(condition.select)  # type: ignore[arg-type]
        source = _criterion(expr, condition)
        if len(source) > MAX_CEL_BYTES:
            raise SelectError(f"the select is too complex: its CEL would be {len(source):,} bytes (at most "
                              f"{MAX_CEL_BYTES:,})")
        return source
    except SelectError as e:
        raise PolicyError(f"{path}.select", f"invalid select: {e}") from None


def _criterion(expr: syntax.Expr, condition: MatchCondition) -> str:
    compiler = Compiler()
    every = condition.match_for == "All"
    if isinstance(expr, Path) and expr.plain:
        def leaf(v: str, _keys: object) -> str:
            e = compiler.fresh()
            items = (f"size({v}) > 0 && {v}.all({e}, {_passes(condition, e, compiler)})" if every
                     else f"{v}.exists({e}, {_passes(condition, e, compiler)})")
            return (f"(type({v}) == bool ? {v} : type({v}) == null_type ? false : type({v}) == list "
                    f"? ({items}) : {_passes(condition, v, compiler)})")
        found = compiler.walk(expr, "any", leaf)
    elif isinstance(expr, Path):
        some = compiler.walk(expr, "any", lambda v, _k: _passes(condition, v, compiler))
        if every:
            nonempty = compiler.walk(expr, "any", lambda _v, _k: "true")
            found = f"({nonempty} && {compiler.walk(expr, 'all', lambda v, _k: _passes(condition, v, compiler))})"
        else:
            found = some
    elif isinstance(expr, Call) and expr.name == "length":
        # length() is a Go int, printed in decimal (a JSON number is a float64: 1e+06).
        found = compiler.value(expr, lambda v: _passes(condition, f"dyn(string({v}))", compiler), None)
    elif isinstance(expr, syntax.Literal) and not isinstance(expr.value, bool):
        found = compiler.value(expr, lambda v: _passes(condition, v, compiler), None)
    else:
        found = compiler.boolean(expr)
    return f"!{found}" if condition.negate else found


def render(conditions: list[MatchCondition], path: str) -> tuple[str | None, list[PolicyError]]:
    """One CEL bool for every condition (None when there are none), and the problems found."""
    parts: list[str] = []
    errors: list[PolicyError] = []
    for i, condition in enumerate(conditions):
        where = f"{path}[{i}]"
        label = condition.name or condition.select or None
        comment = f"// {where}" + (f": {_one_line(str(label))}" if label else "")
        if condition.expression is not None:
            parts.append(f"{comment}\n({condition.expression})")
            continue
        try:
            parts.append(f"{comment}\n{criterion(condition, where)}")
        except PolicyError as e:
            errors.append(e)
    if not parts or errors:
        return None, errors
    return "\n&& ".join(parts), errors


def _one_line(text: str) -> str:
    return " ".join(text.split())[:120]
