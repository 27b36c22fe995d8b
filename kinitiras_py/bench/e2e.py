"""Pod CREATEs through a real API server: no webhook, the floor, the hand-written webhook, ours
with k of N policies matching.

The client is the lean closed-loop load (``loadgen``): ``concurrency`` keep-alive connections to
the API server, each POSTing a Pod's JSON as soon as its previous Pod is stored: either the
replicas' template over and over (``workload.server_pod``, generateName: a Deployment's Pods,
equal but for their names, which ours' memories answer), or Pods all unlike each other, in name
and limits (``workload.distinct_server_pod``: StatefulSets, Jobs, bare Pods, rollouts).
``pods/s`` is Pods stored per second of wall time; latencies are per request.

The set-ups live side by side, each in a namespace of its own, so they can be timed in turn,
round after round, instead of one after another: the floor's and the hand-written webhook's are
registered for their namespaces only, ours' webhooks (``kinitiras-py serve`` with all N
policies) leave those and the no-webhook namespace alone (their ignore label), and each of ours'
namespaces holds its k matching policies; one more holds the slow neighbour (a JavaScript rule
running to its 100 ms limit on one Pod in ten) beside them. Each round times every set-up once,
from a quiet machine, in an order rotated by one each round, and gives every figure as a ratio
to the floor of that round: the API server drifts by tens of percent within minutes here, and
paired ratios cancel what the set-ups share.
Ours on distinct Pods is also given as a ratio to the hand-written webhook of that round, and
the slow neighbour's other Pods' p99 as a ratio to that of ours beside no such rule.
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
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    role: str = "ours"
    """What the set-up is: ``none``, ``floor``, ``hand`` (the hand-written webhook), ``ours`` or
    ``slow`` (ours beside a slow neighbour)."""
    matching: int = 0
    """Policies matching its Pods (ours), or that the hand-written webhook stands for."""
    distinct: bool = False
    """Whether its Pods were all unlike each other (:func:`..workload.distinct_server_pod`)."""
    hand_p50_ratio: float = 0.0
    """``p50`` / the hand-written webhook's for the same Pods, matching count and concurrency."""
    hand_rate_ratio: float = 0.0
    """``rate`` / the hand-written webhook's likewise."""
    others_p99: float = 0.0
    """With distinct Pods: the p99 of the Pods a slow neighbour's rule does not select."""
    others_p99_ratio: float = 0.0
    """For the slow neighbour: ``others_p99`` / that of ours with the same policies but that rule."""


def _added_labels(answer: bytes, pod: Obj) -> set[str]:
    stored = orjson.loads(answer)
    return set(stored["metadata"].get("labels") or {}) - set(pod["metadata"]["labels"])


async def _check(access: Access, setup: SetUp) -> None:
    """A dry-run create of each of the set-up's sample Pods: RuntimeError unless it is labelled
    as the set-up says."""
    url = f"{access.server}/api/v1/namespaces/{setup.namespace}/pods?dryRun=All"
    for pod in setup.samples():
        labels = _added_labels(await loadgen.once(url, orjson.dumps(pod), access.context(), access.headers()), pod)
        if labels != setup.expected:
            raise RuntimeError(f"benchmark setup is wrong: {setup.name} added the labels {sorted(labels)}, "
                               f"expected {sorted(setup.expected)}")


@dataclass
class _Timed:
    """What one set-up at one concurrency did in one block."""

    load: loadgen.Load
    used: child.Sched
    slow: frozenset[int] = frozenset()
    """The numbers (in the order sent) of the requests whose Pods a slow neighbour's rule selects."""

    def row(self, setup: SetUp, concurrency: int) -> Row:
        load, wall = self.load, self.load.elapsed or 1.0
        ordered = sorted(load.latencies)
        others = sorted(x for x, n in zip(load.latencies, load.sent, strict=True) if n not in self.slow)
        return Row(setup=setup.name, concurrency=concurrency, pods=load.answered, errors=load.errors,
                   p50=statistics.median(ordered), p90=percentile(ordered, 0.90), p99=percentile(ordered, 0.99),
                   rate=load.rate, load_cpu=load.cpu / wall,
                   load_busy=(self.used.running + self.used.waiting) / wall, first_error=load.first_error,
                   role=setup.role, matching=setup.matching, distinct=setup.distinct,
                   others_p99=percentile(others, 0.99) if setup.distinct else 0.0)


