"""A validate rule checked and compiled: each of its checks compiled by its kind (:mod:`..kinds`),
in the order they run, a ``messageTemplate`` refusal, and its ``validationActions``."""

from __future__ import annotations

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import Checker, list_of
from kinitiras_py.engine.kinds import cel, cue, javascript, template
from kinitiras_py.engine.kinds.base import EMPTY
from kinitiras_py.engine.policies.compiled import CompiledValidateRule, normalise_operations


def validate_rule(checker: Checker, rule: Obj, index: int, path: str) -> tuple[CompiledValidateRule, str | None]:
    """One validate rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    cue_part = cue.compile_check(checker, errors, rule.get("cue"), index, f"{path}.cue")
    refs: dict[str, Obj] = {}
    written = rule.get("template")
    condition = template.Condition(None, None, "", False)
    if isinstance(written, dict):
        condition = template.compile_check(checker, errors, written, f"{path}.template", refs)
    first, source = condition.check, condition.source
    cel_part = cel.compile_check(checker, errors, rule.get("cel"), f"{path}.cel", refs)
    script = javascript.compile_check(checker, errors, rule, path)
    reject = rule.get("messageTemplate")
    if isinstance(reject, str) and not (written or rule.get("cel") or "javascript" in rule or rule.get("cue")):
        # A refusal of everything the policy applies to: its matchConditions do the checking.
        first, source = template.compile_reject(checker, errors, reject, f"{path}.messageTemplate")
    elif reject is not None:
        errors.append(PolicyError(f"{path}.messageTemplate", "only for a rule with neither template, cel nor "
                                  "javascript (use message, or return {valid, reason} from cel)"))
    if not (written or rule.get("cel") or "javascript" in rule or rule.get("cue") or reject is not None):
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
    # The order the checks run in: rendered template (or messageTemplate), cue, cel, javascript.
    checks = (first, cue_part, cel_part, script)
    return CompiledValidateRule(
        index=index, operations=normalise_operations(rule.get("targetOperations")),
        failure_policy=str(rule.get("failurePolicy") or "Fail"), actions=frozenset(actions),
        message=str(rule.get("message") or condition.message), allow_mode=condition.allow_mode,
        checks=tuple(check for check in checks if check is not None), refs=refs or EMPTY,
    ), source
