"""A validate rule checked and compiled: its template condition rendered, its ``cel`` or
``javascript`` check, a ``messageTemplate`` refusal, and its ``validationActions``."""

from __future__ import annotations

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.kubemod import fanout
from kinitiras_py.engine.policies.checker import (
    REF_SOURCES_WITH_PARAMS,
    Checker,
    check_reference,
    compile_cel,
    cue_rule,
    dict_of,
    javascript,
    list_of,
    user_cel,
)
from kinitiras_py.engine.policies.compiled import EMPTY, CompiledValidateRule, normalise_operations
from kinitiras_py.engine.rendering import render
from kinitiras_py.engine.rules import jsrules

_ORDERING_CONDS = ("Gt", "Gte", "Lt", "Lte")
_PROCESSED_CONDS = ("Equal", "NotEqual", *_ORDERING_CONDS)
_LIST_CONDS = ("In", "NotIn")
# The static result types a `cel` check may have (cel-expr-python type names).
_VALIDATE_RESULTS = ("BOOL", "MAP", "DYN")


def _condition_semantics(cond: Obj, path: str) -> list[PolicyError]:
    """Combinations the renderer accepts but that could only fail or mislead at run time."""
    errors = []
    op = cond.get("cond")
    value = cond.get("value")
    constant = None
    if isinstance(value, dict) and not isinstance(cond.get("valueRef"), dict):
        try:
            constant = render.constant_value(value, f"{path}.value")
        except PolicyError:
            constant = None
    if op in _LIST_CONDS and constant is not None and not isinstance(constant, list):
        errors.append(PolicyError(f"{path}.value", f"{op} needs a list: set stringSlice, integerSlice or "
                                  f"floatSlice (got a single value {constant!r})"))
    if op in _ORDERING_CONDS and isinstance(constant, list | dict | bool):
        errors.append(PolicyError(f"{path}.value", f"{op} compares a number or a string, got {constant!r}"))
    if cond.get("valueProcess"):
        if op not in _PROCESSED_CONDS:
            errors.append(PolicyError(f"{path}.valueProcess",
                                      f"valueProcess applies to {', '.join(_PROCESSED_CONDS)} only, not {op}"))
        elif constant is not None and not _numeric(constant):
            errors.append(PolicyError(f"{path}.value", f"valueProcess needs a number, got {constant!r}"))
    return errors


def _reject_source(text: str, path: str) -> str:
    """CEL refusing the request with the rendered ``text`` as the reason."""
    message = fanout.with_scope(fanout.template_cel(text, path), "null", ())
    return f'{{"valid": false, "reason": {message}}}'


def _numeric(value: JSON) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return True


def validate_rule(checker: Checker, rule: Obj, index: int, path: str) -> tuple[CompiledValidateRule, str | None]:
    """One validate rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    cue = cue_rule(checker, errors, rule.get("cue"), "validate", f"{path}.cue",
                   f"/spec/validateRules/{index}/cueCel")
    source = None
    rendered = None
    refs: dict[str, Obj] = {}
    message = ""
    allow_mode = False
    template = rule.get("template")
    if isinstance(template, dict):
        source = checker.collect(errors, render.render_condition, template, f"{path}.template")
        if source is not None:
            rendered = checker.collect(errors, compile_cel, source, f"{path}.template")
        cond = dict_of(template.get("condition"))
        cpath = f"{path}.template.condition"
        if source is not None:
            errors += _condition_semantics(cond, cpath)
        message = str(cond.get("message") or "")
        allow_mode = cond.get("affectMode") == "allow"
        for name in ("dataRef", "valueRef"):
            ref = cond.get(name)
            if isinstance(ref, dict):
                check_reference(checker, ref, f"{cpath}.{name}")
                if ref.get("from") in REF_SOURCES_WITH_PARAMS:
                    refs[name] = ref
        checker.check_cel(errors, rendered, f"{path}.template", refs)
    custom = None
    if rule.get("cel"):
        custom = checker.collect(errors, user_cel, rule["cel"], f"{path}.cel", _VALIDATE_RESULTS,
                                 "a validate rule must return a bool or a map {valid, reason}")
        checker.check_cel(errors, custom, f"{path}.cel", refs)
    script = javascript(checker, errors, rule, jsrules.VALIDATE, path)
    reject = rule.get("messageTemplate")
    if isinstance(reject, str) and not (template or rule.get("cel") or "javascript" in rule or rule.get("cue")):
        # A refusal of everything the policy applies to: its matchConditions do the checking.
        source = checker.collect(errors, _reject_source, reject, f"{path}.messageTemplate")
        if source is not None:
            rendered = checker.collect(errors, compile_cel, source, f"{path}.messageTemplate")
    elif reject is not None:
        errors.append(PolicyError(f"{path}.messageTemplate", "only for a rule with neither template, cel nor "
                                  "javascript (use message, or return {valid, reason} from cel)"))
    if not (template or rule.get("cel") or "javascript" in rule or rule.get("cue") or reject is not None):
        errors.append(PolicyError(path, "no check: set template, cel or javascript (or messageTemplate alone, "
                                        "to refuse whatever the policy's matchConditions select)"))
    actions = list_of(rule.get("validationActions")) or ["Deny"]
    if "Deny" in actions and "Warn" in actions:
        errors.append(PolicyError(f"{path}.validationActions", "Deny and Warn together make no sense: pick one"))
    for i, action in enumerate(actions):
        if action in actions[:i]:
            errors.append(PolicyError(f"{path}.validationActions[{i}]", f"duplicate action {action!r}"))
    if errors:
        raise PolicyErrors(errors)
    return CompiledValidateRule(
        index=index, operations=normalise_operations(rule.get("targetOperations")),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), actions=frozenset(actions),
        message=str(rule.get("message") or message), allow_mode=allow_mode, rendered=rendered,
        cue=cue, cel=custom, javascript=script, refs=refs or EMPTY,
    ), source