_numbers = itertools.count()
"""Distinct Pods are numbered across the whole run: no two share a name or limits, whatever their
set-up or round (ours' memories see each as new, as they would a Job's or StatefulSet's)."""


def _bodies(setup: SetUp, count: int) -> tuple[list[bytes], frozenset[int]]:
    """``count`` Pod bodies for ``setup`` (one over and over unless distinct), and the positions of
    those the slow neighbour's rule selects."""
    if not setup.distinct:
        return [orjson.dumps(setup.pod())], frozenset()
    pods = [workload.distinct_server_pod(next(_numbers), "pod", setup.namespace) for _ in range(count)]
    return ([orjson.dumps(p) for p in pods],
            frozenset(i for i, p in enumerate(pods) if workload.SLOW_LABEL in p["metadata"]["labels"]))


async def _time(access: Access, setup: SetUp, concurrency: int, pods: int, warmup: int) -> _Timed:
    url = f"{access.server}/api/v1/namespaces/{setup.namespace}/pods"
    context = access.context()

    def requests(count: int) -> tuple[list[bytes], frozenset[int]]:
        bodies, slow = _bodies(setup, count)
        return [loadgen.http_request(url, b, access.headers()) for b in bodies], slow

    if warmup:
        await loadgen.closed_loop(url, requests(warmup)[0], context, concurrency, 3600.0, b'"kind":"Pod"', warmup)
    timed, slow = requests(pods)
    before = child.sched()
    load = await loadgen.closed_loop(url, timed, context, concurrency, 3600.0, b'"kind":"Pod"', pods)
    return _Timed(load, child.sched() - before, slow)


@dataclass(frozen=True)
class SetUp:
    """A set-up: the namespace its Pods are created in, the labels it adds to them, what it is
    (:attr:`Row.role`) and whether its Pods are all distinct."""

    name: str
    namespace: str
    expected: frozenset[str]
    role: str = "ours"
    distinct: bool = False
    matching: int = 0

    def pod(self) -> Obj:
        """The benchmark Pod, in this set-up's namespace (the replicas' template: generateName)."""
        pod = workload.server_pod()
        return {**pod, "metadata": {**pod["metadata"], "namespace": self.namespace}}

    def samples(self) -> list[Obj]:
        """The Pods a dry run checks the set-up with: the template, or two distinct Pods of which
        the first is one a slow neighbour's rule selects."""
        if not self.distinct:
            return [self.pod()]
        pods = [workload.distinct_server_pod(next(_numbers), "check", self.namespace) for _ in range(2)]
        return sorted(pods, key=lambda p: workload.SLOW_LABEL not in p["metadata"]["labels"])


NO_WEBHOOK = SetUp("no webhook", f"{workload.NAMESPACE}-none", frozenset(), "none")
FLOOR = SetUp("floor", f"{workload.NAMESPACE}-floor", frozenset({floor.LABEL}), "floor")
FLOOR_DISTINCT = dataclasses.replace(FLOOR, name="floor distinct", distinct=True)
_SKIPPED_BY_OURS = {IGNORE_LABEL: "true"}
"""Ours' webhooks leave a namespace with this label alone (their namespaceSelector)."""


def _labels(k: int) -> frozenset[str]:
    return frozenset(workload.policy_label(i) for i in range(k))


def ours_setup(total: int, k: int, cached: bool = True, distinct: bool = False) -> SetUp:
    """Ours with ``k`` of ``total`` policies matching: its Pods' namespace holds ``k`` matching policies."""
    name = f"ours {k}/{total}" + ("" if cached else " uncached") + (" distinct" if distinct else "")
    return SetUp(name, f"{workload.NAMESPACE}-{k}", _labels(k), "ours", distinct, k)


