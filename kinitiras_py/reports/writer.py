"""The :class:`~kinitiras_py.reports.sink.ReportSink` that writes PolicyReports through the API server.

Results land in a :class:`~.ledger.Ledger` at once and the object is marked for writing; nothing
is awaited on the caller's behalf. One task writes, and only while ``is_leader()`` holds:

* **coalesced**: an object marked again before its turn is written once, with its latest results;
* **rate-limited**: at most ``writes_per_second`` API requests (a token bucket, bursts of one second);
* **idempotent**: each report is written by server-side apply under its deterministic name (the
  object's uid), so writing again, or a new leader writing, overwrites instead of duplicating;
  parts an object no longer needs are deleted;
* **taking over**: on becoming the leader it lists the reports it manages (one paginated LIST per
  kind), so it knows every part that exists and skips reports that already say the same (a digest
  of the results, timestamps aside, is kept in an annotation), then writes every object it holds.

An object known by reference only (admission of a CREATE, before the API server gives it a uid)
has its uid read from the API server when its turn comes; until the object exists it is tried
again a few times, then dropped (it was never created: denied later, or a dry run).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiohttp

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base import aiotasks
from kinitiras_py.base.ratelimit import TokenBucket
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import ApiException, Resource, Transport
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports import build
from kinitiras_py.reports.ledger import Key, Ledger
from kinitiras_py.reports.stats import ReportStats

log = logging.getLogger(__name__)

FIELD_MANAGER = "kinitiras-py-reports"
RESOURCES = {"PolicyReport": Resource("wgpolicyk8s.io", "v1alpha2", "policyreports", True, "PolicyReport"),
             "ClusterPolicyReport": Resource("wgpolicyk8s.io", "v1alpha2", "clusterpolicyreports", False,
                                             "ClusterPolicyReport")}
UID_TRIES = 5
"""Times the uid of an object known by reference is looked for before its results are dropped."""
RETRIES = 5
"""Times a write failing for a passing reason (5xx, 429, no answer) is tried again."""
TAKEOVER_RETRY = 5.0
"""Seconds between attempts to list the existing reports (the CRD missing, the API server away)."""
_ERRORS = (ApiException, aiohttp.ClientError, TimeoutError, OSError)
UidLookup = Callable[[ResourceRef], Awaitable[str | None]]


@dataclass(frozen=True)
class Written:
    """What exists of one object's reports."""

    kind: str
    namespace: str
    parts: int
    digest: str
    counts: tuple[tuple[str, int], ...] = ()
    """Results by result, in the reports this replica wrote (empty for reports found by listing)."""


