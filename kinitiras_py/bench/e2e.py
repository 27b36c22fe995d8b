"""Pod CREATEs through a real API server: no webhook, the floor, ours with k of N policies matching.

The client is the lean closed-loop load (``loadgen``): ``concurrency`` keep-alive connections to
the API server, each POSTing the Pod JSON (``workload.server_pod``, generateName) as soon as its
previous Pod is stored. ``pods/s`` is Pods stored per second of wall time; latencies are per
request. Every figure is also given as a ratio to the floor set-up at the same concurrency, which
is timed in blocks spread over the run (:func:`run`).
Before a set-up is timed, a dry-run create proves it does what its name says (the floor's
label, or exactly the matching policies' labels, and nothing else).

Everything shares the machine here (etcd, kube-apiserver, the webhook and the load), so the
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
    url = f"{access.server}/api/v1/namespaces/{workload.NAMESPACE}/pods?dryRun=All"
    labels = _added_labels(await loadgen.once(url, orjson.dumps(pod), access.context(), access.headers()), pod)
    if labels != expected:
        raise RuntimeError(f"benchmark setup is wrong: {setup} added the labels {sorted(labels)}, "
                           f"expected {sorted(expected)}")


@dataclass
class _Timed:
    """What one set-up at one concurrency did, possibly over several blocks (the floor's)."""

    load: loadgen.Load
    used: child.Sched

    def __add__(self, other: _Timed) -> _Timed:
        a, b = self.load, other.load
        return _Timed(loadgen.Load(a.answered + b.answered, a.errors + b.errors, a.elapsed + b.elapsed,
                                   a.latencies + b.latencies, a.cpu + b.cpu, a.first_error or b.first_error),
                      self.used + other.used)

    def row(self, setup: str, concurrency: int) -> Row:
        load, wall = self.load, self.load.elapsed or 1.0
        ordered = sorted(load.latencies)
        return Row(setup=setup, concurrency=concurrency, pods=load.answered, errors=load.errors,
                   p50=statistics.median(ordered), p90=percentile(ordered, 0.90), p99=percentile(ordered, 0.99),
                   rate=load.rate, load_cpu=load.cpu / wall,
                   load_busy=(self.used.running + self.used.waiting) / wall, first_error=load.first_error)


async def _time(access: Access, pod: Obj, concurrency: int, pods: int, warmup: int) -> _Timed:
    url = f"{access.server}/api/v1/namespaces/{workload.NAMESPACE}/pods"
    request = loadgen.http_request(url, orjson.dumps(pod), access.headers())
    context = access.context()
    if warmup:
        await loadgen.closed_loop(url, request, context, concurrency, 3600.0, b'"kind":"Pod"', warmup)
    before = child.sched()
    load = await loadgen.closed_loop(url, request, context, concurrency, 3600.0, b'"kind":"Pod"', pods)
    return _Timed(load, child.sched() - before)


async def run(access: Access, total: int, matching: Sequence[int], pods: int, concurrency: Sequence[int],
              log: Callable[[str], None] = print, uncached: bool = False) -> list[Row]:
    """Time ``pods`` Pod CREATEs at each concurrency in each set-up (see the module docstring);
    with ``uncached``, ours again with its CEL result cache off.

    The floor is timed in blocks of ``pods`` spread over the run (before ours, between ours'
    groups, after), and its row pools them: the API server drifts during a run (the floor's p50
    is logged block by block), and a floor timed once, first, would lend that drift to every ratio."""
    pod = workload.server_pod()
    kube = Kube(access)
    rows: list[Row] = []
    floors: dict[int, list[_Timed]] = {c: [] for c in concurrency}
    warmup = max(5, pods // 10)

    async def timed(setup: str, expected: set[str]) -> list[_Timed]:
        await _check(access, pod, expected, setup)
        waited, busy = await quiet_machine()
        log(f"  the machine quiet ({busy:.0%} busy) after {waited:.1f} s")
        out = []
        for c in concurrency:
            out.append(await _time(access, pod, c, pods, warmup))
            one = out[-1].row(setup, c)
            log(f"  {setup}, concurrency {c}: {one.rate:.0f} pods/s, p50 {one.p50 * 1000:.1f} ms"
                + (f"; {one.errors} errors, the first: {one.first_error}" if one.errors else ""))
        await kube.delete(f"/api/v1/namespaces/{workload.NAMESPACE}/pods")
        return out

    async def floor_block() -> None:
        log(f"set-up: the floor (block {len(floors[concurrency[0]]) + 1})")
        async with setups.floor(kube):
            await _settle(access, pod, {floor.LABEL}, "the floor")
            for c, block in zip(concurrency, await timed("floor", {floor.LABEL}), strict=True):
                floors[c].append(block)
        await _settle(access, pod, set(), "no webhook")

    try:
        await kube.namespace(workload.NAMESPACE, setups.NAMESPACE_LABEL)
        log("set-up: no webhook")
        rows += [t.row("no webhook", c) for c, t in zip(concurrency, await timed("no webhook", set()), strict=True)]
        ours: list[Row] = []
        for cel_results in (True, False) if uncached else (True,):
            await floor_block()
            async with setups.ours(kube, log, cel_results=cel_results) as served:
                for k in matching:
                    name = f"ours {k}/{total}" + ("" if cel_results else " uncached")
                    log(f"set-up: {name}")
                    await served.become(workload.some_matching(total, k))
                    expected = {f"bench.example.com/policy-{i:04d}" for i in range(k)}
                    await _settle(access, pod, expected, name)
                    ours += [t.row(name, c) for c, t in zip(concurrency, await timed(name, expected), strict=True)]
        await floor_block()
        for c, blocks in floors.items():
            rows.append(sum(blocks[1:], blocks[0]).row("floor", c))
            p50s = ", ".join(f"{b.row('floor', c).p50 * 1000:.1f}" for b in blocks)
            log(f"  the floor at concurrency {c}, block by block: p50 {p50s} ms")
        rows += ours
    finally:
        await kube.close()
    return with_ratios(rows)


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


def medians(runs: Sequence[Sequence[Row]]) -> list[Row]:
    """One row per set-up and concurrency: the median of each figure over ``runs`` (whole runs of
    :func:`run`), ratios recomputed from the medians."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for rows in runs:
        for r in rows:
            groups.setdefault((r.setup, r.concurrency), []).append(r)
    out = []
    for (setup, concurrency), rows in groups.items():
        def mid(field: str, rows: list[Row] = rows) -> float:
            return float(statistics.median(getattr(r, field) for r in rows))

        out.append(Row(setup=setup, concurrency=concurrency, pods=sum(r.pods for r in rows),
                       errors=sum(r.errors for r in rows), p50=mid("p50"), p90=mid("p90"), p99=mid("p99"),
                       rate=mid("rate"), load_cpu=mid("load_cpu"), load_busy=mid("load_busy"),
                       first_error=next((r.first_error for r in rows if r.first_error), "")))
    return with_ratios(out)
