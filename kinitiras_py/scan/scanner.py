"""The background scan: which objects to evaluate when, and what goes to the report sink.

Only the leader scans (:meth:`Scanner.start` when it gains the Lease, :meth:`Scanner.stop` when it
loses it): it watches the kinds the policies select (:mod:`.feed`) and evaluates objects one at a
time in a single task, so a scan never runs two rules at once beside the webhook. Work comes from
events: a changed object is scanned again, a deleted one forgotten; a changed policy has the
objects of its kinds (before and after the change) scanned again, a deleted one is forgotten
first; and from a full pass of every watched object each ``period``, which also retries kinds
discovery did not know. An object's results are published only when they differ from what this
replica published last, so a full pass over unchanged objects writes nothing; a new leader knows
nothing it published, so its first pass writes every object (the writer's names are
deterministic: it overwrites its predecessor's reports), then asks the sink to ``sweep`` the
reports no object's results account for (results that went while no replica led).

CPU is bounded by ``cpu_share``: after each object the scan sleeps long enough that it uses at
most that share of the event loop's time (rules that may run long go to a worker thread, as in
admission). Object changes are coalesced: an object changed many times while queued is scanned once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kinitiras_py.admission.results import RESULTS, ResourceRef, RuleResult
from kinitiras_py.base import aiotasks, collector
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.informers import Informer
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.registration.rules import Catalog
from kinitiras_py.scan import kinds
from kinitiras_py.scan.evaluation import Context, Evaluator, evaluator
from kinitiras_py.scan.feed import Feed, Key
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.plans import Plan, plan
from kinitiras_py.scan.sink import ReportSink

log = logging.getLogger(__name__)

__all__ = ["Scanner"]

MAX_PAUSE = 1.0
"""Seconds the CPU bound makes the scan wait after one object, at most."""
SYNC_WAIT = 60.0
"""Seconds a full pass waits for the informers' first lists before it begins with what is there."""


@dataclass
class _Work:
    """What is to be done for one key: forget deleted objects (their last reference and uid),
    then scan what is there now."""

    gone: list[tuple[ResourceRef, str]] = field(default_factory=list)
    scan: bool = False


@dataclass
class _Published:
    """What this replica last published for an object."""

    ref: ResourceRef
    uid: str
    digest: int
    counts: tuple[int, ...]


def _digest(results: Sequence[RuleResult]) -> int:
    return hash(tuple((r.policy, r.rule, r.type, r.result, r.message) for r in results))


def _counts(results: Sequence[RuleResult]) -> tuple[int, ...]:
    return tuple(sum(r.result == result for r in results) for result in RESULTS)


