"""``matchConditions``: which of the policies whose selectors match an object also apply to it.

Evaluated after selection, so only for policies already selected, once per policy per request,
against variables bound once. A condition that cannot be evaluated (a CEL error, a result that
is not a bool) becomes an error of each of the policy's rules, which its failurePolicy then
handles, as Kubernetes does for a webhook's matchConditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.ids import PolicyId, RuleId
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.policies.compiled import CompiledRule, Match

RuleT = TypeVar("RuleT", bound=CompiledRule)


def needed(matches: Iterable[Match[CompiledRule]]) -> bool:
    """Whether any of the matched policies has conditions."""
    return any(policy.conditions is not None for policy, _ in matches)


def apply(matches: list[Match[RuleT]], variables: Mapping[str, Any],
          params: Mapping[PolicyId, dict[str, Any]] | None = None, failed: Mapping[PolicyId, str] | None = None
          ) -> tuple[list[Match[RuleT]], dict[RuleId, str]]:
    """The matches whose policy's conditions hold, and an error per rule whose policy's failed.

    ``params`` holds each policy's resolved ``valueRefs`` by policy, ``failed`` the policies
    whose references could not be resolved (their conditions then fail the same way).
    """
    params = params or {}
    failed = failed or {}
    shared = Bindings({**variables, "params": {}})
    outcome: dict[int, bool | str] = {}
    kept: list[Match[RuleT]] = []
    errors: dict[RuleId, str] = {}
    for policy, rule in matches:
        program = policy.conditions
        if program is None:
            kept.append((policy, rule))
            continue
        found = outcome.get(id(policy))
        if found is None and policy.identity in failed:
            found = outcome[id(policy)] = failed[policy.identity]
        if found is None:
            own = params.get(policy.identity)
            try:
                result = program.evaluate({**variables, "params": own} if own else shared)
                found = result if isinstance(result, bool) else f"matchConditions returned {result!r}, not a bool"
            except (KinitirasError, ValueError, TypeError) as e:
                found = f"matchConditions could not be evaluated: {e}"
            outcome[id(policy)] = found
        if found is True:
            kept.append((policy, rule))
        elif isinstance(found, str):
            kept.append((policy, rule))
            errors[RuleId(policy.identity, rule.index)] = found
    return kept, errors
