"""``bench --scan``: the background scan over N existing Pods and 50 validate policies, in process.

The Pods are fed to the scanner's informers as a first list would (no API server: what is
measured is the scan and its effect on admission, not a LIST of N Pods); results go to a sink
that counts them. Measured in one run, in phases:

* ``baseline``: admission alone, before the scan starts;
* ``first pass``: from the scan's start until every Pod has been published (the time to the
  first full report) and the resident memory it added, the results kept in a ledger as the
  report writer keeps them;
* ``steady``: Pods changing at ``rate`` per second; the process's CPU (all threads) against the
  baseline's, as a share of one core.

Throughout, a probe admits the benchmark Pod through the webhook's pipeline (the same 50
policies) every ``PROBE_INTERVAL`` seconds and times each from when it was due, so time the
event loop spent on the scan shows as admission latency. Each phase's p99 is the median of the
p99s of its ``WINDOW``-second windows (one busy moment of a shared machine moves one window), and
the scan's phases are held to :func:`~kinitiras_py.bench.targets.scan`. The garbage collector's
full collections are timed too: the process manages it as ``serve`` does
(:mod:`kinitiras_py.base.collector`), settling once the policies are loaded.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base import collector
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import targets, workload
from kinitiras_py.bench.memory import memory_of
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.informers import Informer
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import validates
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.reports.ledger import Ledger
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.scanner import Scanner

PODS = Resource("", "v1", "pods", True, "Pod")
PROBE_INTERVAL = 0.02
"""Seconds between admissions of the probe (50 per second)."""
BASELINE_SECONDS = 15.0
WINDOW = 5.0
"""Seconds of probes whose p99 is taken together; a phase's p99 is the median over its windows."""


