"""Pod CREATEs through a real API server: no webhook, the floor, ours with k of N policies matching.

The client is the lean closed-loop load (``loadgen``): ``concurrency`` keep-alive connections to
the API server, each POSTing the Pod JSON (``workload.server_pod``, generateName) as soon as its
previous Pod is stored. ``pods/s`` is Pods stored per second of wall time; latencies are per
request.

The set-ups live side by side, each in a namespace of its own, so they can be timed in turn,
round after round, instead of one after another: the floor's webhook is registered for its
namespace only, ours' webhooks (``kinitiras-py serve`` with all N policies) leave the no-webhook
and floor namespaces alone (their ignore label), and each of ours' namespaces holds its k
matching policies. Each round times every set-up once, from a quiet machine, in an order rotated
by one each round, and gives every figure as a ratio to the floor of that round: the API server
drifts by tens of percent within minutes here, and paired ratios cancel what the set-ups share.
The figures reported are medians over the rounds, the ratios too (:func:`medians`).
Before a set-up is timed, a dry-run create proves it does what its name says (the floor's
label, or exactly the matching policies' labels, and nothing else).

Everything shares the machine here (etcd, kube-apiserver, the webhooks and the load), so the
load's own CPU use is reported for every row: the no-webhook row, the fastest, shows how much
of a core the load needs at the highest rate of the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import child, floor, loadgen, setups, workload
from kinitiras_py.bench.kube import Access, Kube
from kinitiras_py.bench.runner import percentile
from kinitiras_py.registration.builder import IGNORE_LABEL


@dataclass(frozen=True)
class Row:
    """One set-up at one concurrency; durations in seconds."""

    setup: str
    concurrency: int
    pods: int
    errors: int
    p50: float
    p90: float
    p99: float
    rate: float
    """Pods stored per second."""
    load_cpu: float
    """The load's CPU time / wall time."""
    load_busy: float
    """The load's time on a CPU or waiting for one / wall time."""
    p50_ratio: float = 0.0
    """``p50`` / the floor set-up's at the same concurrency."""
    rate_ratio: float = 0.0
    """``rate`` / the floor set-up's at the same concurrency."""
    first_error: str = ""
    """The first answer counted as an error, if any."""


def _added_labels(answer: bytes, pod: Obj) -> set[str]:
    stored = orjson.loads(answer)
    return set(stored["metadata"].get("labels") or {}) - set(pod["metadata"]["labels"])


async def _check(access: Access, pod: Obj, expected: set[str], setup: str) -> None:
    url = f"{access.server}/api/v1/namespaces/{pod['metadata']['namespace']}/pods?dryRun=All"
    labels = _added_labels(await loadgen.once(url, orjson.dumps(pod), access.context(), access.headers()), pod)
    if labels != expected:
        raise RuntimeError(f"benchmark setup is wrong: {setup} added the labels {sorted(labels)}, "
                           f"expected {sorted(expected)}")


@dataclass
class _Timed:
    """What one set-up at one concurrency did in one block."""

    load: loadgen.Load
    used: child.Sched

    def row(self, setup: str, concurrency: int) -> Row:
        load, wall = self.load, self.load.elapsed or 1.0
        ordered = sorted(load.latencies)
        return Row(setup=setup, concurrency=concurrency, pods=load.answered, errors=load.errors,
                   p50=statistics.median(ordered), p90=percentile(ordered, 0.90), p99=percentile(ordered, 0.99),
                   rate=load.rate, load_cpu=load.cpu / wall,
                   load_busy=(self.used.running + self.used.waiting) / wall, first_error=load.first_error)


