"""Rule templates (as written in the policy) → CEL source text.

Rendering is deterministic: the same template always gives byte-identical text. Semantic
problems raise :class:`PolicyError` naming the field under ``path`` (the template's own path,
e.g. ``spec.overrideRules[0].overriders.template``).
"""

from __future__ import annotations

import functools
from decimal import Decimal, InvalidOperation

import jinja2

from kinitiras_py.base.errors import PolicyError, QuantityError
from kinitiras_py.base.typedefs import JSON, Obj
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


def render_override(template: Obj, path: str) -> str:
    """CEL source of an override template; raises PolicyError for a malformed template."""
    kind = template.get("type")
    if kind not in OVERRIDE_TYPES:
        raise PolicyError(f"{path}.type", f"unknown template type {kind!r}; one of {', '.join(OVERRIDE_TYPES)}")
    if kind == "inject":
        from kinitiras_py.engine.rendering.injecting import render_inject

        return render_inject(template, path, _render)
    operation = template.get("operation")
    if operation not in OPERATIONS:
        raise PolicyError(f"{path}.operation", f"must be one of add, replace, remove; got {operation!r}")
    names = template.get("containerNames") or []
    if kind == "sidecar":
        # Its CEL names the policy (the marker annotation): engine.rules.sidecars renders it with the policy.
        raise PolicyError(path, "a sidecar template is rendered with its policy (engine.rules.sidecars)")
    if kind in ("annotations", "labels"):
        return _render_metadata(template, str(kind), str(operation), path)
    if kind == "resources":
        return _render_resources(template, str(operation), names, path)
    if kind == "resourcesOversell":
        return _render_oversell(template, str(operation), names, path)
    return _render_podspec(template, str(kind), str(operation), path)


def _render_metadata(template: Obj, kind: str, operation: str, path: str) -> str:
    key = template.get("path")
    value, ref = template.get("value"), template.get("valueRef")
    entries: dict[str, str] | None = None
    if operation != "remove":
        string_map = (value or {}).get("stringMap") if isinstance(value, dict) else None
        if string_map:
            entries = {str(k): str(v) for k, v in sorted(string_map.items())}
        elif value:
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


def constant_text(value: Obj, path: str) -> str:
    """A ConstantValue as label/annotation text (first non-empty member, kinitiras' order)."""
    for name in ("string", "integer", "float", "boolean"):
        if value.get(name) is not None and value.get(name) != "":
            v = value[name]
            return ("true" if v else "false") if isinstance(v, bool) else str(v)
    for name in ("stringSlice", "integerSlice", "floatSlice"):
        if value.get(name):
            return ",".join(str(v) for v in value[name])
    if value.get("string") == "":
        return ""  # an empty label or annotation value is valid; only the string member can say so
    raise PolicyError(path, "the constant value is empty")


def constant_value(value: Obj, path: str) -> JSON:
    """A ConstantValue as a typed value for conditions (floats as numbers, slices as lists)."""
    for name in ("string", "integer", "boolean"):
        if value.get(name) is not None and value.get(name) != "":
            return value[name]
    if value.get("float") not in (None, ""):
        return _float(value["float"], f"{path}.float")
    if value.get("stringSlice"):
        return list(value["stringSlice"])
    if value.get("integerSlice"):
        return list(value["integerSlice"])
    if value.get("floatSlice"):
        return [_float(v, f"{path}.floatSlice[{i}]") for i, v in enumerate(value["floatSlice"])]
    if value.get("stringMap"):
        return dict(value["stringMap"])
    raise PolicyError(path, "the constant value is empty")


def _float(text: object, path: str) -> float:
    try:
        return float(Decimal(str(text)))
    except InvalidOperation:
        raise PolicyError(path, f"{text!r} is not a number") from None


def check_ref(ref: Obj, path: str) -> None:
    """Refuse a value reference that cannot work: missing k8s/http block, bad path syntax."""
    source = ref.get("from")
    if source not in ("current", "old", "k8s", "owner", "http"):
        raise PolicyError(f"{path}.from", f"must be one of current, old, k8s, owner, http; got {source!r}")
    if source in ("k8s", "http") and not isinstance(ref.get(source), dict):
        raise PolicyError(f"{path}.{source}", f"from: {source} needs a {source} block")
    if source == "http" and not (ref["http"].get("url")):
        raise PolicyError(f"{path}.http.url", "the URL is required")
    if ref.get("path"):
        try:
            tokens = fieldpath.parse_path(str(ref["path"]))
        except ValueError as e:
            raise PolicyError(f"{path}.path", str(e)) from None
        # Each token is one step of the rendered CEL, whose parser stops at 32 levels of nesting.
        if len(tokens) > MAX_PATH_TOKENS:
            raise PolicyError(f"{path}.path",
                              f"the path has {len(tokens)} parts; at most {MAX_PATH_TOKENS} are supported")
        if any(isinstance(t, int) and t > MAX_INDEX for t in tokens):
            raise PolicyError(f"{path}.path", f"a list index must be at most {MAX_INDEX}")


