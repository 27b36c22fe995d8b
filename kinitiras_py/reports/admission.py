"""Admission-time results into the reports, off the request's path.

The webhook hands each allowed validation to :meth:`AdmissionFeed.offer`, which only queues it
(bounded: when the queue is full the oldest is dropped and counted). A task turns the queued
verdicts into rule results — the rules with a Warn or Audit action, failed or passed, so a fixed
object's result turns ``pass`` — and gives them to the sink. Denied requests, dry runs, DELETE
and CONNECT are not reported: they change no stored object.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Protocol

from kinitiras_py.admission.pipeline import Decision
from kinitiras_py.admission.results import ResourceRef, RuleResult, validate_results
from kinitiras_py.base import aiotasks
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.results import RuleCheck, Verdict
from kinitiras_py.reports.sink import ReportSink

log = logging.getLogger(__name__)

QUEUE = 10_000
"""Verdicts waiting to be turned into results at most (a burst beyond it loses the oldest)."""
REPORTED = frozenset({"Warn", "Audit"})


class Policies(Protocol):
    """Where the compiled validate policies are found (the webhook's policy index)."""

    def get(self, kind: str, namespace: str | None, name: str) -> CompiledPolicy | None:
        """The policy, or None when it is gone."""


class AdmissionFeed:
    """Queues verdicts on the request path; a task gives their Warn and Audit results to ``sink``."""

    def __init__(self, sink: ReportSink, policies: Policies, capacity: int = QUEUE) -> None:
        self._sink, self._policies = sink, policies
        # Only the object's reference and the checks are kept: a burst holds no objects in memory.
        self._queue: collections.deque[tuple[ResourceRef, str, list[RuleCheck]]] = collections.deque(maxlen=capacity)
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Verdicts dropped because the queue was full."""

    def offer(self, obj: Obj, operation: str, dry_run: bool, verdict: Verdict) -> None:
        """Queue an allowed verdict on ``obj`` (returns at once; nothing is awaited)."""
        if not verdict.checks or not verdict.allowed or dry_run or operation not in ("CREATE", "UPDATE"):
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        meta = obj.get("metadata")
        uid = str(meta.get("uid") or "") if isinstance(meta, dict) else ""
        self._queue.append((ResourceRef.of(obj), uid, verdict.checks))
        self._ready.set()

    def results(self, checks: list[RuleCheck]) -> list[RuleResult]:
        """The results of the Warn and Audit rules among ``checks`` (an allowed validation's)."""
        matched: list[tuple[CompiledPolicy, Any]] = []
        for check in checks:
            pid = check.rule.policy
            policy = self._policies.get(pid.kind, pid.namespace, pid.name)
            rule = next((r for r in policy.rules if r.index == check.rule.rule), None) if policy else None
            if policy is not None and rule is not None and REPORTED & rule.actions:
                matched.append((policy, rule))
        decision = Decision(True, "", [], {}, [], [], checks=checks)
        return validate_results(decision, matched)

    def start(self) -> None:
        """Start handing results to the sink (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="admission-findings")

    async def stop(self) -> None:
        """Stop (queued verdicts are dropped)."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)

    async def drain(self) -> None:
        """Hand every queued verdict to the sink now (tests)."""
        while self._queue:
            await self._one()

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                try:
                    await self._one()
                except asyncio.CancelledError:
                    raise
                except Exception:  # one bad verdict must not stop the feed
                    log.exception("reporting an admission's results failed")
                await asyncio.sleep(0)  # requests first

    async def _one(self) -> None:
        resource, uid, checks = self._queue.popleft()
        found = self.results(checks)
        if found:
            await self._sink.add_admission_findings(resource, uid, found)