class ReportWriter:
    """Writes every object's PolicyReports while this replica leads (see the module docstring)."""

    def __init__(self, api: Transport, is_leader: Callable[[], bool], *, writes_per_second: float = 10.0,
                 stats: ReportStats | None = None, uid_lookup: UidLookup | None = None,
                 clock: Callable[[], float] = time.time, poll: float = 1.0, uid_wait: float = 1.0,
                 retry_delay: float = 1.0, timeout: float = 10.0) -> None:
        self._api, self._is_leader = api, is_leader
        self._bucket = TokenBucket(writes_per_second)
        self.stats = stats or ReportStats()
        self._uid_lookup = uid_lookup
        self.ledger = Ledger(clock)
        self._poll, self._uid_wait, self._retry_delay, self._timeout = poll, uid_wait, retry_delay, timeout
        self._dirty: dict[Key, None] = {}
        self._later: list[tuple[float, int, Key]] = []
        self._tries: dict[Key, int] = {}
        self._written: dict[Key, Written] = {}
        self._wake = asyncio.Event()
        self._leading = False
        self._sweep_due = False
        self._task: asyncio.Task[None] | None = None
        self._sequence = 0

    # -- the sink ---------------------------------------------------------------------------------

    def _mark(self, keys: Sequence[Key]) -> None:
        for key in keys:
            self._dirty[key] = None
        if keys:
            self._wake.set()
        self.stats.pending = len(self._dirty) + len(self._later)

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Replace the object's scan results (none: its reports go away)."""
        changed = self.ledger.publish(resource, uid, results)
        self._mark(changed or ([(uid, None)] if (uid, None) in self._written else []))

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        """The object was deleted: its reports go (the garbage collector would remove them too)."""
        changed = self.ledger.forget_resource(resource, uid)
        self._mark(changed or ([(uid, None)] if (uid, None) in self._written else []))

    async def forget_policy(self, policy: PolicyId) -> None:
        """The policy was deleted: its results go from every report."""
        self._mark(await self.ledger.forget_policy(policy))

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Admission's results for the rules it evaluated join the object's reports."""
        self._mark(self.ledger.admit(resource, uid, results))

    async def sweep(self) -> None:
        """The background scan's first full pass since this replica began to lead is over, so every
        object with results has been published: reports found on taking over that this replica
        holds nothing for are stale (a policy deleted, or a kind no longer selected, while no
        replica led) and are deleted. Asked before the takeover's listing, it runs right after it."""
        if not self._is_leader():  # the scan's term is over
            return
        if not self._leading:
            self._sweep_due = True
            return
        self._sweep_due = False
        self._mark([key for key in self._written if self.ledger.get(key) is None])

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start writing in a task of the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="policy-reports")

    async def stop(self) -> None:
        """Stop writing (what is not written yet stays unwritten: the next leader writes it)."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)

    async def idle(self, within: float = 10.0) -> None:
        """Wait until nothing waits to be written (for tests and orderly stops); TimeoutError after ``within``."""
        async with asyncio.timeout(within):
            while self._dirty or self._later or self._busy:
                await asyncio.sleep(0.01)

    _busy = False

    async def _run(self) -> None:
        while True:
            if not self._is_leader():
                self._step_down()
                await asyncio.sleep(self._poll)  # not woken by new results: they wait for leadership
                continue
            if not self._leading and not await self._take_over():
                await asyncio.sleep(max(self._poll, TAKEOVER_RETRY))
                continue
            key = self._next()
            if key is None:
                self._wake.clear()
                await self._sleep(self._wait_time())
                continue
            self._busy = True
            try:
                await self._write(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not stop every later write
                log.exception("writing the PolicyReports of %s failed", key)
            finally:
                self._busy = False
                self.stats.pending = len(self._dirty) + len(self._later)

    async def _sleep(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(max(seconds, 0.0)):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _wait_time(self) -> float:
        if self._later:
            return min(self._poll, self._later[0][0] - time.monotonic())
        return self._poll

    def _next(self) -> Key | None:
        now = time.monotonic()
        while self._later and self._later[0][0] <= now:
            _, _, key = heapq.heappop(self._later)
            self._dirty[key] = None
        if not self._dirty:
            return None
        key = next(iter(self._dirty))
        del self._dirty[key]
        return key

    def _again(self, key: Key, delay: float) -> bool:
        """Schedule ``key`` once more after ``delay``; False when it was tried too often."""
        tries = self._tries[key] = self._tries.get(key, 0) + 1
        limit = UID_TRIES if not key[0] else RETRIES
        if tries > limit:
            self._tries.pop(key, None)
            return False
        self._sequence += 1
        heapq.heappush(self._later, (time.monotonic() + delay * tries, self._sequence, key))
        return True

    def _step_down(self) -> None:
        self._sweep_due = False  # asked for in a term that ended before the takeover's listing
        if self._leading:
            log.info("not the leader: PolicyReports are left to the new one")
            # Another leader may write meanwhile: what exists is listed again on taking over.
            self._leading = False
            self._written.clear()
            self.stats.reports = dict.fromkeys(self.stats.reports, 0)
            self.stats.results = dict.fromkeys(self.stats.results, 0)
        self.stats.leading = False

    # -- taking over -----------------------------------------------------------------------------

    async def _take_over(self) -> bool:
        """List the reports that exist and mark every object held for writing."""
        found: dict[Key, Written] = {}
        try:
            for kind, resource in RESOURCES.items():
                cont = ""
                while True:
                    query = [("labelSelector", f"{build.MANAGED_BY}={build.SOURCE}"), ("limit", "500")]
                    page = await self._request("list", "GET", resource.path(),
                                               query=query + ([("continue", cont)] if cont else []))
                    for item in page.get("items") or []:
                        _index(found, kind, item)
                    cont = str((page.get("metadata") or {}).get("continue") or "")
                    if not cont:
                        break
        except _ERRORS as e:
            log.warning("listing the existing PolicyReports failed: %s", e)
            return False
        self._written = found
        self._leading = self.stats.leading = True
        self.stats.reports = dict.fromkeys(build.KINDS, 0)
        for written in found.values():
            self.stats.reports[written.kind] += written.parts
        self._mark(list(self.ledger))
        log.info("leading: writing PolicyReports", extra={"existing": len(found), "held": len(self.ledger)})
        if self._sweep_due:
            await self.sweep()
        return True

    # -- writing ---------------------------------------------------------------------------------

    async def _request(self, operation: str, method: str, path: str, **kwargs: object) -> Obj:
        await self._bucket.take()
        try:
            answer = await self._api.request(method, path, timeout=self._timeout, **kwargs)  # type: ignore[arg-type]
        except _ERRORS:
            self.stats.requested(operation, False)
            raise
        self.stats.requested(operation, True)
        return answer

    async def _write(self, key: Key) -> None:
        if not key[0]:
            resolved = await self._resolve(key)
            if resolved is None:
                return
            key = resolved
        record = self.ledger.get(key)
        known = self._written.get(key)
        desired = build.build_reports(record.resource, record.uid, record.results()) if record else []
        try:
            if desired:
                digest = desired[0]["metadata"]["annotations"][build.DIGEST]
                if known is None or known.parts != len(desired) or known.digest != digest:
                    for report in desired:
                        await self._apply(report)
                gone = range(len(desired), known.parts if known else 0)
                kind, namespace = desired[0]["kind"], desired[0]["metadata"].get("namespace", "")
            else:
                gone = range(known.parts if known else 0)
                kind, namespace = (known.kind, known.namespace) if known else ("", "")
            for part in gone:
                await self._delete(kind, namespace, build.report_name(key[0], part))
        except ApiException as e:
            if e.status in (400, 403, 404, 422):  # will not succeed by trying again (a namespace deleted)
                log.warning("PolicyReports of %s not written: %s", record.resource if record else key[0], e.reason)
                return
            self._retry(key, e)
            return
        except _ERRORS as e:
            self._retry(key, e)
            return
        self._tries.pop(key, None)
        self._account(key, known, desired)

    def _retry(self, key: Key, error: BaseException) -> None:
        if not self._again(key, self._retry_delay):
            log.warning("PolicyReports of %s not written after %d tries: %s", key[0], RETRIES, error)

    def _account(self, key: Key, known: Written | None, desired: list[Obj]) -> None:
        """Remember what exists now and update the counts."""
        stats = self.stats
        if known is not None:
            stats.reports[known.kind] -= known.parts
            for result, count in known.counts:
                stats.results[result] -= count
        if not desired:
            self._written.pop(key, None)
            return
        counts: dict[str, int] = {}
        for report in desired:
            for result, count in report["summary"].items():
                counts[result] = counts.get(result, 0) + count
        written = Written(desired[0]["kind"], desired[0]["metadata"].get("namespace", ""), len(desired),
                          desired[0]["metadata"]["annotations"][build.DIGEST], tuple(sorted(counts.items())))
        self._written[key] = written
        stats.reports[written.kind] += written.parts
        for result, count in written.counts:
            stats.results[result] += count

    async def _apply(self, report: Obj) -> None:
        meta = report["metadata"]
        path = RESOURCES[report["kind"]].path(meta.get("namespace"), meta["name"])
        await self._request("apply", "PATCH", path, query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                            body=report, content_type="application/apply-patch+yaml")

    async def _delete(self, kind: str, namespace: str, name: str) -> None:
        try:
            await self._request("delete", "DELETE", RESOURCES[kind].path(namespace or None, name))
        except ApiException as e:
            if e.status != 404:
                raise

    async def _resolve(self, key: Key) -> Key | None:
        """The uid key of an object known by reference, once the API server has it."""
        record = self.ledger.get(key)
        if record is None:
            return None
        uid = None
        if self._uid_lookup is not None:
            try:
                await self._bucket.take()
                uid = await self._uid_lookup(record.resource)
            except (*_ERRORS, LookupError) as e:
                log.debug("looking up the uid of %s failed: %s", record.resource, e)
        if uid:
            self._tries.pop(key, None)
            return self.ledger.resolve(key, uid)
        if not self._again(key, self._uid_wait):
            log.debug("%s does not exist: its admission results are dropped", record.resource)
            self.ledger.drop(key)
        return None


def _index(found: dict[Key, Written], kind: str, item: Obj) -> None:
    """Note one listed report: its object's parts and, on part 0, its digest."""
    meta = item.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    uid = str(labels.get(build.RESOURCE_UID) or "")
    try:
        part = int(labels.get(build.PART) or 0)
    except ValueError:
        return
    if not uid:
        return
    key: Key = (uid, None)
    before = found.get(key)
    parts = max(part + 1, before.parts if before else 0)
    digest = str(annotations.get(build.DIGEST) or "") if part == 0 else (before.digest if before else "")
    found[key] = Written(kind, str(meta.get("namespace") or ""), parts, digest)


def uid_lookup(api: Transport, resolve: Callable[[str, str], Awaitable[Resource]]) -> UidLookup:
    """Reads an object's uid from the API server, its REST path from ``resolve`` (discovery); None
    when the object does not exist."""
    async def lookup(resource: ResourceRef) -> str | None:
        rest = await resolve(resource.api_version, resource.kind)
        try:
            obj = await api.request("GET", rest.path(resource.namespace or None, resource.name), timeout=5.0)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return str((obj.get("metadata") or {}).get("uid") or "") or None

    return lookup


__all__ = ["ReportWriter", "uid_lookup"]
