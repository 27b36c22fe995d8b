"""Where scan results go (:class:`ReportSink`): the PolicyReport writer, or a log when reports are off."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports.sink import ReportSink

log = logging.getLogger(__name__)

__all__ = ["LoggingSink", "ReportSink"]


class LoggingSink:
    """Logs what a report writer would write, one line per object (the failing rules named)."""

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Log the object's results: counts by result, and each failing or erring rule."""
        counts: dict[str, int] = {}
        for one in results:
            counts[one.result] = counts.get(one.result, 0) + 1
        bad = [f"{one.policy} rule {one.rule}: {one.result}: {one.message}" for one in results
               if one.result in ("fail", "warn", "error")]
        log.info("scan results for %s", resource, extra={"uid": uid, "results": counts, "findings": bad})

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        """Log that the object's results are gone."""
        log.info("scan results for %s dropped: the object was deleted", resource, extra={"uid": uid})

    async def forget_policy(self, policy: PolicyId) -> None:
        """Log that the policy's results are gone."""
        log.info("scan results of %s dropped: the policy was deleted", policy)

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Log admission findings (not the scanner's to call)."""
        log.info("admission findings for %s", resource, extra={"uid": uid, "findings": len(results)})

    async def sweep(self) -> None:
        """Log that a first full pass is over (a log keeps nothing stale)."""
        log.info("scan results: every object published")