def _quantities(block: object, path: str) -> dict[str, str]:
    if not isinstance(block, dict):
        return {}
    out = {}
    for name, raw in sorted(block.items()):
        try:
            out[str(name)] = Quantity.parse(str(raw)).canonical()
        except QuantityError as e:
            raise PolicyError(f"{path}[{name}]", str(e)) from None
    return out


def _render_resources(template: Obj, operation: str, names: list[str], path: str) -> str:
    spec = template.get("resources")
    if not isinstance(spec, dict) or not (spec.get("requests") or spec.get("limits")):
        raise PolicyError(f"{path}.resources", "type resources needs resources.requests or resources.limits")
    resources = {group: q for group in ("requests", "limits")
                 if (q := _quantities(spec.get(group), f"{path}.resources.{group}"))}
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


def _render_oversell(template: Obj, operation: str, names: list[str], path: str) -> str:
    block = template.get("resourcesOversell")
    if not isinstance(block, dict) or not any(block.get(k) for k in _FACTORS):
        raise PolicyError(f"{path}.resourcesOversell",
                          "type resourcesOversell needs cpuFactor, memoryFactor or diskFactor")
    factors = {}
    for field, (resource, round_to) in _FACTORS.items():
        if block.get(field):
            factor = parse_factor(block[field], f"{path}.resourcesOversell.{field}")
            factors[resource] = (str(factor.normalize()), round_to)
    return _render("oversell.cel.j2", operation=operation, names=names, factors=factors)


def _render_podspec(template: Obj, kind: str, operation: str, path: str) -> str:
    payload = template.get(kind)
    if not payload:
        raise PolicyError(f"{path}.{kind}", f"type {kind} needs {kind}")
    return _render("podspec.cel.j2", kind=kind, operation=operation, field=kind, helper=f"{kind}.{operation}",
                   payload=payload)


def render_condition(template: Obj, path: str) -> str:
    """CEL source of a validate ``condition`` template: true when the object is valid."""
    if template.get("type", "condition") != "condition":
        raise PolicyError(f"{path}.type", f"must be condition; got {template.get('type')!r}")
    cond = template.get("condition")
    if not isinstance(cond, dict):
        raise PolicyError(f"{path}.condition", "type condition needs a condition")
    path = f"{path}.condition"
    op = cond.get("cond")
    if op not in CONDITIONS:
        raise PolicyError(f"{path}.cond", f"must be one of {', '.join(CONDITIONS)}; got {op!r}")
    mode = cond.get("affectMode") or "reject"
    if mode not in ("reject", "allow"):
        raise PolicyError(f"{path}.affectMode", f"must be reject or allow; got {mode!r}")
    data_ref = cond.get("dataRef")
    if not isinstance(data_ref, dict):
        raise PolicyError(f"{path}.dataRef", "the data under test (dataRef) is required")
    check_ref(data_ref, f"{path}.dataRef")
    from kinitiras_py.engine.rendering.environment import cel_literal, ref_expr

    data_expr = ref_expr(data_ref, "dataRef")
    if op in ("Exist", "NotExist"):
        test = "d.hasValue() && d.value() != null"
        return _render("condition.cel.j2", cond=op, mode=mode, data_expr=data_expr, value_expr=None,
                       test=test if op == "Exist" else f"!({test})")
    value_ref = cond.get("valueRef")
    if isinstance(value_ref, dict):
        check_ref(value_ref, f"{path}.valueRef")
        value_expr = ref_expr(value_ref, "valueRef")
    elif isinstance(cond.get("value"), dict):
        value_expr = f"optional.of({cel_literal(constant_value(cond['value'], f'{path}.value'))})"
    else:
        raise PolicyError(f"{path}.value", f"cond {op} needs value or valueRef")
    right = "v.value()"
    process = cond.get("valueProcess")
    if isinstance(process, dict) and process:
        operation = process.get("operation")
        if operation not in ("+", "-", "*", "/"):
            raise PolicyError(f"{path}.valueProcess.operation", f"must be one of + - * /; got {operation!r}")
        with_ = process.get("operationWith")
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
    if op == "Regex" and not isinstance(value_ref, dict):
        check_regex(cond["value"].get("string"), f"{path}.value.string")
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
