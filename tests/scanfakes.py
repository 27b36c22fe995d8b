"""An in-memory ReportSink for the background scan's tests: what a report writer would hold.
(Informers fed by the tests are :class:`kinitiras_py.bench.scanscale.Preloaded`.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.engine.policies.results import PolicyId


class MemorySink:
    """Keeps the current results per object uid, and a log of every call."""

    def __init__(self) -> None:
        self.reports: dict[str, tuple[ResourceRef, list[RuleResult]]] = {}
        self.calls: list[tuple[str, str]] = []
        """(method, object uid or policy) of every call, in order."""
        self.changed = asyncio.Event()
        """Set on every call (tests clear it and wait)."""

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        self.reports[uid] = (resource, list(results))
        self._note("publish", uid)

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        self.reports.pop(uid, None)
        self._note("forget_resource", uid)

    async def forget_policy(self, policy: PolicyId) -> None:
        for uid, (resource, results) in list(self.reports.items()):
            self.reports[uid] = (resource, [r for r in results if r.policy != policy])
        self._note("forget_policy", str(policy))

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        self._note("add_admission_findings", uid)

    async def sweep(self) -> None:
        self._note("sweep", "")

    def _note(self, method: str, what: str) -> None:
        self.calls.append((method, what))
        self.changed.set()

    def results_of(self, name: str) -> dict[tuple[str, int], str]:
        """``{(policy name, rule): result}`` of the object named ``name``."""
        for resource, results in self.reports.values():
            if resource.name == name:
                return {(r.policy.name, r.rule): r.result for r in results}
        return {}