async def _time(access: Access, pod: Obj, concurrency: int, pods: int, warmup: int) -> _Timed:
    url = f"{access.server}/api/v1/namespaces/{pod['metadata']['namespace']}/pods"
    request = loadgen.http_request(url, orjson.dumps(pod), access.headers())
    context = access.context()
    if warmup:
        await loadgen.closed_loop(url, request, context, concurrency, 3600.0, b'"kind":"Pod"', warmup)
    before = child.sched()
    load = await loadgen.closed_loop(url, request, context, concurrency, 3600.0, b'"kind":"Pod"', pods)
    return _Timed(load, child.sched() - before)


@dataclass(frozen=True)
class SetUp:
    """A set-up: the namespace its Pods are created in, and the labels it adds to them."""

    name: str
    namespace: str
    expected: frozenset[str]

    def pod(self) -> Obj:
        """The benchmark Pod, in this set-up's namespace."""
        pod = workload.server_pod()
        return {**pod, "metadata": {**pod["metadata"], "namespace": self.namespace}}


NO_WEBHOOK = SetUp("no webhook", f"{workload.NAMESPACE}-none", frozenset())
FLOOR = SetUp("floor", f"{workload.NAMESPACE}-floor", frozenset({floor.LABEL}))
_SKIPPED_BY_OURS = {IGNORE_LABEL: "true"}
"""Ours' webhooks leave a namespace with this label alone (their namespaceSelector)."""


def ours_setup(total: int, k: int, cached: bool = True) -> SetUp:
    """Ours with ``k`` of ``total`` policies matching: its Pods' namespace holds ``k`` matching policies."""
    return SetUp(f"ours {k}/{total}" + ("" if cached else " uncached"), f"{workload.NAMESPACE}-{k}",
                 frozenset(workload.policy_label(i) for i in range(k)))


