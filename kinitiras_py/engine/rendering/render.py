"""Rule templates (their typed models, :mod:`...api.overrides` and :mod:`...api.validations`) →
CEL source text.

Rendering is deterministic: the same template always gives byte-identical text. Semantic
problems raise :class:`PolicyError` naming the field under ``path`` (the template's own path,
e.g. ``spec.overrideRules[0].overriders.template``).
"""

from __future__ import annotations

import functools
from decimal import Decimal, InvalidOperation

import jinja2

from kinitiras_py.api.core import ResourceRequirements
from kinitiras_py.api.overrides import OverrideRuleTemplate
from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.api.validations import ValidateRuleTemplate
from kinitiras_py.api.values import ConstantValue
from kinitiras_py.base.errors import PolicyError, QuantityError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import builtins
from kinitiras_py.engine.evaluation.quantity import Quantity
from kinitiras_py.engine.objects import fieldpath
from kinitiras_py.engine.rendering.environment import make_environment

OVERRIDE_TYPES = ("annotations", "labels", "resources", "resourcesOversell", "tolerations", "affinity", "sidecar",
                  "inject")
OPERATIONS = ("add", "replace", "remove")
CONDITIONS = ("Equal", "NotEqual", "Exist", "NotExist", "In", "NotIn", "Gt", "Gte", "Lt", "Lte", "Regex")
_FACTORS = {"cpuFactor": ("cpu", "0.001"), "memoryFactor": ("memory", "1"), "diskFactor": ("ephemeral-storage", "1")}
_ORDERING = {"Gt": "> 0", "Gte": ">= 0", "Lt": "< 0", "Lte": "<= 0"}
MAX_PATH_TOKENS = 24
"""Most parts a reference path may have (CEL's parser would refuse the rendered expression)."""
MAX_INDEX = 2**31 - 1
"""Largest list index in a reference path (CEL integers are int64; no list comes near this)."""


@functools.cache
def _env() -> jinja2.Environment:
    return make_environment()


def _render(name: str, **context: object) -> str:
    text = _env().get_template(name).render(**context)
    # Split on "\n" only: str.splitlines() also splits on U+2028, U+0085 and friends, which may
    # sit unescaped inside a CEL string literal (a label value) and must stay there verbatim.
    return "\n".join(line.rstrip(" \t") for line in text.split("\n") if line.strip(" \t")) + "\n"


def render_override(template: OverrideRuleTemplate, path: str) -> str:
    """CEL source of an override template; raises PolicyError for a malformed template."""
    kind = template.type
    if kind not in OVERRIDE_TYPES:
        raise PolicyError(f"{path}.type", f"unknown template type {kind!r}; one of {', '.join(OVERRIDE_TYPES)}")
    if kind == "inject":
        from kinitiras_py.engine.rendering.injecting import render_inject

        return render_inject(template, path, _render)
    operation = template.operation
    if operation not in OPERATIONS:
        raise PolicyError(f"{path}.operation", f"must be one of add, replace, remove; got {operation!r}")
    names = template.container_names
    if kind == "sidecar":
        # Its CEL names the policy (the marker annotation): engine.rules.sidecars renders it with the policy.
        raise PolicyError(path, "a sidecar template is rendered with its policy (engine.rules.sidecars)")
    if kind in ("annotations", "labels"):
        return _render_metadata(template, kind, operation, path)
    if kind == "resources":
        return _render_resources(template.resources, operation, names, path)
    if kind == "resourcesOversell":
        return _render_oversell(template, operation, names, path)
    return _render_podspec(template, kind, operation, path)


def _render_metadata(template: OverrideRuleTemplate, kind: str, operation: str, path: str) -> str:
    key = template.path
    value, ref = template.value, template.value_ref
    entries: dict[str, str] | None = None
    if operation != "remove":
        if value is not None and value.string_map:
            entries = {str(k): str(v) for k, v in sorted(value.string_map.items())}
        elif value is not None and value.written():
            entries = {_require_key(key, path): constant_text(value, f"{path}.value")}
        elif ref:
            _require_key(key, path)
            check_ref(ref, f"{path}.valueRef")
        else:
            raise PolicyError(f"{path}.value", f"{kind} {operation} needs value or valueRef")
    else:
        _require_key(key, path)
    return _render("metadata.cel.j2", kind=kind, field=kind, operation=operation, key=key, entries=entries, ref=ref)


def _require_key(key: object, path: str) -> str:
    if not isinstance(key, str) or not key:
        raise PolicyError(f"{path}.path", "the annotation or label key is required")
    return key