class Preloaded(Informer):
    """An informer whose first list is ``initial`` (applied as ADDED events when started); later
    events are given to :meth:`apply` by the caller. The list is held as JSON text, as a real
    informer holds its objects: tens of thousands of dicts would weigh on the garbage collector's
    full collections, which pause the event loop, where a server's would not."""

    def __init__(self, client: Any, resource: Resource, initial: Sequence[Obj | bytes] = ()) -> None:
        super().__init__(client, resource, compact=True)
        self.initial = [one if isinstance(one, bytes) else orjson.dumps(one) for one in initial]
        self._loading: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Apply the first list in a task, then count as synced."""
        self._loading = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        # In time slices: what is measured is the scan, not this stand-in for a LIST (its copies
        # cost more than the JSON decoding of a real one).
        slicer = Slicer()
        for obj in self.initial:
            await self.apply({"type": "ADDED", "object": orjson.loads(obj)})
            await slicer.turn()
        self.relists += 1
        collector.settle(f"list {self.relists} of {self.resource.plural}")  # as Informer.relist does
        self.synced.set()


class CountingSink:
    """A report sink that counts what it is given and keeps it in a :class:`Ledger`, as the report
    writer does before writing (so the process holds what ``serve``'s would)."""

    def __init__(self) -> None:
        self.published: set[str] = set()
        self.writes = 0
        self.results: dict[str, int] = {}
        self.ledger = Ledger(time.time)

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Count the object and its results."""
        self.published.add(uid)
        self.writes += 1
        self.ledger.publish(resource, uid, results)
        for one in results:
            self.results[one.result] = self.results.get(one.result, 0) + 1

    async def forget_resource(self, resource: ResourceRef, uid: str) -> None:
        """Forget the object."""
        self.published.discard(uid)
        self.ledger.forget_resource(resource, uid)

    async def forget_policy(self, policy: PolicyId) -> None:
        """Nothing to count."""

    async def add_admission_findings(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        """Nothing to count."""

    async def sweep(self) -> None:
        """Nothing to count."""


def pods(total: int) -> list[Obj]:
    """``total`` Pods like :func:`workload.pod`, one in three without an ``owner`` label."""
    out = []
    for i in range(total):
        one = workload.pod()
        meta = one["metadata"]
        meta.update(name=f"web-{i:06d}", uid=f"pod-{i:06d}", resourceVersion="1")
        if i % 3:
            meta["labels"] = {**meta["labels"], "owner": f"team-{i % 7}"}
        out.append(one)
    return out


def policies(total: int) -> list[Obj]:
    """``total`` Audit ClusterValidatePolicies on Pods, two CEL rules each; every tenth also has a
    rule reading request.userInfo, which the scan skips."""
    checks = ("has(object.metadata.labels) && 'owner' in object.metadata.labels",
              "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
              "object.spec.containers.all(c, has(c.resources.limits) && 'memory' in c.resources.limits)",
              "size(object.metadata.name) <= 63",
              "!has(object.spec.hostNetwork) || !object.spec.hostNetwork")
    out = []
    for i in range(total):
        rules = [{"cel": checks[i % len(checks)], "message": f"check {i}", "validationActions": ["Audit"]},
                 {"cel": f"object.metadata.name != 'forbidden-{i}'", "validationActions": ["Audit"]}]
        if i % 10 == 0:
            rules.append({"cel": "request.userInfo.username != 'mallory'", "validationActions": ["Audit"]})
        out.append({"apiVersion": workload.API_VERSION, "kind": "ClusterValidatePolicy",
                    "metadata": {"name": f"scan-{i:03d}", "uid": f"policy-{i}", "generation": 1},
                    "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "validateRules": rules}})
    return out


@dataclass
class Phase:
    """Admission latencies (seconds, from when each probe was due) and CPU seconds of one phase."""

    name: str
    latencies: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    """How long each probe waited for the event loop (from when it was due until it began): what
    the scan and the collector hold it for. The rest of a latency is the admission itself, which a
    busy machine lengthens when it takes the CPU away from the process."""
    seconds: float = 0.0
    cpu: float = 0.0
    pauses: list[float] = field(default_factory=list)
    """The garbage collector's full collections during the phase, seconds each."""

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the latencies (0 without any)."""
        return _quantile(self.latencies, q)

    def windowed_p99(self) -> float:
        """The median of the p99s of the phase's ``WINDOW``-second windows of probes (a last
        window shorter than half of one joins the one before)."""
        size = max(1, round(WINDOW / PROBE_INTERVAL))
        windows = [self.latencies[i:i + size] for i in range(0, len(self.latencies), size)]
        if len(windows) > 1 and len(windows[-1]) < size / 2:
            windows[-2] += windows.pop()
        return statistics.median(_quantile(one, 0.99) for one in windows) if windows else 0.0

    def to_json(self) -> dict[str, float | int | str]:
        """The phase as JSON (milliseconds; CPU as a share of one core)."""
        return {"phase": self.name, "probes": len(self.latencies), "seconds": round(self.seconds, 2),
                "p50_ms": round(self.quantile(0.5) * 1000, 3), "p99_ms": round(self.windowed_p99() * 1000, 3),
                "p99_whole_ms": round(self.quantile(0.99) * 1000, 3),
                "max_ms": round(max(self.latencies, default=0.0) * 1000, 3),
                "wait_p99_ms": round(_quantile(self.waits, 0.99) * 1000, 3),
                "cpu_share": round(self.cpu / self.seconds, 3) if self.seconds else 0.0,
                "full_collections": len(self.pauses),
                "max_collection_ms": round(max(self.pauses, default=0.0) * 1000, 3)}


def _quantile(values: Sequence[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


@dataclass
class ScanStats:
    """One run of the scenario."""

    pods: int
    policies: int
    rate: float
    first_report_seconds: float
    memory_added_mib: float
    phases: list[Phase]
    writes: int
    results: dict[str, int]

    def marks(self) -> list[targets.Mark]:
        """Each scan phase's p99 against the baseline's (:func:`~kinitiras_py.bench.targets.scan`)."""
        base = self.phases[0].windowed_p99()
        return [mark for phase in self.phases
                for mark in targets.scan(phase.name, phase.windowed_p99() / base if base else 0.0)]

    def to_json(self) -> dict[str, Any]:
        """The run as JSON."""
        marks = self.marks()
        return {"pods": self.pods, "policies": self.policies, "changes_per_second": self.rate,
                "first_report_seconds": round(self.first_report_seconds, 2),
                "memory_added_mib": round(self.memory_added_mib, 1), "writes": self.writes,
                "results": self.results, "phases": [p.to_json() for p in self.phases],
                "targets": [{"phase": phase.name, "what": m.what, "value": round(m.value, 3), "limit": m.limit,
                             "ok": m.passed} for phase, m in zip(self.phases[1:], marks, strict=True)]}


class _PodsOnly:
    """Discovery knowing Pods only (the scenario's policies select nothing else)."""

    async def resolve(self, api_version: str, kind: str) -> Resource:
        if (api_version, kind) != ("v1", "Pod"):
            raise LookupError(f"unknown kind {kind} in {api_version}")
        return PODS

    async def groups(self) -> list[str]:
        return [""]

    async def group_resources(self, group: str) -> list[Resource]:
        return [PODS] if group == "" else []


class _Probe:
    """Admits the benchmark Pod (a new name each time) every PROBE_INTERVAL into ``phase``."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.phase = Phase("none")
        self.count = 0

    async def run(self) -> None:
        due = time.monotonic()
        while True:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            began = time.monotonic()
            self.count += 1
            obj = workload.pod()
            obj["metadata"]["name"] = f"probe-{self.count}"
            await self.pipeline.admit(Request("CREATE", obj, namespace=workload.NAMESPACE))
            now = time.monotonic()
            self.phase.latencies.append(now - due)
            self.phase.waits.append(max(0.0, began - due))
            due = max(due + PROBE_INTERVAL, now)  # a late probe is not followed by a burst


def _full_pause(phase: Phase, generation: int, took: float) -> None:
    if generation == collector.FULL:
        phase.pauses.append(took)


async def _measure(phase: Phase, probe: _Probe, until: Any) -> Phase:
    """Run ``phase`` until the awaitable ``until`` is done; wall and CPU seconds."""
    probe.phase = phase
    wall, cpu = time.monotonic(), time.process_time()
    await until
    phase.seconds, phase.cpu = time.monotonic() - wall, time.process_time() - cpu
    return phase


async def _first_pass(scanner: Scanner, sink: CountingSink, total: int) -> None:
    await scanner.start()
    while scanner.passes < 1 or len(sink.published) < total:
        await asyncio.sleep(0.01)


async def _changes(informer: Informer, existing: list[bytes], rate: float, seconds: float) -> None:
    """Change ``rate`` Pods per second (a label and the resourceVersion) for ``seconds``."""
    began = time.monotonic()
    for step in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, began + step / rate - time.monotonic()))
        obj = orjson.loads(existing[step % len(existing)])
        obj["metadata"]["labels"] = {**obj["metadata"]["labels"], "changed": str(step)}
        obj["metadata"]["resourceVersion"] = str(step + 2)
        await informer.apply({"type": "MODIFIED", "object": obj})


async def run(total_pods: int, total_policies: int = 50, rate: float = 20.0, seconds: float = 30.0,
              baseline: float = BASELINE_SECONDS, cpu_share: float = 0.5) -> ScanStats:
    """The scenario (see the module docstring)."""
    existing = [orjson.dumps(one) for one in pods(total_pods)]
    compiled = [compile_policy(doc) for doc in policies(total_policies)]
    probe = _Probe(Pipeline(PolicyIndex(), PolicyIndex(p for p in compiled if validates(p)), StaticStore()))
    sink = CountingSink()
    scanner = Scanner(None, sink, Context(StaticStore()), _PodsOnly(), cpu_share=cpu_share,
                      make_informer=lambda client, resource: Preloaded(client, resource, existing))
    for policy in compiled:
        await scanner.on_policy(policy.kind, policy.namespace, policy.name, policy)
    collector.manage(True)
    collector.settle("policies loaded")  # as serve does once its policies are loaded
    probing = asyncio.get_running_loop().create_task(probe.run())
    try:
        with collector.Pauses(lambda generation, took: _full_pause(probe.phase, generation, took)):
            phases = [await _measure(Phase("baseline"), probe, asyncio.sleep(baseline))]
            before = memory_of(os.getpid())[0]
            phases.append(await _measure(Phase("first pass"), probe, _first_pass(scanner, sink, total_pods)))
            added = memory_of(os.getpid())[0] - before
            informer = scanner.feed.informers[PODS]
            phases.append(await _measure(Phase("steady"), probe, _changes(informer, existing, rate, seconds)))
    finally:
        probing.cancel()
        await scanner.stop()
        collector.manage(False)
    return ScanStats(total_pods, total_policies, rate, phases[1].seconds, added, phases, sink.writes,
                     dict(sorted(sink.results.items())))


def table(stats: ScanStats) -> str:
    """The run as text: the headline figures, then one line per phase."""
    base = stats.phases[0]
    lines = [f"{stats.pods} Pods, {stats.policies} validate policies: first full report in "
             f"{stats.first_report_seconds:.1f} s, memory added {stats.memory_added_mib:.1f} MiB, "
             f"{stats.writes} writes, results {stats.results}",
             f"{'phase':<11} {'probes':>7} {'seconds':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU':>6} "
             f"{'scan CPU':>9} {'wait p99':>8} {'full GCs':>8} {'GC max ms':>9}  target"]
    marks = iter(stats.marks())
    for phase in stats.phases:
        row = phase.to_json()
        extra = (row["cpu_share"] - base.to_json()["cpu_share"]) if phase is not base else 0.0  # type: ignore[operator]
        mark = next(marks).text() if phase is not base else ""
        lines.append(f"{phase.name:<11} {row['probes']:>7} {row['seconds']:>8} {row['p50_ms']:>8} {row['p99_ms']:>8} "
                     f"{row['max_ms']:>8} {row['cpu_share']:>6} {extra:>9.3f} {row['wait_p99_ms']:>8} "
                     f"{row['full_collections']:>8} {row['max_collection_ms']:>9}  {mark}".rstrip())
    lines.append(f"steady: {stats.rate:g} Pod changes/s; CPU as a share of one core (scan CPU: above the baseline, "
                 f"which is the admission probe alone); p99: the median of {WINDOW:g} s windows' p99; wait p99: of "
                 "the time probes waited for the event loop; full GCs: the garbage collector's full collections "
                 "and the longest")
    return "\n".join(lines)


def main(total_pods: int, total_policies: int, rate: float, seconds: float, output: str) -> int:
    """``bench --scan``: run the scenario (a baseline half as long as the steady phase), print the
    table (or JSON)."""
    import sys

    stats = asyncio.run(run(total_pods, total_policies, rate, seconds, baseline=seconds / 2))
    if output == "table":
        print(table(stats))
    else:
        sys.stdout.write(orjson.dumps(stats.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
