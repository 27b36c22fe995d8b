"""A policy dict → a CompiledPolicy: model checks, semantic checks, rendering, CEL compilation.

This is also the policy check the webhook runs when a policy is admitted: every problem is
reported with its field path, all at once. Compilation happens once per policy version.
"""

from __future__ import annotations

import functools
from typing import Any

from kinitiras_py.api import policies as models
from kinitiras_py.base.errors import CelCompileError, PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine import origin, selectors
from kinitiras_py.engine.compiled import CompiledPolicy, OverrideRule, ValidateRule, normalise_operations
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.rendering import render

CUE_REFUSED = ("CUE rules are not supported: kinitiras-py has no CUE runtime. "
               "Write the rule in CEL with the `cel` field instead")


def compile_policy(obj: Obj) -> CompiledPolicy:
    """Check and compile a policy; raise PolicyErrors listing every problem with its field path."""
    parsed = models.parse_policy(obj)
    ref = models.policy_ref(obj)
    errors: list[PolicyError] = []
    spec = obj.get("spec") or {}
    for i, sel in enumerate(spec.get("resourceSelectors") or []):
        base = f"spec.resourceSelectors[{i}]"
        if isinstance(sel.get("labelSelector"), dict):
            errors += selectors.validate_label_selector(sel["labelSelector"], f"{base}.labelSelector")
        if isinstance(sel.get("fieldSelector"), dict):
            errors += selectors.validate_field_selector(sel["fieldSelector"], f"{base}.fieldSelector")
    kind = str(obj.get("kind"))
    build = _override_rule if kind in ("OverridePolicy", "ClusterOverridePolicy") else _validate_rule
    field = "overrideRules" if build is _override_rule else "validateRules"
    rules: list[Any] = []
    rendered: dict[int, str] = {}
    for i, rule in enumerate(spec.get(field) or []):
        try:
            compiled, source = build(rule, i, f"spec.{field}[{i}]")
        except PolicyErrors as e:
            errors += e.errors
            continue
        rules.append(compiled)
        if source is not None:
            rendered[i] = source
    if errors:
        raise PolicyErrors(errors, ref)
    meta = obj.get("metadata") or {}
    return CompiledPolicy(
        kind=kind, name=str(meta.get("name", "")), namespace=meta.get("namespace") if kind not in
        ("ClusterOverridePolicy", "ClusterValidatePolicy") else None,
        uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0),
        selectors=list(spec.get("resourceSelectors") or []), rules=tuple(rules), rendered=rendered,
    ) if parsed is not None else _unreachable()


def _unreachable() -> CompiledPolicy:
    raise AssertionError("parse_policy returned None")


@functools.lru_cache(maxsize=4096)
def _compile_cel(source: str, path: str) -> cel.Program:
    try:
        return cel.compile_program(source)
    except CelCompileError as e:
        raise PolicyErrors([PolicyError(path, f"invalid CEL: {e}")]) from None


def _collect(errors: list[PolicyError], fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except PolicyErrors as e:
        errors += e.errors
    except PolicyError as e:
        errors.append(e)
    return None


def _override_rule(rule: Obj, index: int, path: str) -> tuple[OverrideRule, str | None]:
    errors: list[PolicyError] = []
    over = rule.get("overriders") or {}
    opath = f"{path}.overriders"
    if over.get("cue"):
        errors.append(PolicyError(f"{opath}.cue", CUE_REFUSED))
    source = None
    rendered = None
    refs: dict[str, Obj] = {}
    template = over.get("template")
    if isinstance(template, dict):
        source = _collect(errors, render.render_override, template, f"{opath}.template")
        if source is not None:
            rendered = _collect(errors, _compile_cel, source, f"{opath}.template")
        ref = template.get("valueRef")
        if isinstance(ref, dict) and ref.get("from") in ("k8s", "owner", "http") and not template.get("value"):
            refs["valueRef"] = ref
    custom = _collect(errors, _compile_cel, over["cel"], f"{opath}.cel") if over.get("cel") else None
    plaintext = list(over.get("plaintext") or [])
    errors += _check_plaintext(plaintext, f"{opath}.plaintext")
    entries = list(over.get("origin") or [])
    errors += origin.validate_origin(entries, f"{opath}.origin")
    if not (template or over.get("cel") or plaintext or entries or over.get("cue")):
        errors.append(PolicyError(opath, "no overrider: set template, cel, plaintext or origin"))
    if errors:
        raise PolicyErrors(errors)
    return OverrideRule(
        index=index, operations=normalise_operations(rule.get("targetOperations")),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), rendered=rendered, cel=custom,
        plaintext=plaintext, origin=entries, refs=refs,
    ), source


def _check_plaintext(ops: list[Obj], path: str) -> list[PolicyError]:
    errors = []
    for i, op in enumerate(ops):
        if op.get("op") not in ("add", "replace", "remove"):
            errors.append(PolicyError(f"{path}[{i}].op", f"must be add, replace or remove; got {op.get('op')!r}"))
        target = op.get("path")
        if not isinstance(target, str) or (target and not target.startswith("/")):
            errors.append(PolicyError(f"{path}[{i}].path", f"must be a JSON pointer starting with '/'; got {target!r}"))
        if op.get("op") in ("add", "replace") and "value" not in op:
            errors.append(PolicyError(f"{path}[{i}].value", f"op {op.get('op')} needs a value"))
    return errors


def _validate_rule(rule: Obj, index: int, path: str) -> tuple[ValidateRule, str | None]:
    errors: list[PolicyError] = []
    if rule.get("cue"):
        errors.append(PolicyError(f"{path}.cue", CUE_REFUSED))
    source = None
    rendered = None
    refs: dict[str, Obj] = {}
    message = ""
    allow_mode = False
    template = rule.get("template")
    if isinstance(template, dict):
        source = _collect(errors, render.render_condition, template, f"{path}.template")
        if source is not None:
            rendered = _collect(errors, _compile_cel, source, f"{path}.template")
        cond = template.get("condition") or {}
        message = str(cond.get("message") or "")
        allow_mode = cond.get("affectMode") == "allow"
        for name in ("dataRef", "valueRef"):
            ref = cond.get(name)
            if isinstance(ref, dict) and ref.get("from") in ("k8s", "owner", "http"):
                refs[name] = ref
    custom = _collect(errors, _compile_cel, rule["cel"], f"{path}.cel") if rule.get("cel") else None
    if not (template or rule.get("cel") or rule.get("cue")):
        errors.append(PolicyError(path, "no check: set template or cel"))
    actions = rule.get("validationActions") or ["Deny"]
    if "Deny" in actions and "Warn" in actions:
        errors.append(PolicyError(f"{path}.validationActions", "Deny and Warn together make no sense: pick one"))
    if errors:
        raise PolicyErrors(errors)
    return ValidateRule(
        index=index, operations=normalise_operations(rule.get("targetOperations")),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), actions=frozenset(actions),
        message=str(rule.get("message") or message), allow_mode=allow_mode, rendered=rendered,
        cel=custom, refs=refs,
    ), source
