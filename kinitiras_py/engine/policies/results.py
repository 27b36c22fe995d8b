"""The result types callers of the engine need: mutations, rule outcomes and verdicts.

Results name policies and rules by structured identities (:class:`PolicyId`, :class:`RuleId`,
defined in :mod:`kinitiras_py.base.ids` and given here too), so metrics and Events read kind,
namespace and name as fields; ``str()`` of an identity is the display form messages use
(``OverridePolicy team-a/oversell``, ``... rule 0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from kinitiras_py.base.ids import Identified, PolicyId, RuleId
from kinitiras_py.base.typedefs import Obj, Patch

__all__ = ["Identified", "Mutation", "PolicyId", "RuleCheck", "RuleFailure", "RuleId", "Verdict"]


@dataclass
class RuleFailure:
    """A rule that failed on this object, and whether its failurePolicy let the request through."""

    rule: RuleId
    reason: str
    ignored: bool

    @property
    def policy(self) -> PolicyId:
        """The policy of the rule that failed."""
        return self.rule.policy

    def __str__(self) -> str:
        return f"policy {self.rule.policy}, rule {self.rule.rule}: {self.reason}"


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """One validate rule evaluated on the object: ``pass``, ``fail`` (its check did not hold) or
    ``error`` (it could not be evaluated; its failurePolicy decided), with the reason given."""

    rule: RuleId
    outcome: str
    message: str = ""


@dataclass
class Mutation:
    """The outcome of the override policies for one object."""

    object: Obj
    patch: Patch = field(default_factory=list)
    applied: list[RuleId] = field(default_factory=list)
    """The rules that changed the object, in order."""
    warnings: list[str] = field(default_factory=list)
    failure: RuleFailure | None = None
    """A rule failed with failurePolicy Fail: the request must be denied and ``object`` unchanged."""
    ignored: list[RuleFailure] = field(default_factory=list)
    """Rules that failed with failurePolicy Ignore and were skipped (each also a warning)."""
    timings: dict[PolicyId, float] = field(default_factory=dict)
    """Seconds spent per matching policy, for metrics."""
    stamp: int | None = None
    """The generation of the override policy index the outcome was made under, when it depends on
    nothing else than the request and that index (no Namespace, reference or sidecar template
    read, no JavaScript, no rule failed or skipped); None otherwise."""

    @property
    def allowed(self) -> bool:
        """False when a failing rule denies the request."""
        return self.failure is None

    @property
    def complete(self) -> bool:
        """Whether every matched rule ran without failing (none denied, none skipped under Ignore)."""
        return self.failure is None and not self.ignored

    def patch_json(self) -> bytes | None:
        """The patch as JSON, None when there is none."""
        return orjson.dumps(self.patch) if self.patch else None


@dataclass
class Verdict:
    """The outcome of the validate policies for one object."""

    allowed: bool = True
    message: str = ""
    policy: PolicyId | None = None
    """The policy whose rule denied the request."""
    warnings: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)
    flagged: set[tuple[PolicyId, str]] = field(default_factory=set)
    """The policy and action (Warn or Audit) of each failed rule with those actions, for metrics;
    a set, so a policy counts once per object and action however many of its rules failed."""
    failure: RuleFailure | None = None
    """The rule error that denied the request (failurePolicy Fail), if that is why."""
    ignored: list[RuleFailure] = field(default_factory=list)
    """Rules that failed with failurePolicy Ignore and were skipped (each also a warning)."""
    timings: dict[PolicyId, float] = field(default_factory=dict)
    """Seconds spent per matching policy, for metrics."""
    checks: list[RuleCheck] = field(default_factory=list)
    """Every rule evaluated, in order (after a denial, none is)."""
