"""The ``inject`` kind: a template of type ``inject`` (PodPreset's job), whose rendered CEL returns a
plan that :mod:`..running.injection` combines with every other inject rule matching the pod."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.api.injection import ON_CONFLICT
from kinitiras_py.api.overrides import OverrideRule, OverrideRuleTemplate
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kinds.base import Inputs, OverrideStep, patch_ops
from kinitiras_py.engine.objects import selectors


@dataclass(frozen=True, slots=True)
class InjectOverrider:
    """An override rule's inject template: its program, ``onConflict`` and own marker."""

    program: cel.Program
    on_conflict: str
    marker: tuple[str, str | None] | None = None
    """The annotation's key and value (None: the policy's resourceVersion) when the template has its
    own ``marker``; None for ours (:func:`..rendering.injecting.marker_key`)."""

    def plan(self, inputs: Inputs) -> JSON:
        """What the rendered CEL returns on ``inputs``: the plan :mod:`..running.injection` combines."""
        return self.program.evaluate(inputs)

    def step(self, run: OverrideStep) -> None:
        """Run alone, as a rule's own step: a plan is not operations, so the rule fails saying so
        (inject rules run combined, at the place of the first one)."""
        run.apply(patch_ops(self.program.evaluate(run.inputs()), "the rendered template", True))


def compile_override(checker: Checker, errors: list[PolicyError], rule: OverrideRule,
                     template: OverrideRuleTemplate | None, path: str,
                     program: cel.Program | None) -> InjectOverrider | None:
    """The inject ``template`` of ``rule`` (overriders at ``path``) with its rendered ``program``;
    None when ``template`` is not an inject template (or its program was refused)."""
    if template is None or template.type != "inject":
        return None
    errors += _alone(rule, path)
    marker = checker.collect(errors, _own_marker, template, f"{path}.template")
    mode = template.inject.on_conflict if template.inject is not None else None
    on_conflict = mode if mode in ON_CONFLICT else "Skip"
    return None if program is None else InjectOverrider(program, on_conflict, marker)


def _own_marker(template: OverrideRuleTemplate, path: str) -> tuple[str, str | None] | None:
    """An inject template's own ``marker``: its annotation key and value (None: the policy's
    resourceVersion); None when the rule writes ours. PolicyError when the key cannot be one."""
    marker = template.inject.marker if template.inject is not None else None
    if marker is None:
        return None  # absent, or of a wrong type (the policy's model reports that)
    if problem := selectors.annotation_key_problem(marker.key):
        raise PolicyError(f"{path}.inject.marker.key", problem)
    return marker.key, marker.value


def _alone(rule: OverrideRule, path: str) -> list[PolicyError]:
    """An inject template runs with every other inject rule matching the pod, so it cannot share its
    rule with overriders that run in the rule's own order."""
    over = rule.overriders
    parts = (("cel", over.cel), ("javascript", over.javascript), ("plaintext", over.plaintext),
             ("origin", over.origin)) if over is not None else ()
    return [PolicyError(f"{path}.{name}", "an inject template runs together with every other inject rule "
                        "matching the pod, at the place of the first one: put this overrider in another rule")
            for name, part in parts if part]
