"""The one place a scan evaluates policies: through :class:`~..admission.engine.Engine`, as
admission does.

A scan's engines hold its plans (the rules a scan can run, made to run under any operation) and
keep no caches: each object is evaluated once per change, and the webhook's caches are left to
the requests they serve.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Decision, Request
from kinitiras_py.admission.results import RuleResult, override_results, validate_results
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.matching.selection import PolicyIndex, object_namespace
from kinitiras_py.engine.policies.compiled import (
    AnyPolicy,
    CompiledPolicy,
    CompiledRule,
    EitherPolicy,
    OverrideMatch,
    ValidateMatch,
    validates,
)
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.refs import resolver
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.store import Store
from kinitiras_py.scan.plans import Plan

__all__ = ["Context", "Evaluator", "evaluator"]

STEP = 10
"""Validate policies evaluated on an object between two turns of the event loop."""

OPERATION = "CREATE"
"""The operation a scan's request carries (every rule a scan runs applies to any operation, and
none reads it)."""


@dataclass(frozen=True)
class Context:
    """What rules read besides the object: other objects, http, the operator's settings."""

    store: Store
    http: resolver.HttpClient | None = None
    egress: Egress = field(default_factory=Egress)
    lookup_timeout: float = 2.3


def _index(policies: Iterable[AnyPolicy | None]) -> PolicyIndex[CompiledRule]:
    return PolicyIndex(policy for policy in policies if policy is not None)


class Evaluator:
    """Evaluates the plans it was made with on one object at a time."""

    def __init__(self, plans: Mapping[PolicyId, Plan], context: Context) -> None:
        self.plans = dict(plans)
        self._selecting = _index(plan.selecting for plan in self.plans.values())
        running = [plan.running for plan in self.plans.values() if plan.running is not None]
        validating = sorted((p for p in running if p.validating), key=CompiledPolicy.sort_key)

        def pipeline(overrides: Iterable[EitherPolicy], validations: Iterable[EitherPolicy]) -> Engine:
            return Engine([*overrides, *validations], store=context.store, http=context.http, egress=context.egress,
                          lookup_timeout=context.lookup_timeout, cel_results_bytes=0, mutation_results_bytes=0)

        # Override policies together (each sees what the others changed); validate policies in
        # steps, the event loop serving admission requests between them.
        self._overrides = pipeline((p for p in running if not p.validating), ())
        self._steps = [pipeline((), validating[at:at + STEP]) for at in range(0, len(validating), STEP)]
        self.spent = 0.0
        """Seconds the last :meth:`results` evaluated, the turns it gave the event loop left out."""

    async def results(self, obj: Obj) -> list[RuleResult]:
        """The result of every rule of the plans that selects ``obj``: skipped, would-change or
        unchanged (override), pass, fail, warn or error (validate), in the order admission runs them."""
        # Override rules first, then validate rules, as admission runs them.
        matched = sorted(self._selecting.matching(obj, OPERATION), key=lambda m: m[0].validating)
        if not matched:
            return []
        request = Request(OPERATION, obj, namespace=object_namespace(obj))
        began = time.monotonic()
        mutation = await self._overrides.mutate(request)
        spent = time.monotonic() - began
        # Validate rules see the object as stored, not as the override rules would leave it.
        checks = []
        for step in self._steps:
            await asyncio.sleep(0)
            began = time.monotonic()
            checks += (await step.validate(request)).checks
            spent += time.monotonic() - began
        self.spent = spent
        decision = Decision(True, "", mutation.patch, mutation.object, [], [], mutation, checks)
        overrides: list[OverrideMatch] = []
        validations: list[ValidateMatch] = []
        for policy, rule in matched:
            plan = self.plans[policy.identity]
            own = plan.policy
            if rule.index in plan.skipped:
                continue
            if validates(own):
                validations.append((own, own.rule(rule.index)))
            else:
                overrides.append((own, own.rule(rule.index)))
        ran = override_results(decision, overrides) + validate_results(decision, validations)
        by_rule = {(one.policy, one.rule): one for one in ran}
        out = []
        for policy, rule in matched:
            plan = self.plans[policy.identity]
            reason = plan.skipped.get(rule.index)
            if reason is not None:
                out.append(RuleResult(policy.identity, rule.index, "validate" if policy.validating else "override",
                                      "skip", f"not evaluated in a background scan: {reason}", skipped=True))
            elif (one := by_rule.get((policy.identity, rule.index))) is not None:
                out.append(_scanned(one))
        return out


def _scanned(one: RuleResult) -> RuleResult:
    """An override result said as a scan means it: nothing was written."""
    if one.type == "override" and one.result == "pass":
        one.message = ("would change the object" if one.patched
                       else "leaves the object unchanged")
    return one


def evaluator(plans: Mapping[PolicyId, Plan], context: Context) -> Evaluator:
    """An evaluator of ``plans`` (the one constructor the scanner calls)."""
    return Evaluator(plans, context)
