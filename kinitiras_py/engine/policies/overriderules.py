"""An override rule checked and compiled: each of its overriders compiled by its kind
(:mod:`..kinds`), in the order the rule applies them."""

from __future__ import annotations

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import Checker, dict_of
from kinitiras_py.engine.kinds import cel, cue, inject, javascript, origin, plaintext, sidecar, template
from kinitiras_py.engine.kinds.base import EMPTY, Overrider
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, normalise_operations


def override_rule(checker: Checker, rule: Obj, index: int, path: str) -> tuple[CompiledOverrideRule, str | None]:
    """One override rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    over = dict_of(rule.get("overriders"))
    opath = f"{path}.overriders"
    cue_part = cue.compile_override(checker, errors, over.get("cue"), index, f"{opath}.cue")
    source = None
    first: Overrider | None = None
    refs: dict[str, Obj] = {}
    written = over.get("template")
    if isinstance(written, dict) and written.get("type") == "sidecar":
        first, source = sidecar.compile_override(checker, errors, written, f"{opath}.template", refs)
    elif isinstance(written, dict):
        rendered, source = template.compile_override(checker, errors, written, f"{opath}.template", refs)
        if rendered is not None:
            first = template.TemplateOverrider(rendered)
    cel_part = cel.compile_override(checker, errors, over.get("cel"), f"{opath}.cel", refs)
    script = javascript.compile_override(checker, errors, over, opath)
    ops = plaintext.compile_override(checker, errors, over.get("plaintext"), index, f"{opath}.plaintext", refs)
    entries = origin.compile_override(errors, over.get("origin"), f"{opath}.origin")
    if not (written or over.get("cel") or "javascript" in over or ops or entries or over.get("cue")):
        errors.append(PolicyError(opath, "no overrider: set template, cel, javascript, plaintext or origin"))
    injected = inject.compile_override(checker, errors, rule, written, opath, first.program
                                       if isinstance(first, template.TemplateOverrider) else None)
    if errors:
        raise PolicyErrors(errors)
    # The order the rule applies them in: rendered template, cue, cel, javascript, plaintext, origin.
    overriders = (injected or first, cue_part, cel_part, script, ops, entries)
    operations = rule.get("targetOperations")
    return CompiledOverrideRule(
        index=index, operations=normalise_operations(operations or (["CREATE"] if injected else None)),
        failure_policy=str(rule.get("failurePolicy") or "Fail"),
        overriders=tuple(part for part in overriders if part is not None), refs=refs or EMPTY,
        last_applied=rule.get("patchLastApplied") is True,
    ), source
