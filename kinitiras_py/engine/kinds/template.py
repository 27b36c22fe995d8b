"""The ``template`` kind: a template rendered to CEL when the policy is admitted (``renderedCel``),
the first overrider of a rule to run, and the first check of a validate rule (its ``condition``,
or a ``messageTemplate`` refusing what the policy's matchConditions select)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kinitiras_py.api.overrides import OverrideRuleTemplate
from kinitiras_py.api.validations import ValidateCondition, ValidateRuleTemplate
from kinitiras_py.api.values import ConstantValue
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.checking.checker import (
    REF_SOURCES_WITH_PARAMS,
    Checker,
    check_reference,
    compile_cel,
)
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kinds.base import Inputs, OverrideStep, failed, patch_ops
from kinitiras_py.engine.kubemod import fanout
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.rendering import render


@dataclass(frozen=True, slots=True)
class TemplateOverrider:
    """An override rule's rendered template."""

    program: cel.Program

    def step(self, run: OverrideStep) -> None:
        """Apply the operations the rendered CEL returns."""
        run.apply(patch_ops(self.program.evaluate(run.inputs()), "the rendered template", True))


@dataclass(frozen=True, slots=True)
class TemplateCheck:
    """A validate rule's rendered template (its condition, or its ``messageTemplate`` refusal)."""

    program: cel.Program

    def step(self, variables: Inputs, fallback: str) -> str | None:
        """Why the object fails the rendered condition, if it does."""
        return failed(self.program.evaluate(variables), "the rendered template", fallback)


def compile_override(checker: Checker, errors: list[PolicyError], template: OverrideRuleTemplate, path: str,
                     refs: dict[str, Obj]) -> tuple[cel.Program | None, str | None]:
    """The override ``template`` at ``path`` rendered and compiled: its program (None when refused)
    and the source it rendered. A ``valueRef`` to fetch goes into ``refs``."""
    source = checker.collect(errors, render.render_override, template, path)
    rendered = None
    if source is not None:
        rendered = checker.collect(errors, compile_cel, source, path)
    if source is not None or checker.tolerant:
        # With model errors, a field that failed may have stopped the rendering: the keys are still checked.
        errors += _metadata_keys(template, path)
    ref = template.value_ref
    if ref is not None:
        check_reference(checker, ref, f"{path}.valueRef")
        if ref.from_ in REF_SOURCES_WITH_PARAMS and not _written(template.value):
            refs["valueRef"] = ref.raw  # resolved as written, on every request
    checker.check_cel(errors, rendered, path, refs)
    return rendered, source


def _written(value: ConstantValue | None) -> bool:
    """Whether a constant has any field written (``value: {}`` wins over nothing, as before)."""
    return value is not None and value.written()


def _metadata_keys(template: OverrideRuleTemplate, path: str) -> list[PolicyError]:
    """Annotation and label keys must be qualified names, label values valid label values."""
    kind = template.type
    if kind not in ("annotations", "labels"):
        return []
    value = template.value
    # (key, where the key is written, label value or None, where the value is written)
    entries: list[tuple[Any, str, Any, str]] = []
    if value is not None and value.string_map and template.operation != "remove":
        entries = [(k, f"{path}.value.stringMap[{k}]", v, f"{path}.value.stringMap[{k}]")
                   for k, v in value.string_map.items()]
    elif template.path is not None:
        # A remove names its key in path; its value (if any) is ignored.
        text = (_constant_text(value, f"{path}.value")
                if value is not None and _written(value) and template.operation != "remove" else None)
        entries = [(template.path, f"{path}.path", text, f"{path}.value")]
    errors = []
    for key, key_path, text, value_path in entries:
        labels = {key: text if kind == "labels" and isinstance(text, str) else ""}
        for problem in selectors.validate_label_selector({"matchLabels": labels}, key_path):
            if problem.reason.startswith("invalid label key"):
                errors.append(PolicyError(key_path, problem.reason.replace("label key", f"{kind[:-1]} key")))
            else:
                errors.append(PolicyError(value_path, problem.reason.replace("invalid value", "invalid label value")))
    return errors


def _constant_text(value: ConstantValue, path: str) -> str | None:
    """The constant's text; None when it has none (rendering reported it, or a field of it failed its model)."""
    try:
        return render.constant_text(value, path)
    except PolicyError:
        return None


@dataclass(frozen=True, slots=True)
class Condition:
    """A validate rule's template compiled: its check, the source it rendered, its ``message`` and
    whether it is in allow mode."""

    check: TemplateCheck | None
    source: str | None
    message: str
    allow_mode: bool


def compile_check(checker: Checker, errors: list[PolicyError], template: ValidateRuleTemplate, path: str,
                  refs: dict[str, Obj]) -> Condition:
    """The validate ``template`` at ``path`` rendered and compiled; its ``dataRef`` and
    ``valueRef`` to fetch go into ``refs``."""
    source = checker.collect(errors, render.render_condition, template, path)
    rendered = None
    if source is not None:
        rendered = checker.collect(errors, compile_cel, source, path)
    cond = template.condition
    cpath = f"{path}.condition"
    if source is not None and cond is not None:
        errors += _condition_semantics(cond, cpath)
    written = (("dataRef", cond.data_ref), ("valueRef", cond.value_ref)) if cond is not None else ()
    for name, ref in written:
        if ref is not None:
            check_reference(checker, ref, f"{cpath}.{name}")
            if ref.from_ in REF_SOURCES_WITH_PARAMS:
                refs[name] = ref.raw  # resolved as written, on every request
    checker.check_cel(errors, rendered, path, refs)
    return Condition(None if rendered is None else TemplateCheck(rendered), source,
                     (cond and cond.message) or "", cond is not None and cond.affect_mode == "allow")


def compile_reject(checker: Checker, errors: list[PolicyError], text: str,
                   path: str) -> tuple[TemplateCheck | None, str | None]:
    """A ``messageTemplate`` at ``path``: a check refusing every object with the rendered ``text``
    as the reason, and its source."""
    source = checker.collect(errors, _reject_source, text, path)
    if source is None:
        return None, None
    rendered = checker.collect(errors, compile_cel, source, path)
    return None if rendered is None else TemplateCheck(rendered), source


_ORDERING_CONDS = ("Gt", "Gte", "Lt", "Lte")
_PROCESSED_CONDS = ("Equal", "NotEqual", *_ORDERING_CONDS)
_LIST_CONDS = ("In", "NotIn")


def _condition_semantics(cond: ValidateCondition, path: str) -> list[PolicyError]:
    """Combinations the renderer accepts but that could only fail or mislead at run time."""
    errors = []
    op = cond.cond
    constant = None
    if cond.value is not None and cond.value_ref is None:
        try:
            constant = render.constant_value(cond.value, f"{path}.value")
        except PolicyError:
            constant = None
    if op in _LIST_CONDS and constant is not None and not isinstance(constant, list):
        errors.append(PolicyError(f"{path}.value", f"{op} needs a list: set stringSlice, integerSlice or "
                                  f"floatSlice (got a single value {constant!r})"))
    if op in _ORDERING_CONDS and isinstance(constant, list | dict | bool):
        errors.append(PolicyError(f"{path}.value", f"{op} compares a number or a string, got {constant!r}"))
    if cond.value_process is not None and cond.value_process.raw:
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