async def run(access: Access, total: int, matching: Sequence[int], pods: int, concurrency: Sequence[int],
              log: Callable[[str], None] = print, uncached: bool = False, rounds: int = 3) -> list[list[Row]]:
    """Time ``pods`` Pod CREATEs at each concurrency in each set-up, ``rounds`` times; one list of
    rows per round, each with its ratios to that round's floor (see the module docstring). With
    ``uncached``, ours is timed again with its CEL result cache and memories off, in rounds of
    their own with the floor."""
    matched = [ours_setup(total, k) for k in matching]
    policies = workload.spread(total, {s.namespace: len(s.expected) for s in matched})
    kube = Kube(access)
    warmup = max(5, pods // 10)
    out: list[list[Row]] = []

    async def one_round(index: int, phase: list[SetUp]) -> list[Row]:
        turn = index % len(phase)  # each set-up goes first in its turn: none gains from its place
        rows: list[Row] = []
        for setup in phase[turn:] + phase[:turn]:
            pod = setup.pod()
            await _check(access, pod, set(setup.expected), setup.name)
            waited, busy = await quiet_machine()
            log(f"  the machine quiet ({busy:.0%} busy) after {waited:.1f} s")
            for c in concurrency:
                rows.append((await _time(access, pod, c, pods, warmup)).row(setup.name, c))
                log(f"  {setup.name}, concurrency {c}: {rows[-1].rate:.0f} pods/s, p50 {rows[-1].p50 * 1000:.1f} ms"
                    + (f"; {rows[-1].errors} errors, the first: {rows[-1].first_error}" if rows[-1].errors else ""))
            await kube.delete(f"/api/v1/namespaces/{setup.namespace}/pods")
        rank = {s.name: i for i, s in enumerate(phase)}
        return with_ratios(sorted(rows, key=lambda r: (rank[r.setup], r.concurrency)))

    try:
        await kube.many(kube.namespace(s.namespace, labels) for s, labels in (
            (NO_WEBHOOK, _SKIPPED_BY_OURS), (FLOOR, {**setups.NAMESPACE_LABEL, **_SKIPPED_BY_OURS}),
            *((s, {}) for s in matched)))
        async with setups.floor(kube):
            await _settle(access, FLOOR.pod(), set(FLOOR.expected), FLOOR.name)
            for cached in (True, False) if uncached else (True,):
                async with setups.ours(kube, log, cel_results=cached) as served:
                    log(f"set-up: ours{'' if cached else ' uncached'}, {total} policies")
                    await served.become(policies)
                    phase = [NO_WEBHOOK, FLOOR] if cached else [FLOOR]
                    phase += [ours_setup(total, k, cached) for k in matching]
                    for setup in phase[1:]:
                        await _settle(access, setup.pod(), set(setup.expected), setup.name)
                    for index in range(rounds):
                        log(f"round {index + 1} of {rounds}" + ("" if cached else " (ours uncached)"))
                        out.append(await one_round(index, phase))
                        log("  ratios to the floor: " + ", ".join(
                            f"{r.setup} c={r.concurrency} p50 {r.p50_ratio:.2f}x pods/s {r.rate_ratio:.2f}x"
                            for r in out[-1] if r.setup.startswith("ours")))
    finally:
        await kube.many(kube.delete(f"/api/v1/namespaces/{s.namespace}") for s in (NO_WEBHOOK, FLOOR, *matched))
        await kube.close()
    return out


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU so far (Linux ``/proc/stat``)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


async def quiet_machine(below: float = 0.25, seconds: float = 2.0, timeout: float = 20.0) -> tuple[float, float]:
    """Wait until the machine's CPUs have been less than ``below`` busy over each half second of
    the last ``seconds`` (at most ``timeout``); the seconds waited and the last half second's share. A
    set-up leaves work behind (the controller manager filling new namespaces, the API server
    deleting what a set-up removed): each is timed from a quiet machine, so none is timed beside
    another's leftovers."""
    started = time.monotonic()
    quiet_since: float | None = None
    busy = 1.0
    if not Path("/proc/stat").exists():
        return 0.0, 0.0
    before = _cpu_times()
    while time.monotonic() - started < timeout:
        await asyncio.sleep(0.5)
        now = _cpu_times()
        busy = (now[0] - before[0]) / ((now[1] - before[1]) or 1.0)
        before = now
        if busy >= below:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= seconds:
            break
    return time.monotonic() - started, busy


async def _settle(access: Access, pod: Obj, expected: set[str], setup: str, timeout: float = 30.0) -> None:
    """Wait until the API server's webhook configuration reflects ``setup`` (it watches them)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await _check(access, pod, expected, setup)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def with_ratios(rows: Sequence[Row]) -> list[Row]:
    """``rows`` with their ratios to the floor row of the same concurrency."""
    floors = {r.concurrency: r for r in rows if r.setup == "floor"}
    out = []
    for r in rows:
        base = floors.get(r.concurrency)
        out.append(dataclasses.replace(r, p50_ratio=r.p50 / base.p50 if base and base.p50 else 0.0,
                                       rate_ratio=r.rate / base.rate if base and base.rate else 0.0))
    return out


def medians(rounds: Sequence[Sequence[Row]]) -> list[Row]:
    """One row per set-up and concurrency: the median of each figure over ``rounds`` (each with
    its ratios to its own floor), the ratios the medians of those paired ratios."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for rows in rounds:
        for r in rows:
            groups.setdefault((r.setup, r.concurrency), []).append(r)
    out = []
    for (setup, concurrency), rows in groups.items():
        def mid(field: str, rows: list[Row] = rows) -> float:
            return float(statistics.median(getattr(r, field) for r in rows))

        out.append(Row(setup=setup, concurrency=concurrency, pods=sum(r.pods for r in rows),
                       errors=sum(r.errors for r in rows), p50=mid("p50"), p90=mid("p90"), p99=mid("p99"),
                       rate=mid("rate"), load_cpu=mid("load_cpu"), load_busy=mid("load_busy"),
                       p50_ratio=mid("p50_ratio"), rate_ratio=mid("rate_ratio"),
                       first_error=next((r.first_error for r in rows if r.first_error), "")))
    return out
