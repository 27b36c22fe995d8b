"""Run the validate rules that apply to an object and reach one deterministic verdict.

Rules run in a fixed order whatever order they are given in: cluster policies first, then
namespaced ones, each group by name (namespace breaks ties), then by rule index. The first
failed rule with the Deny action decides the message; Warn and Audit failures are collected.

A rule that cannot be evaluated (a failed lookup, a CEL error, a result of the wrong shape)
follows its ``failurePolicy``: Ignore skips it with a warning; Fail counts it as a failed check,
whose ``validationActions`` then apply, as the Kubernetes API server does for
ValidatingAdmissionPolicies. So a failing Deny rule denies, naming the policy, the rule and the
reason, while a failing Warn-only rule warns and never blocks a request.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.policies.compiled import CompiledValidateRule, ValidateMatch
from kinitiras_py.engine.policies.results import PolicyId, RuleCheck, RuleFailure, RuleId, Verdict


def default_message(rule: CompiledValidateRule) -> str:
    """The reason given when a rule rejects without a message of its own."""
    return f"rejected by validate rule {rule.index}"


def check_rule(rule: CompiledValidateRule, variables: Mapping[str, Any] | Bindings) -> tuple[bool, str]:
    """Evaluate one rule: (valid, reason). Its checks run in order, each by its kind's step: the
    rendered template first, then ``cue``, ``cel``, then ``javascript``; the first that fails decides.

    The reason is the one the expression returned, else the rule's message (for a template,
    the condition's ``message``, in allow mode too), else :func:`default_message`.
    """
    fallback = rule.message or default_message(rule)
    for check in rule.checks:
        reason = check.step(variables, fallback)
        if reason is not None:
            return False, reason
    return True, ""


def _order(match: ValidateMatch) -> tuple[tuple[int, str, str], int]:
    return match[0].sort_key(), match[1].index


def validate(matches: Iterable[ValidateMatch], variables: dict[str, Any],
             params: Mapping[RuleId, dict[str, Any]] | None = None,
             lookup_errors: Mapping[RuleId, str] | None = None, shared: Bindings | None = None) -> Verdict:
    """The verdict of every matching rule on the object in ``variables``.

    ``params`` holds the resolved value references per (policy ref, rule index), and
    ``lookup_errors`` the references that could not be resolved; a lookup error is handled
    exactly like an evaluation error of that rule. Rules without parameters evaluate against
    ``shared`` (``variables`` with empty params, bound once), made here when not given.
    """
    params = params or {}
    lookup_errors = lookup_errors or {}
    shared = shared or Bindings({**variables, "params": {}})
    verdict = Verdict()
    for policy, rule in sorted(matches, key=_order):
        key = RuleId(policy.identity, rule.index)
        started = time.perf_counter()
        error = lookup_errors.get(key)
        valid, reason = True, ""
        if error is None:
            try:
                own = params.get(key)
                valid, reason = check_rule(rule, {**variables, "params": own} if own else shared)
            except (KinitirasError, ValueError, TypeError) as e:
                error = str(e) or type(e).__name__
        pid = PolicyId.of(policy)
        verdict.timings[pid] = verdict.timings.get(pid, 0.0) + time.perf_counter() - started
        verdict.checks.append(RuleCheck(RuleId(pid, rule.index), "error" if error is not None else
                                        "pass" if valid else "fail", error or reason))
        if error is not None:
            failure = RuleFailure(RuleId(pid, rule.index), error, ignored=rule.failure_policy == "Ignore")
            if failure.ignored:
                verdict.warnings.append(f"{failure} (failurePolicy Ignore: rule skipped)")
                verdict.ignored.append(failure)
                continue
            text = str(failure)
        elif valid:
            continue
        else:
            text = f"{policy.ref}: {reason}"
        if "Audit" in rule.actions:
            verdict.audit.append(text)
            verdict.flagged.add((pid, "Audit"))
        if "Warn" in rule.actions:
            verdict.warnings.append(text)
            verdict.flagged.add((pid, "Warn"))
        if "Deny" in rule.actions:
            verdict.allowed, verdict.message, verdict.policy = False, text, pid
            if error is not None:
                verdict.failure = failure
            return verdict
    return verdict