def constant_text(value: ConstantValue, path: str) -> str:
    """A ConstantValue as label/annotation text (first non-empty member, kinitiras' order)."""
    for scalar in (value.string, value.integer, value.float, value.boolean):
        if scalar is not None and scalar != "":
            return ("true" if scalar else "false") if isinstance(scalar, bool) else str(scalar)
    for many in (value.string_slice, value.integer_slice, value.float_slice):
        if many:
            return ",".join(str(v) for v in many)
    if value.string == "":
        return ""  # an empty label or annotation value is valid; only the string member can say so
    raise PolicyError(path, "the constant value is empty")


def constant_value(value: ConstantValue, path: str) -> JSON:
    """A ConstantValue as a typed value for conditions (floats as numbers, slices as lists)."""
    for scalar in (value.string, value.integer, value.boolean):
        if scalar is not None and scalar != "":
            return scalar
    if value.float not in (None, ""):
        return _float(value.float, f"{path}.float")
    if value.string_slice:
        return list(value.string_slice)
    if value.integer_slice:
        return list(value.integer_slice)
    if value.float_slice:
        return [_float(v, f"{path}.floatSlice[{i}]") for i, v in enumerate(value.float_slice)]
    if value.string_map:
        return dict(value.string_map)
    raise PolicyError(path, "the constant value is empty")


def _float(text: object, path: str) -> float:
    try:
        return float(Decimal(str(text)))
    except InvalidOperation:
        raise PolicyError(path, f"{text!r} is not a number") from None


def check_ref(ref: ResourceRefer, path: str) -> None:
    """Refuse a value reference that cannot work: missing k8s/http block, bad path syntax."""
    source = ref.from_
    if source not in ("current", "old", "k8s", "owner", "http"):
        raise PolicyError(f"{path}.from", f"must be one of current, old, k8s, owner, http; got {source!r}")
    if (source == "k8s" and ref.k8s is None) or (source == "http" and ref.http is None):
        raise PolicyError(f"{path}.{source}", f"from: {source} needs a {source} block")
    if ref.path:
        try:
            tokens = fieldpath.parse_path(ref.path)
        except ValueError as e:
            raise PolicyError(f"{path}.path", str(e)) from None
        # Each token is one step of the rendered CEL, whose parser stops at 32 levels of nesting.
        if len(tokens) > MAX_PATH_TOKENS:
            raise PolicyError(f"{path}.path",
                              f"the path has {len(tokens)} parts; at most {MAX_PATH_TOKENS} are supported")
        if any(isinstance(t, int) and t > MAX_INDEX for t in tokens):
            raise PolicyError(f"{path}.path", f"a list index must be at most {MAX_INDEX}")


def _quantities(block: dict[str, int | str], path: str) -> dict[str, str]:
    out = {}
    for name, raw in sorted(block.items()):
        try:
            out[str(name)] = Quantity.parse(str(raw)).canonical()
        except QuantityError as e:
            raise PolicyError(f"{path}[{name}]", str(e)) from None
    return out


def _render_resources(spec: ResourceRequirements | None, operation: str, names: list[str], path: str) -> str:
    if spec is None or not (spec.requests or spec.limits):
        raise PolicyError(f"{path}.resources", "type resources needs resources.requests or resources.limits")
    resources = {group: q for group, written in (("requests", spec.requests), ("limits", spec.limits))
                 if (q := _quantities(written, f"{path}.resources.{group}"))}
    removals = [(group, key) for group, values in resources.items() for key in values]
    return _render("resources.cel.j2", operation=operation, names=names, resources=resources, removals=removals)


def parse_factor(text: object, path: str) -> Decimal:
    """An oversell factor: a decimal string with 0 < f ≤ 1."""
    try:
        factor = Decimal(str(text).strip())
    except InvalidOperation:
        raise PolicyError(path, f"factor {text!r} is not a number") from None
    if not factor.is_finite() or not Decimal(0) < factor <= Decimal(1):
        raise PolicyError(path, f"factor {text} must be greater than 0 and at most 1")
    return factor


def _render_oversell(template: OverrideRuleTemplate, operation: str, names: list[str], path: str) -> str:
    block = template.resources_oversell
    written = {} if block is None else {"cpuFactor": block.cpu_factor, "memoryFactor": block.memory_factor,
                                        "diskFactor": block.disk_factor}
    if not any(written.values()):
        raise PolicyError(f"{path}.resourcesOversell",
                          "type resourcesOversell needs cpuFactor, memoryFactor or diskFactor")
    factors = {}
    for field, (resource, round_to) in _FACTORS.items():
        if written[field]:
            factor = parse_factor(written[field], f"{path}.resourcesOversell.{field}")
            factors[resource] = (str(factor.normalize()), round_to)
    return _render("oversell.cel.j2", operation=operation, names=names, factors=factors)


