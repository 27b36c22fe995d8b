"""Where results go: the interface the background scan and the webhook feed, and an in-memory one."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports.build import build_reports
from kinitiras_py.reports.ledger import Key, Ledger


class ReportSink(Protocol):
    """Takes results and makes the PolicyReports say them. No method waits for a write."""

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Replace every scan result for this object (empty: nothing matched, its reports go away)."""

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        """The object was deleted."""

    async def forget_policy(self, policy: PolicyId) -> None:
        """The policy was deleted: drop its results everywhere."""

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Admission-time results (Audit and Warn findings, and passes of those rules) join the
        object's reports."""

    async def sweep(self) -> None:
        """The background scan has published every object it can read since this replica began to
        lead: reports of objects without results are stale."""


class MemorySink:
    """A :class:`ReportSink` that keeps the reports in memory (tests, and anything offline):
    :meth:`reports` builds them as the writer would write them."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.ledger = Ledger(clock)
        self.changes: list[Key] = []
        """Every key whose reports changed, in order."""

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Replace the object's scan results."""
        self.changes += self.ledger.publish(resource, uid, results)

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        """Drop the object's results."""
        self.changes += self.ledger.forget_resource(resource, uid)

    async def forget_policy(self, policy: PolicyId) -> None:
        """Drop the policy's results."""
        self.changes += await self.ledger.forget_policy(policy)

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Merge admission's results into the object's."""
        self.changes += self.ledger.admit(resource, uid, results)

    async def sweep(self) -> None:
        """Nothing to do: in memory, no report outlives its results."""

    def reports(self) -> list[Obj]:
        """Every report, as written (objects without a uid yet have none)."""
        out: list[Obj] = []
        for key in self.ledger:
            record = self.ledger.get(key)
            if record is not None and record.uid:
                out += build_reports(record.resource, record.uid, record.results())
        return out