class Scanner:
    """Scans the objects the policies select while leading; see the module docstring."""

    def __init__(self, client: Any, sink: ReportSink, context: Context, catalog: Catalog, *,
                 period: float = 3600.0, cpu_share: float = 0.5, metrics: ScanMetrics | None = None,
                 ready: asyncio.Event | None = None,
                 make_informer: Callable[[Any, Resource], Informer] | None = None) -> None:
        if not 0 < cpu_share <= 1 or period <= 0:
            raise ValueError("need 0 < cpu_share <= 1 and period > 0")
        self.sink, self.context, self.catalog = sink, context, catalog
        self.period, self.cpu_share = period, cpu_share
        self.metrics = metrics
        self.plans: dict[PolicyId, Plan] = {}
        self.feed = Feed(client, self._changed, self._deleted, make=make_informer)
        self.unscanned: list[str] = []
        """Why some selectors are not scanned (every kind, unknown kinds), as last resolved."""
        self.passes = 0
        """Full passes completed since this replica started leading."""
        self._kinds_of: dict[PolicyId, set[Resource]] = {}
        self._evaluator: Evaluator | None = None
        self._pending: dict[Key, _Work] = {}
        self._wake = asyncio.Event()
        self._published: dict[Key, _Published] = {}
        self._totals = [0] * len(RESULTS)
        self._pass_left: set[Key] | None = None
        self._since_pass: set[Key] = set()
        self._pass_started = 0.0
        self._spent = 0.0
        """Seconds the object being scanned took to evaluate (what the CPU bound paces)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._jobs: set[asyncio.Task[None]] = set()
        self.ready = ready or asyncio.Event()
        """Set when the policies are known (the policy watch has synced): the first pass waits for it."""
        if ready is None:
            self.ready.set()
        self._lock = asyncio.Lock()  # policy changes and leadership changes, one at a time
        if metrics is not None:
            metrics.period.set(period)

    @property
    def running(self) -> bool:
        """True while leading (between start and stop)."""
        return bool(self._tasks)

    # -- policies -------------------------------------------------------------------------------

    async def on_policy(self, kind: str, namespace: str | None, name: str, compiled: CompiledPolicy | None) -> None:
        """A policy changed (``compiled``), or was deleted or refused (None): its objects are
        scanned again, in the background (a caller such as the policy watch is not held up)."""
        pid = PolicyId(kind, namespace or None, name)
        if compiled is None:
            if self.plans.pop(pid, None) is None:
                return
        else:
            known = self.plans.get(pid)
            if known is not None and known.policy is compiled:  # a status update: the same version
                return
            self.plans[pid] = plan(compiled)
        self._evaluator = None
        if self.running:
            job = asyncio.get_running_loop().create_task(self._policy_changed(pid, forget=compiled is None),
                                                         name="scan-policy")
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _policy_changed(self, pid: PolicyId, forget: bool) -> None:
        try:
            await self._rescan_policy(pid, forget)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("scan: %s changed, but its objects could not be queued (the next pass scans them)", pid)

    async def _rescan_policy(self, pid: PolicyId, forget: bool) -> None:
        async with self._lock:
            if not self.running:
                return
            if forget:
                await self._call(self.sink.forget_policy(pid), f"forget {pid}")
            if not self.ready.is_set():  # the first pass watches every policy's kinds
                return
            before = self._kinds_of.get(pid, set())
            await self._watch()
            await self._enqueue_resources(before | self._kinds_of.get(pid, set()))

    async def _watch(self) -> None:
        """Resolve every policy's kinds and watch exactly those; objects of kinds no longer
        watched are queued (their results are cleared)."""
        unscanned: list[str] = []
        self._kinds_of = {}
        for pid, one in list(self.plans.items()):  # plans may change while discovery is read
            found = await kinds.resolve([one.policy.selectors], self.catalog)
            self._kinds_of[pid] = found.resources
            unscanned += [f"{pid}: {reason}" for reason in found.unscanned]
        if unscanned != self.unscanned:
            for reason in unscanned:
                log.info("scan: %s", reason)
        self.unscanned = unscanned
        wanted = set().union(*self._kinds_of.values()) if self._kinds_of else set()
        slicer = Slicer()
        for informer in await self.feed.watch(wanted):
            for namespace, name in informer.names():
                self._enqueue((informer.resource, namespace, name))
                await slicer.turn()

    # -- objects --------------------------------------------------------------------------------

    async def _changed(self, key: Key) -> None:
        self._enqueue(key)

    async def _deleted(self, key: Key, obj: Obj) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        self._pending.setdefault(key, _Work()).gone.append((ResourceRef.of(obj), uid))
        self._wake.set()

    def _enqueue(self, key: Key) -> None:
        self._pending.setdefault(key, _Work()).scan = True
        self._wake.set()

    async def _enqueue_resources(self, resources: Iterable[Resource]) -> None:
        wanted, slicer = set(resources), Slicer()
        for key in self.feed.every_key():
            if key[0] in wanted:
                self._enqueue(key)
            await slicer.turn()

    # -- leadership -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start scanning: watch the policies' kinds, scan every object, then a full pass each period."""
        async with self._lock:
            if self.running:
                return
            loop = asyncio.get_running_loop()
            self.passes = 0
            self._tasks = [loop.create_task(self._work(), name="scan-worker"),
                           loop.create_task(self._passes(), name="scan-passes")]
            if self.metrics is not None:
                self.metrics.leading.set(1)
            log.info("scan: started, %d policies", len(self.plans))

    async def stop(self) -> None:
        """Stop scanning and forget what was published (a later start publishes everything again)."""
        tasks, self._tasks = self._tasks, []
        for task in [*tasks, *self._jobs]:
            await aiotasks.cancel(task)
        async with self._lock:
            await self.feed.stop()
            self._pending.clear()
            self._published.clear()
            self._totals = [0] * len(RESULTS)
            self._pass_left = None
            self._since_pass = set()
            self._kinds_of = {}
            if self.metrics is not None:
                self.metrics.leading.set(0)
                self.metrics.queued.set(0)
                self.metrics.watched.set(0)
                for result in RESULTS:
                    self.metrics.results.labels(result).set(0)

    async def on_leading(self, leading: bool) -> None:
        """A leader elector's listener: scan while leading."""
        await (self.start() if leading else self.stop())

    # -- full passes ----------------------------------------------------------------------------

    async def _passes(self) -> None:
        await self.ready.wait()
        while True:
            try:
                async with self._lock:
                    await self._watch()
                # An informer that cannot list (no RBAC for its kind, say) does not hold the pass up:
                # its objects are queued whenever it has listed them.
                waited = 0.0
                while not self.feed.synced and waited < SYNC_WAIT:
                    await asyncio.sleep(0.2)
                    waited += 0.2
                await self._begin_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scan: a full pass could not begin; trying again in %.0f s", self.period)
            await asyncio.sleep(self.period)

    async def _begin_pass(self) -> None:
        every = set(self.feed.every_key())
        # Objects scanned since the previous pass began (changes, a new kind's first list) are
        # current: this pass leaves them out.
        recent, self._since_pass = self._since_pass, set()
        if self.metrics is not None:
            self.metrics.watched.set(len(every))
        if self._pass_left is not None:  # the previous pass is not over: it goes on, with the new objects
            self._pass_left |= every
        else:
            self._pass_left, self._pass_started = every, time.monotonic()
        self._pass_left -= recent
        self._end_pass_if_done()
        # Queued in slices, the worker scanning between them: a key it has meanwhile scanned
        # (an object change) has left the pass and is not queued again.
        slicer = Slicer()
        for key in every - recent:
            if self._pass_left is not None and key in self._pass_left:
                self._enqueue(key)
            await slicer.turn()

    def _end_pass_if_done(self) -> None:
        if self._pass_left is None or self._pass_left:
            return
        self._pass_left = None
        self.passes += 1
        took = time.monotonic() - self._pass_started
        log.info("scan: full pass %d done in %.1f s", self.passes, took,
                 extra={"objects": len(self._published), "results": dict(zip(RESULTS, self._totals, strict=True))})
        if self.metrics is not None:
            self.metrics.pass_duration.set(took)
            self.metrics.last_pass.set(time.time())
        # What the pass built lives until the next one: out of the full collections' walk.
        collector.settle(f"scan pass {self.passes}")
        if self.passes == 1:  # every object has been published: reports nobody holds are stale
            job = asyncio.get_running_loop().create_task(self._sweep(), name="scan-sweep")
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _sweep(self) -> None:
        await self._call(self.sink.sweep(), "sweep stale reports")

    # -- the worker -----------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            if not self._pending:
                self._wake.clear()
                if self.metrics is not None:
                    self.metrics.queued.set(0)
                await self._wake.wait()
                continue
            key = next(iter(self._pending))
            work = self._pending.pop(key)
            if self.metrics is not None:
                self.metrics.queued.set(len(self._pending))
            self._spent = 0.0
            try:
                await self._do(key, work)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scan: %s %s/%s failed", key[0].kind or key[0].plural, key[1], key[2])
            if self._pass_left is not None and key in self._pass_left:
                self._pass_left.discard(key)
                self._end_pass_if_done()
            else:
                self._since_pass.add(key)
            # Yield to the event loop after every object, longer when the scan used its share
            # (evaluating, not waiting for the sink's writes).
            await asyncio.sleep(min(MAX_PAUSE, self._spent * (1 - self.cpu_share) / self.cpu_share))

    async def _do(self, key: Key, work: _Work) -> None:
        for ref, uid in work.gone:
            self._drop(key)
            await self._call(self.sink.forget_resource(ref, uid), f"forget {ref}")
        if not work.scan:
            return
        obj = self.feed.get(key)
        known = self._published.get(key)
        if obj is None:  # deleted meanwhile, or its kind is no longer watched: no results remain
            if known is not None and any(known.counts):
                self._drop(key)
                await self._call(self.sink.publish(known.ref, known.uid, []), f"clear {known.ref}")
            return
        ref, uid = ResourceRef.of(obj), str((obj.get("metadata") or {}).get("uid") or "")
        if known is not None and known.uid != uid:  # replaced under the same name, its deletion unseen
            self._drop(key)
            await self._call(self.sink.forget_resource(known.ref, known.uid), f"forget {known.ref}")
            known = None
        if self._evaluator is None:
            self._evaluator = evaluator(self.plans, self.context)
        # A policy change while this object is evaluated drops the evaluator (and queues the
        # object again): finish with the one this evaluation began with.
        current = self._evaluator
        results = await current.results(obj)
        self._spent = current.spent
        if self.metrics is not None:
            self.metrics.scanned.inc()
        digest = _digest(results)
        if known is not None and known.digest == digest:
            return
        self._drop(key)
        if await self._call(self.sink.publish(ref, uid, results), f"publish {ref}"):
            self._keep(key, _Published(ref, uid, digest, _counts(results)))

    def _drop(self, key: Key) -> None:
        known = self._published.pop(key, None)
        if known is not None:
            self._count(known.counts, -1)

    def _keep(self, key: Key, published: _Published) -> None:
        self._published[key] = published
        self._count(published.counts, 1)

    def _count(self, counts: tuple[int, ...], sign: int) -> None:
        for index, count in enumerate(counts):
            self._totals[index] += sign * count
        if self.metrics is not None:
            for result, total in zip(RESULTS, self._totals, strict=True):
                self.metrics.results.labels(result).set(total)

    @staticmethod
    async def _call(write: Any, what: str) -> bool:
        """Await a sink call; a failure is logged (the next pass tries again) and gives False."""
        try:
            await write
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("scan: the report sink failed to %s", what)
            return False
        return True
