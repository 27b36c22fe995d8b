"""The result types callers of the engine need: mutations, rule outcomes and verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field

from kinitiras_py.base.typedefs import Obj, Patch


@dataclass
class RuleFailure:
    """A rule that failed on this object, and whether its failurePolicy let the request through."""

    policy: str
    rule: int
    reason: str
    ignored: bool

    def __str__(self) -> str:
        return f"policy {self.policy}, rule {self.rule}: {self.reason}"


@dataclass
class Mutation:
    """The outcome of the override policies for one object."""

    object: Obj
    patch: Patch = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failure: RuleFailure | None = None
    """A rule failed with failurePolicy Fail: the request must be denied and ``object`` unchanged."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per matching policy (by policy ref), for metrics."""

    @property
    def allowed(self) -> bool:
        """False when a failing rule denies the request."""
        return self.failure is None


@dataclass
class Verdict:
    """The outcome of the validate policies for one object."""

    allowed: bool = True
    message: str = ""
    policy: str = ""
    warnings: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)
    failure: RuleFailure | None = None
    """The rule error that denied the request (failurePolicy Fail), if that is why."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent per matching policy (by policy ref), for metrics."""