def hand_setup(k: int) -> SetUp:
    """The hand-written webhook doing what ``k`` matching policies do, on distinct Pods."""
    return SetUp(f"hand-written {k} distinct", f"{workload.NAMESPACE}-hand", _labels(k), "hand", True, k)


def slow_setup(total: int, k: int) -> SetUp:
    """Ours with ``k`` of ``total`` policies matching, and beside them a JavaScript rule running to
    its 100 ms limit on one distinct Pod in ten (:func:`..workload.slow_policy`)."""
    return SetUp(f"ours {k}/{total} distinct, slow neighbour", f"{workload.NAMESPACE}-slow", _labels(k), "slow",
                 True, k)


def phases(total: int, matching: Sequence[int], uncached: bool = False) -> list[list[SetUp]]:
    """The set-ups timed together in rounds: with ours remembering (the floor first: no webhook,
    the floor, ours for each count on the replicas' Pod; then on distinct Pods the floor, the
    hand-written webhook for the largest count, ours for each count, and the slow neighbour beside
    ours at the smallest), then with ``uncached`` the floor and ours with its memories off."""
    phase = [NO_WEBHOOK, FLOOR, *(ours_setup(total, k) for k in matching), FLOOR_DISTINCT,
             hand_setup(max(matching)), *(ours_setup(total, k, distinct=True) for k in matching),
             slow_setup(total, min(matching))]
    return [phase, [FLOOR, *(ours_setup(total, k, False) for k in matching)]] if uncached else [phase]


def policies_for(total: int, matching: Sequence[int]) -> list[Obj]:
    """``total`` policies: in each set-up's namespace its matching ones, the slow neighbour's
    JavaScript rule in its own namespace, the rest fillers."""
    counts = {ours_setup(total, k).namespace: k for k in matching}
    slow = slow_setup(total, min(matching))
    counts[slow.namespace] = slow.matching
    return [*workload.spread(total - 1, counts), workload.slow_policy(slow.namespace)]


