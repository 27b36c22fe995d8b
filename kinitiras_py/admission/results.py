"""What admission found (offline ``apply``, ``test`` and background scans), per object and per rule, and its summary.

Each matched rule gets one :class:`RuleResult` per object, with a ``result`` spelled as Kyverno
and PolicyReports (wgpolicyk8s.io) spell it, so that a PolicyReport writer maps one result to one
report entry (policy, rule, result, message, resource):

* ``pass``: a validate rule's check held; an override rule ran (``patched`` says whether it changed
  the object);
* ``fail``: a validate rule's check did not hold and its actions include Deny or Audit;
* ``warn``: a validate rule's check did not hold and its only action is Warn;
* ``error``: the rule could not be evaluated (its failurePolicy decided: ``skipped`` under Ignore);
* ``skip``: the rule matched the object by its selectors but was not evaluated (its policy's
  matchConditions did not hold, or the request was denied before its turn).

The flags say what the webhook did with it: ``patched``, ``denied``, ``warned``, ``audited``,
``skipped`` (a ``skip``, or an ``error`` under failurePolicy Ignore: the rule took no part in the
decision); :func:`summary` counts them per policy and rule, and in total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kinitiras_py.admission.pipeline import Decision
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.policies.compiled import AnyPolicy, OverrideMatch, ValidateMatch
from kinitiras_py.engine.policies.results import PolicyId, RuleId

RESULTS = ("pass", "fail", "warn", "error", "skip")
"""Every rule result, as Kyverno and PolicyReports spell them."""
COUNTERS = ("matched", "patched", "denied", "warned", "audited", "skipped")
"""What the summary counts per rule, over every object."""


@dataclass(frozen=True)
class ResourceRef:
    """Which object: as a PolicyReport result's ``resources`` entry names it."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Obj) -> ResourceRef:
        """The reference of an object (missing fields are empty)."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return cls(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), str(meta.get("namespace") or ""),
                   str(meta.get("name") or meta.get("generateName") or ""))

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def to_json(self) -> dict[str, str]:
        """The reference as JSON (Kubernetes' field names)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}


@dataclass
class RuleResult:
    """One matched rule on one object."""

    policy: PolicyId
    rule: int
    type: str
    """``override`` or ``validate``."""
    result: str
    message: str = ""
    patched: bool = False
    denied: bool = False
    warned: bool = False
    audited: bool = False
    skipped: bool = False

    def to_json(self) -> dict[str, JSON]:
        """The result as JSON."""
        return {"policy": _policy_json(self.policy), "rule": self.rule, "type": self.type, "result": self.result,
                "message": self.message, **{flag: getattr(self, flag) for flag in COUNTERS[1:]}}


@dataclass
class ObjectResult:
    """One object's admission and the result of every rule that matched it."""

    resource: ResourceRef
    decision: Decision
    rules: list[RuleResult] = field(default_factory=list)

    def to_json(self) -> dict[str, JSON]:
        """The result as JSON (without the final object: its patch says how it differs)."""
        d = self.decision
        return {"resource": self.resource.to_json(), "allowed": d.allowed, "message": d.message,
                "warnings": list(d.warnings), "audit": list(d.audit), "patch": list(d.patch),
                "rules": [r.to_json() for r in self.rules]}


def _policy_json(pid: PolicyId) -> dict[str, JSON]:
    return {"kind": pid.kind, "namespace": pid.namespace, "name": pid.name}


def override_results(decision: Decision, matched: Iterable[OverrideMatch]) -> list[RuleResult]:
    """The results of the override rules ``matched`` (by selectors and operation) on the object."""
    mutation = decision.mutation
    applied = set(mutation.applied) if mutation else set()
    ignored = {f.rule: f.reason for f in mutation.ignored} if mutation else {}
    failure = mutation.failure if mutation else None
    rules = {RuleId(p.identity, r.index): None for p, r in matched}
    rules.update(dict.fromkeys(applied))  # a later tier's rule may match only the changed object
    out = []
    for rid in rules:
        one = RuleResult(rid.policy, rid.rule, "override", "pass")
        if failure is not None and failure.rule == rid:
            one.result, one.message, one.denied = "error", failure.reason, True
        elif rid in ignored:
            one.result, one.message, one.skipped = "error", ignored[rid], True
        elif failure is not None:
            one.result, one.message, one.skipped = "skip", f"not applied: the request was denied ({failure})", True
        else:
            one.patched = rid in applied
            one.message = "changed the object" if one.patched else "left the object unchanged"
        out.append(one)
    return out


def validate_results(decision: Decision, matched: Sequence[ValidateMatch]) -> list[RuleResult]:
    """The results of the validate rules ``matched`` (by selectors and operation) on the mutated object."""
    checks = {check.rule: check for check in decision.checks}
    out = []
    for policy, rule in matched:
        rid = RuleId(policy.identity, rule.index)
        one = RuleResult(rid.policy, rid.rule, "validate", "skip")
        check = checks.get(rid)
        if check is None:
            one.skipped = True
            one.message = ("not evaluated: the request was denied before" if not decision.allowed
                           else "not evaluated: the policy's matchConditions do not hold")
        elif check.outcome == "pass":
            one.result = "pass"
        elif check.outcome == "error" and rule.failure_policy == "Ignore":
            one.result, one.message, one.skipped = "error", check.message, True
        else:
            actions = rule.actions
            one.denied, one.warned, one.audited = "Deny" in actions, "Warn" in actions, "Audit" in actions
            one.message = check.message
            one.result = check.outcome if check.outcome == "error" else (
                "fail" if one.denied or one.audited else "warn")
        out.append(one)
    return out


def _counts() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTERS, 0), "results": dict.fromkeys(RESULTS, 0)}


