"""Which rules of a policy a background scan evaluates, and the copy of the policy it runs.

A scan sees an object as stored, with no request around it: a rule that reads request-only data
(``request.operation``, ``request.userInfo``, ``request.dryRun``, ``oldObject``, a JavaScript
``op`` or ``old`` parameter) cannot be evaluated and is reported ``skip`` with the reason, as
Kyverno does. What a program reads comes from its checked AST (:mod:`~kinitiras_py.engine.
evaluation.celreads`); a program that may read anything counts as reading request data.
``request.namespace`` is the object's own and is fine.

Rules that target only DELETE or CONNECT never apply to an object as it is and are left out.
The rules that run are copied with every operation, failurePolicy Ignore and (validate rules)
action Audit, so that no rule's failure stops the others (in admission a denial ends the
request); results are then reported with each rule's own actions and failurePolicy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.evaluation.celreads import ANY
from kinitiras_py.engine.policies.compiled import (
    CompiledOverrideRule,
    CompiledPolicy,
    CompiledRule,
    CompiledValidateRule,
    EitherPolicy,
    validates,
)

__all__ = ["REQUEST_ONLY", "Plan", "plan", "program_reason", "rule_reason"]

REQUEST_ONLY = ("operation", "userInfo", "dryRun")
"""Fields of ``request`` that exist only in an admission request."""
RuleT = TypeVar("RuleT", bound=CompiledRule)
_EXISTING = frozenset({"CREATE", "UPDATE"})
"""Operations under which an object as it is would be admitted again."""
_AUDIT = frozenset({"Audit"})


def program_reason(program: Program | None, what: str) -> str | None:
    """Why ``program`` (named ``what`` in the reason) cannot run without a request, or None."""
    if program is None:
        return None
    reads = program.reads
    if reads is None:
        return f"{what} may read request data (oldObject, request.operation, userInfo or dryRun)"
    for name, found in reads:
        if name == "oldObject":
            return f"{what} reads oldObject"
        if name != "request":
            continue
        for path, _how in found:
            if not path or path[0] == ANY:
                return f"{what} reads the whole request"
            if path[0] in REQUEST_ONLY:
                return f"{what} reads request.{path[0]}"
    return None


def rule_reason(rule: CompiledRule) -> str | None:
    """Why ``rule`` (an override or validate rule) cannot be evaluated by a scan, or None."""
    programs = [("renderedCel", rule.rendered), ("cue", rule.cue), ("cel", rule.cel)]
    if isinstance(rule, CompiledOverrideRule):
        programs += [(f"plaintext operation {index}", made[0]) for index, made in rule.fanout.items()]
    for what, program in programs:
        reason = program_reason(program, what)
        if reason is not None:
            return reason
    script = rule.javascript
    if script is not None:
        taken = [name for name in ("op", "old") if name in script.parameters]
        if taken:
            return f"javascript {script.function} takes {' and '.join(taken)}, known only in an admission request"
    return None


@dataclass(frozen=True)
class Plan:
    """How a scan handles one policy."""

    policy: EitherPolicy
    """The policy as compiled (its rules' own actions and failurePolicy decide the results)."""
    selecting: EitherPolicy | None
    """The policy with every rule that applies to an existing object (skipped ones too), under any
    operation: what finds the rules an object matches. None when no rule applies."""
    running: EitherPolicy | None
    """The rules a scan evaluates, copied to run under any operation without stopping the others;
    None when there is none."""
    skipped: dict[int, str]
    """Why each rule that is not evaluated is skipped, by rule index."""

    def original(self, index: int) -> CompiledRule:
        """The policy's own rule with ``index``."""
        return self.policy.rule(index)


def _applies(rule: CompiledRule) -> bool:
    return rule.operations is None or bool(rule.operations & _EXISTING)


def _running(rule: RuleT) -> RuleT:
    if isinstance(rule, CompiledValidateRule):
        return dataclasses.replace(rule, operations=None, failure_policy="Ignore", actions=_AUDIT)
    return dataclasses.replace(rule, operations=None, failure_policy="Ignore")


def _with_rules(policy: CompiledPolicy[RuleT], rules: Iterable[RuleT]) -> CompiledPolicy[RuleT] | None:
    kept = tuple(rules)
    return dataclasses.replace(policy, rules=kept) if kept else None


def _copies(policy: EitherPolicy, skipped: dict[int, str]) -> tuple[EitherPolicy | None, EitherPolicy | None]:
    """The policy with its rules that apply to an existing object (for selecting), and with those
    of them a scan evaluates (for running)."""
    if validates(policy):  # each branch copies a policy of its own family
        return _family_copies(policy, skipped)
    return _family_copies(policy, skipped)


def _family_copies(policy: CompiledPolicy[RuleT], skipped: dict[int, str]
                   ) -> tuple[CompiledPolicy[RuleT] | None, CompiledPolicy[RuleT] | None]:
    applying = [rule for rule in policy.rules if _applies(rule)]
    return (_with_rules(policy, (dataclasses.replace(rule, operations=None) for rule in applying)),
            _with_rules(policy, (_running(rule) for rule in applying if rule.index not in skipped)))


def plan(policy: EitherPolicy) -> Plan:
    """How a scan handles ``policy``."""
    applying = [rule for rule in policy.rules if _applies(rule)]
    shared = program_reason(policy.conditions, "matchConditions")
    skipped: dict[int, str] = {}
    for rule in applying:
        reason = shared or rule_reason(rule)
        if reason is not None:
            skipped[rule.index] = reason
    selecting, running = _copies(policy, skipped)
    return Plan(policy, selecting, running, skipped)
