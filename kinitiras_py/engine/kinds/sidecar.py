"""The ``sidecar`` kind: a template of type ``sidecar`` (:mod:`..rules.sidecars`), rendered to CEL
when inline, or per ConfigMap text on the request path when kept in a ConfigMap."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.api.overrides import OverrideRuleTemplate
from kinitiras_py.api.sidecar import SidecarTemplate
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking import boundary
from kinitiras_py.engine.checking.checker import REF_SOURCES_WITH_PARAMS, Checker, check_reference
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kinds.base import OverrideStep, patch_ops
from kinitiras_py.engine.rendering.sidecar import PARAM_PREFIX
from kinitiras_py.engine.rules import sidecars


@dataclass(frozen=True, slots=True)
class SidecarOverrider:
    """An override rule's sidecar template: its group and where it is kept, and its program when inline."""

    rule: sidecars.SidecarRule
    program: cel.Program | None = None
    """None for a template kept in a ConfigMap: the request path compiles the ConfigMap's text."""

    def step(self, run: OverrideStep) -> None:
        """Apply the operations the template's CEL returns; it may deny the request instead."""
        program = run.rendered or self.program
        if program is not None:
            run.apply(patch_ops(program.evaluate(run.inputs()), "the rendered template", True))


def compile_override(checker: Checker, errors: list[PolicyError], template: OverrideRuleTemplate, path: str,
                     refs: dict[str, Obj]) -> tuple[SidecarOverrider | None, str | None]:
    """The sidecar ``template`` at ``path`` checked, and rendered and compiled when inline; with the
    source it rendered. Fetched valueRefs go into ``refs``."""
    source, rule = _sidecar(checker, errors, template, path, refs)
    if rule is None:
        return None, None
    program = None
    if source is not None:
        program = checker.collect(errors, sidecars.compile_source, source, f"{path}.sidecar.template")
    return SidecarOverrider(rule, program), source


def _sidecar(checker: Checker, errors: list[PolicyError], template: OverrideRuleTemplate, path: str,
             refs: dict[str, Obj]) -> tuple[str | None, sidecars.SidecarRule | None]:
    """Check a sidecar template; render it when inline. Fetched valueRefs go into ``refs``."""
    problems = sidecars.check_template(template, path, checker.namespace is None)
    if problems:
        errors += problems
        return None, None
    rule = sidecars.rule_for(template, path, checker.ref, checker.name, checker.namespace)
    block = template.sidecar or SidecarTemplate()
    config_map = block.config_map_ref
    errors += boundary.problems(checker.namespace, f"{path}.sidecar.configMapRef", "v1", "ConfigMap",
                                config_map and config_map.namespace, config_map and config_map.name)
    for name, ref in block.value_refs.items():
        check_reference(checker, ref, f"{path}.sidecar.valueRefs[{name}]")
        if ref is not None and ref.from_ in REF_SOURCES_WITH_PARAMS:
            refs[PARAM_PREFIX + str(name)] = ref.raw  # resolved as written, on every request
    # A template whose values or valueRefs failed their model would read nothing there, and
    # report that instead of the model's error: it is not rendered.
    if rule.config_map is not None or any(checker.model_dropped(f"{path}.sidecar.{name}")
                                          for name in ("values", "valueRefs")):
        return None, rule
    return checker.collect(errors, sidecars.render_inline, rule, str(block.template)), rule