def _add(counts: dict[str, Any], one: RuleResult) -> None:
    counts["matched"] += 1
    for flag in COUNTERS[1:]:
        counts[flag] += getattr(one, flag)
    counts["results"][one.result] += 1


def summary(policies: Sequence[AnyPolicy], objects: Sequence[ObjectResult]) -> dict[str, Any]:
    """Counts per policy and rule (every rule of every policy, those that matched nothing too),
    and totals over every object."""
    per_rule: dict[RuleId, dict[str, Any]] = {}
    for policy in policies:
        for rule in policy.rules:
            per_rule[RuleId(policy.identity, rule.index)] = _counts()
    totals = {"objects": len(objects), "objectsAllowed": sum(o.decision.allowed for o in objects),
              "objectsDenied": sum(not o.decision.allowed for o in objects), **_counts()}
    for obj in objects:
        for one in obj.rules:
            _add(per_rule.setdefault(RuleId(one.policy, one.rule), _counts()), one)
            _add(totals, one)
    rows = []
    for policy in policies:
        rows.append({"policy": _policy_json(policy.identity),
                     "type": "validate" if policy.validating else "override",
                     "rules": [{"rule": rule.index, **per_rule[RuleId(policy.identity, rule.index)]}
                               for rule in policy.rules]})
    return {"policies": rows, "totals": totals}


def to_json(policies: Sequence[AnyPolicy], objects: Sequence[ObjectResult]) -> dict[str, JSON]:
    """Everything ``apply`` found: each object's result, and the summary."""
    return {"objects": [o.to_json() for o in objects], **summary(policies, objects)}


def summary_text(policies: Sequence[AnyPolicy], objects: Sequence[ObjectResult]) -> str:
    """The summary as a table, one line per rule, then the totals."""
    counted = summary(policies, objects)
    names = [f"{row['policy']['kind']} " + "/".join(filter(None, (row["policy"]["namespace"],
                                                                   row["policy"]["name"])))
             for row in counted["policies"]]
    width = max([len("POLICY"), *map(len, names)])
    head = f"{'POLICY':<{width}}  RULE TYPE     " + " ".join(f"{c.upper():>7}" for c in COUNTERS)
    lines = [head]
    for name, row in zip(names, counted["policies"], strict=True):
        for rule in row["rules"]:
            lines.append(f"{name:<{width}}  {rule['rule']:>4} {row['type']:<8} "
                         + " ".join(f"{rule[c]:>7}" for c in COUNTERS))
    totals = counted["totals"]
    lines.append(f"{'TOTAL':<{width}}  {'':>4} {'':<8} " + " ".join(f"{totals[c]:>7}" for c in COUNTERS))
    results = ", ".join(f"{totals['results'][r]} {r}" for r in RESULTS)
    lines.append(f"{totals['objects']} objects: {totals['objectsAllowed']} allowed, {totals['objectsDenied']} denied; "
                 f"rule results: {results}")
    return "\n".join(lines) + "\n"