async def run(access: Access, total: int, matching: Sequence[int], pods: int, concurrency: Sequence[int],
              log: Callable[[str], None] = print, uncached: bool = False, rounds: int = 3) -> list[list[Row]]:
    """Time ``pods`` Pod CREATEs at each concurrency in each set-up of :func:`phases`, ``rounds``
    times; one list of rows per round, each with its ratios to that round's floor and hand-written
    webhook (see the module docstring). With ``uncached``, ours is timed again with its CEL result
    cache and memories off, in rounds of their own with the floor."""
    every = phases(total, matching, uncached)
    namespaces = {s.namespace: s for phase in every for s in phase}
    labels = {NO_WEBHOOK.namespace: _SKIPPED_BY_OURS, FLOOR.namespace: {**setups.NAMESPACE_LABEL, **_SKIPPED_BY_OURS},
              hand_setup(1).namespace: {**setups.HAND_LABEL, **_SKIPPED_BY_OURS}}
    kube = Kube(access)
    warmup = max(5, pods // 10)
    out: list[list[Row]] = []

    async def one_round(index: int, phase: list[SetUp]) -> list[Row]:
        turn = index % len(phase)  # each set-up goes first in its turn: none gains from its place
        rows: list[Row] = []
        for setup in phase[turn:] + phase[:turn]:
            await _check(access, setup)
            waited, busy = await quiet_machine()
            log(f"  the machine quiet ({busy:.0%} busy) after {waited:.1f} s")
            for c in concurrency:
                rows.append((await _time(access, setup, c, pods, warmup)).row(setup, c))
                log(f"  {setup.name}, concurrency {c}: {rows[-1].rate:.0f} pods/s, p50 {rows[-1].p50 * 1000:.1f} ms"
                    + (f"; {rows[-1].errors} errors, the first: {rows[-1].first_error}" if rows[-1].errors else ""))
            await kube.delete(f"/api/v1/namespaces/{setup.namespace}/pods")
        rank = {s.name: i for i, s in enumerate(phase)}
        return with_ratios(sorted(rows, key=lambda r: (rank[r.setup], r.concurrency)))

    try:
        await kube.many(kube.namespace(n, labels.get(n, {})) for n in namespaces)
        async with setups.floor(kube), setups.handwritten(kube, max(matching)):
            await _settle(access, FLOOR)
            for cached, phase in zip((True, False), every, strict=False):
                async with setups.ours(kube, log, cel_results=cached) as served:
                    log(f"set-up: ours{'' if cached else ' uncached'}, {total} policies")
                    await served.become(policies_for(total, matching))
                    for setup in phase[1:]:
                        await _settle(access, setup)
                    for index in range(rounds):
                        log(f"round {index + 1} of {rounds}" + ("" if cached else " (ours uncached)"))
                        out.append(await one_round(index, phase))
                        log("  ratios: " + ", ".join(
                            f"{r.setup} c={r.concurrency} p50 {r.p50_ratio:.2f}x floor"
                            + (f" {r.hand_p50_ratio:.2f}x hand-written" if r.hand_p50_ratio else "")
                            + f", pods/s {r.rate_ratio:.2f}x floor"
                            + (f" {r.hand_rate_ratio:.2f}x hand-written" if r.hand_rate_ratio else "")
                            + (f", others' p99 {r.others_p99_ratio:.2f}x" if r.role == "slow" else "")
                            for r in out[-1] if r.role in ("ours", "slow")))
    finally:
        await kube.many(kube.delete(f"/api/v1/namespaces/{n}") for n in namespaces)
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


async def _settle(access: Access, setup: SetUp, timeout: float = 30.0) -> None:
    """Wait until the API server's webhook configuration reflects ``setup`` (it watches them)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await _check(access, setup)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def with_ratios(rows: Sequence[Row]) -> list[Row]:
    """``rows`` (one round's) with their ratios to the floor row for the same kind of Pods
    (distinct or not) and concurrency; ours' to the hand-written webhook's for the same Pods and
    matching count; the slow neighbour's others' p99 to ours' beside no such rule."""
    by_role = {(r.role, r.distinct, r.concurrency, r.matching if r.role != "floor" else 0): r for r in rows}

    def ratio(value: float, base: Row | None, field: str) -> float:
        return value / getattr(base, field) if base is not None and getattr(base, field) else 0.0

    out = []
    for r in rows:
        base = by_role.get(("floor", r.distinct, r.concurrency, 0))
        hand = by_role.get(("hand", r.distinct, r.concurrency, r.matching)) if r.role == "ours" else None
        alone = by_role.get(("ours", True, r.concurrency, r.matching)) if r.role == "slow" else None
        out.append(dataclasses.replace(
            r, p50_ratio=ratio(r.p50, base, "p50"), rate_ratio=ratio(r.rate, base, "rate"),
            hand_p50_ratio=ratio(r.p50, hand, "p50"), hand_rate_ratio=ratio(r.rate, hand, "rate"),
            others_p99_ratio=ratio(r.others_p99, alone, "others_p99")))
    return out


def medians(rounds: Sequence[Sequence[Row]]) -> list[Row]:
    """One row per set-up and concurrency: the median of each figure over ``rounds`` (each with
    its ratios to its own floor), the ratios the medians of those paired ratios."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for rows in rounds:
        for r in rows:
            groups.setdefault((r.setup, r.concurrency), []).append(r)
    summed = ("pods", "errors")
    kept = ("setup", "concurrency", "role", "matching", "distinct")
    out = []
    for rows in groups.values():
        figures = {f.name: float(statistics.median(getattr(r, f.name) for r in rows))
                   for f in dataclasses.fields(Row) if f.name not in (*summed, *kept, "first_error")}
        fields: dict[str, Any] = {**figures, **{name: sum(getattr(r, name) for r in rows) for name in summed},
                                  **{name: getattr(rows[0], name) for name in kept}}
        out.append(Row(**fields, first_error=next((r.first_error for r in rows if r.first_error), "")))
    return out
