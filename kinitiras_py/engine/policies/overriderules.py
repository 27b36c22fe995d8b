"""An override rule checked and compiled: each of its overriders compiled by its kind
(:mod:`..kinds`), in the order the rule applies them."""

from __future__ import annotations

from kinitiras_py.api.overrides import Overriders, OverrideRule
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.kinds import cel, cue, inject, javascript, origin, plaintext, sidecar, template
from kinitiras_py.engine.kinds.base import EMPTY, Overrider
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, normalise_operations


def override_rule(checker: Checker, rule: OverrideRule, index: int,
                  path: str) -> tuple[CompiledOverrideRule, str | None]:
    """One override rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    over = rule.overriders or Overriders()  # None only in a partial model: its error is reported
    opath = f"{path}.overriders"
    cue_part = cue.compile_override(checker, errors, over.cue, index, f"{opath}.cue")
    source = None
    first: Overrider | None = None
    refs: dict[str, Obj] = {}
    written = over.template
    if written is not None and written.type == "sidecar":
        first, source = sidecar.compile_override(checker, errors, written, f"{opath}.template", refs)
    elif written is not None:
        rendered, source = template.compile_override(checker, errors, written, f"{opath}.template", refs)
        if rendered is not None:
            first = template.TemplateOverrider(rendered)
    cel_part = cel.compile_override(checker, errors, over.cel, f"{opath}.cel", refs)
    script = javascript.compile_override(checker, errors, over, opath)
    ops = plaintext.compile_override(checker, errors, over.plaintext, index, f"{opath}.plaintext", refs)
    entries = origin.compile_override(errors, over.origin, f"{opath}.origin")
    if not (written or over.cel or javascript.written(over) or ops or entries or over.cue):
        errors.append(PolicyError(opath, "no overrider: set template, cel, javascript, plaintext or origin"))
    injected = inject.compile_override(checker, errors, rule, written, opath, first.program
                                       if isinstance(first, template.TemplateOverrider) else None)
    if errors:
        raise PolicyErrors(errors)
    # The order the rule applies them in: rendered template, cue, cel, javascript, plaintext, origin.
    overriders = (injected or first, cue_part, cel_part, script, ops, entries)
    return CompiledOverrideRule(
        index=index, operations=normalise_operations(rule.target_operations or (["CREATE"] if injected else None)),
        failure_policy=rule.failure_policy, overriders=tuple(part for part in overriders if part is not None),
        refs=refs or EMPTY, last_applied=rule.patch_last_applied,
    ), source
