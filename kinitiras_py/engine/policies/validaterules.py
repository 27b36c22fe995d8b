"""A validate rule checked and compiled: each of its checks compiled by its kind (:mod:`..kinds`),
in the order they run, a ``messageTemplate`` refusal, and its ``validationActions``."""

from __future__ import annotations

from kinitiras_py.api.validations import ValidateRule
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.kinds import cel, cue, javascript, template
from kinitiras_py.engine.kinds.base import EMPTY
from kinitiras_py.engine.policies.compiled import CompiledValidateRule, normalise_operations


def validate_rule(checker: Checker, rule: ValidateRule, index: int,
                  path: str) -> tuple[CompiledValidateRule, str | None]:
    """One validate rule checked and compiled, with the source its template rendered (or None)."""
    errors: list[PolicyError] = []
    cue_part = cue.compile_check(checker, errors, rule.cue, index, f"{path}.cue")
    refs: dict[str, Obj] = {}
    written = rule.template
    condition = template.Condition(None, None, "", False)
    if written is not None:
        condition = template.compile_check(checker, errors, written, f"{path}.template", refs)
    first, source = condition.check, condition.source
    cel_part = cel.compile_check(checker, errors, rule.cel, f"{path}.cel", refs)
    script = javascript.compile_check(checker, errors, rule, path)
    reject = rule.message_template
    checked = written or rule.cel or javascript.written(rule) or rule.cue
    if reject is not None and not checked:
        # A refusal of everything the policy applies to: its matchConditions do the checking.
        first, source = template.compile_reject(checker, errors, reject, f"{path}.messageTemplate")
    elif reject is not None:
        errors.append(PolicyError(f"{path}.messageTemplate", "only for a rule with neither template, cel nor "
                                  "javascript (use message, or return {valid, reason} from cel)"))
    if not (checked or reject is not None):
        errors.append(PolicyError(path, "no check: set template, cel or javascript (or messageTemplate alone, "
                                        "to refuse whatever the policy's matchConditions select)"))
    actions = rule.validation_actions or ["Deny"]
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
        index=index, operations=normalise_operations(rule.target_operations),
        failure_policy=rule.failure_policy, actions=frozenset(actions),
        message=rule.message or condition.message, allow_mode=condition.allow_mode,
        checks=tuple(check for check in checks if check is not None), refs=refs or EMPTY,
    ), source
