"""Run the validate rules that apply to an object and reach one deterministic verdict.

Rules run in index order (cluster policies first, then by name, then rule index). The first
failed rule with the Deny action decides the message; Warn and Audit failures are collected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.compiled import CompiledPolicy, ValidateRule
from kinitiras_py.engine.overriding import RuleKey
from kinitiras_py.engine.results import Verdict


def _outcome(result: JSON, what: str) -> tuple[bool, str]:
    if isinstance(result, bool):
        return result, ""
    if isinstance(result, dict) and isinstance(result.get("valid", True), bool):
        return bool(result.get("valid", True)), str(result.get("reason") or "")
    raise ValueError(f"{what} must return a bool or a map {{valid, reason}}, got {result!r}")


def check_rule(rule: ValidateRule, variables: dict[str, Any]) -> tuple[bool, str]:
    """Evaluate one rule: (valid, reason). The rendered template runs first, then ``cel``."""
    for program, what in ((rule.rendered, "the rendered template"), (rule.cel, "the cel rule")):
        if program is None:
            continue
        valid, reason = _outcome(program.evaluate(variables), what)
        if not valid:
            return False, reason or rule.message or f"rejected by validate rule {rule.index}"
    return True, ""


def validate(matches: Iterable[tuple[CompiledPolicy, ValidateRule]], variables: dict[str, Any],
             params: Mapping[RuleKey, dict[str, Any]] | None = None,
             lookup_errors: Mapping[RuleKey, str] | None = None) -> Verdict:
    """The verdict of every matching rule on the object in ``variables``."""
    params = params or {}
    lookup_errors = lookup_errors or {}
    verdict = Verdict()
    for policy, rule in matches:
        key = (policy.ref, rule.index)
        error = lookup_errors.get(key)
        if error is None:
            try:
                valid, reason = check_rule(rule, {**variables, "params": params.get(key, {})})
            except (KinitirasError, ValueError, TypeError) as e:
                error = str(e)
        if error is not None:
            text = f"{policy.ref}, rule {rule.index}: {error}"
            if rule.failure_policy == "Ignore":
                verdict.warnings.append(f"{text} (failurePolicy Ignore: rule skipped)")
                continue
            return Verdict(allowed=False, message=text, policy=policy.ref, warnings=verdict.warnings,
                           audit=verdict.audit)
        if valid:
            continue
        text = f"{policy.ref}: {reason}"
        if "Audit" in rule.actions:
            verdict.audit.append(text)
        if "Warn" in rule.actions:
            verdict.warnings.append(text)
        if "Deny" in rule.actions:
            verdict.allowed, verdict.message, verdict.policy = False, text, policy.ref
            return verdict
    return verdict