def _render_podspec(template: OverrideRuleTemplate, kind: str, operation: str, path: str) -> str:
    # Written into the CEL as the user wrote them (key order, nulls): what is stored reads as written.
    payload: JSON = ([t.raw for t in template.tolerations if t is not None] if kind == "tolerations"
                     else template.affinity.raw if template.affinity is not None else None)
    if not payload:
        raise PolicyError(f"{path}.{kind}", f"type {kind} needs {kind}")
    return _render("podspec.cel.j2", kind=kind, operation=operation, field=kind, helper=f"{kind}.{operation}",
                   payload=payload)


def render_condition(template: ValidateRuleTemplate, path: str) -> str:
    """CEL source of a validate ``condition`` template: true when the object is valid."""
    cond = template.condition
    if cond is None:
        raise PolicyError(f"{path}.condition", "type condition needs a condition")
    path = f"{path}.condition"
    op = cond.cond
    if op not in CONDITIONS:
        raise PolicyError(f"{path}.cond", f"must be one of {', '.join(CONDITIONS)}; got {op!r}")
    mode = cond.affect_mode or "reject"
    data_ref = cond.data_ref
    if data_ref is None:
        raise PolicyError(f"{path}.dataRef", "the data under test (dataRef) is required")
    check_ref(data_ref, f"{path}.dataRef")
    from kinitiras_py.engine.rendering.environment import cel_literal, ref_expr

    data_expr = ref_expr(data_ref, "dataRef")
    if op in ("Exist", "NotExist"):
        test = "d.hasValue() && d.value() != null"
        return _render("condition.cel.j2", cond=op, mode=mode, data_expr=data_expr, value_expr=None,
                       test=test if op == "Exist" else f"!({test})")
    value_ref, value = cond.value_ref, cond.value
    if value_ref is not None:
        check_ref(value_ref, f"{path}.valueRef")
        value_expr = ref_expr(value_ref, "valueRef")
    elif value is not None:
        value_expr = f"optional.of({cel_literal(constant_value(value, f'{path}.value'))})"
    else:
        raise PolicyError(f"{path}.value", f"cond {op} needs value or valueRef")
    right = "v.value()"
    process = cond.value_process
    if process is not None:
        operation = process.operation
        if operation not in ("+", "-", "*", "/"):
            raise PolicyError(f"{path}.valueProcess.operation", f"must be one of + - * /; got {operation!r}")
        with_ = process.operation_with
        check_operand(with_, f"{path}.valueProcess.operationWith")
        right = f"cond.process(v.value(), {cel_literal(operation)}, {cel_literal(str(with_))})"
    present = "d.hasValue() && v.hasValue()"
    tests = {
        "Equal": f"cond.equal(d.value(), {right})",
        "NotEqual": f"!cond.equal(d.value(), {right})",
        "In": f"cond.isIn(d.value(), {right})",
        "NotIn": f"!cond.isIn(d.value(), {right})",
        "Regex": f"string(d.value()).matches(string({right}))",
    }
    test = tests.get(op) or f"cond.compare(d.value(), {right}) {_ORDERING[op]}"
    if op == "Regex" and value_ref is None and value is not None:
        check_regex(value.string, f"{path}.value.string")
    return _render("condition.cel.j2", cond=op, mode=mode, data_expr=data_expr, value_expr=value_expr,
                   test=f"{present} && {test}")


def check_operand(value: object, path: str) -> None:
    """valueProcess.operationWith: a number or a percentage such as ``50%``."""
    text = str(value).strip() if value is not None else ""
    number = text[:-1] if text.endswith("%") else text
    try:
        held = builtins.representable(number)
    except InvalidOperation:
        raise PolicyError(path, f"{value!r} is not a number or a percentage") from None
    if not held:
        raise PolicyError(path, f"{value!r} is beyond what a double holds (magnitudes from about 5e-324 to "
                                "1.8e308, or 0): the arithmetic could only fail or lose it")


def check_regex(pattern: object, path: str) -> None:
    """A Regex condition's pattern must be a non-empty string that RE2 (what ``matches`` runs) accepts."""
    from kinitiras_py.engine.evaluation.regexes import regex_problem

    if not isinstance(pattern, str) or not pattern:
        raise PolicyError(path, "Regex needs the pattern in value.string")
    problem = regex_problem(pattern)
    if problem is not None:
        raise PolicyError(path, f"{pattern!r}: {problem} (the RE2 syntax CEL's matches uses)")
