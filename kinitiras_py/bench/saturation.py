"""Saturation throughput of the webhook on one core, beside the floor's, in the same run.

Each server (the floor, ours with ``k`` of ``total`` policies matching the Pod) runs in its own
child process pinned to one core; the load comes closed-loop from another core over
``connections`` keep-alive connections (as the API server keeps its connections to a webhook).
Closed-loop with enough connections to keep the server busy measures its saturation rate:
the answers per second it can sustain. The servers are measured in interleaved rounds (floor,
ours-1, ours-20, floor, ...) so that drift in the machine's load touches all alike; each
figure is the median over the rounds.

What limited the rate is read from the scheduler (``/proc/<pid>/schedstat``): for the server
and for the load, the share of the wall time each was on a CPU (``cpu``) and on a CPU or ready
to run but waiting for one (``busy``). A server busy about 1.0 always had a request to work on:
it, not the load, set the rate. Its ``cpu`` below 1.0 then means that other processes took
turns on its core; ``cpu ms/review`` (the server's CPU time per answer) does not depend on
that, and its ratio to the floor is printed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jsonpatch

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import child, floor, loadgen, workload
from kinitiras_py.bench.runner import percentile
from kinitiras_py.bench.webhook import patch_of, review


@dataclass(frozen=True)
class Saturation:
    """One server's saturation figures (medians over rounds; latencies in seconds)."""

    name: str
    policies: int
    matching: int
    rate: float
    """Reviews per second."""
    p50: float
    p99: float
    server_cpu: float
    """The server's time on a CPU / wall time: 1.0 is its one core fully its own."""
    server_busy: float
    """The server's time on a CPU or waiting for one / wall time."""
    load_cpu: float
    """The load generator's time on a CPU / wall time."""
    load_busy: float
    """The load generator's time on a CPU or waiting for one / wall time."""
    cpu_per_review: float
    """The server's CPU seconds per answer: what the rate would be limited by on an idle core,
    and unlike the rate not lowered when other processes take turns on the server's core."""
    rss: int
    """The server's resident memory after its last round, bytes."""
    answered: int
    errors: int
    ratio: float = 0.0
    """``rate`` / the floor's ``rate``."""
    cpu_ratio: float = 0.0
    """``cpu_per_review`` / the floor's."""


@dataclass(frozen=True)
class Target:
    """A server to measure: ``policies`` None is the floor, or with ``hand`` the hand-written
    webhook (:mod:`.handwritten`) doing what that many matching policies do."""

    name: str
    policies: Sequence[Obj] | None
    matching: int
    cel_results: bool = True
    """Whether ours remembers CEL results (:mod:`..engine.evaluation.celmemo`); without, every
    review is evaluated as if each Pod were unlike the last."""
    hand: int | None = None


def targets(total: int, matching: Sequence[int], uncached: bool = True) -> list[Target]:
    """The floor, then ours with each count of ``matching`` policies among ``total``; with
    ``uncached``, ours again for each count with the CEL result cache off, and the hand-written
    webhook for each count (it remembers nothing either)."""
    ours = [Target(f"ours {k}/{total}", workload.some_matching(total, k), k) for k in matching]
    if uncached:
        ours += [dataclasses.replace(t, name=f"{t.name} uncached", cel_results=False) for t in ours]
        ours += [Target(f"hand-written {k}", None, k, hand=k) for k in matching]
    return [Target("floor", None, 0), *ours]


def check(served: child.Served, pod: Obj, matching: int | None) -> None:
    """Fail loudly unless the server labels ``pod`` as it should: ours once per matching policy
    (``matching``), the floor (None) once."""
    answer = asyncio.run(loadgen.once(served.url + "/mutate", review(pod), served.context))
    labels = set(jsonpatch.apply_patch(pod, patch_of(answer))["metadata"]["labels"]) - set(pod["metadata"]["labels"])
    expected = {floor.LABEL} if matching is None else {workload.policy_label(i) for i in range(matching)}
    if labels != expected:
        raise RuntimeError(f"benchmark setup is wrong: the webhook added the labels {sorted(labels)}, "
                           f"expected {sorted(expected)}")


@dataclass(frozen=True)
class _Round:
    load: loadgen.Load
    server: child.Sched
    client: child.Sched


def _measure(served: child.Served, body: bytes, connections: int, seconds: float, limit: int | None) -> _Round:
    request = loadgen.http_request(served.url + "/mutate", body)
    server, client = served.sched(), child.sched()
    load = asyncio.run(loadgen.closed_loop(served.url, request, served.context, connections, seconds,
                                           b'"allowed":true', limit))
    return _Round(load, served.sched() - server, child.sched() - client)


def run(targets_: Sequence[Target], pod: Obj, connections: int = 8, seconds: float = 5.0, rounds: int = 3,
        warmup: float = 1.0, limit: int | None = None, profile_dir: str | None = None) -> list[Saturation]:
    """Measure every target ``rounds`` times for ``seconds`` each (or ``limit`` answers), interleaved;
    with ``profile_dir``, each of our servers is profiled into ``<dir>/ours-<k>-of-<total>.prof``."""
    body = review(pod)
    if profile_dir is not None:
        Path(profile_dir).mkdir(parents=True, exist_ok=True)

    def profile(t: Target) -> str | None:
        if profile_dir is None or t.policies is None:
            return None
        uncached = "" if t.cel_results else "-uncached"
        return str(Path(profile_dir) / f"ours-{t.matching}-of-{len(t.policies)}{uncached}.prof")

    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(child.serving(t.policies, profile=profile(t), cel_results=t.cel_results,
                                                     hand=t.hand)) for t in targets_]
        for served, target in zip(servers, targets_, strict=True):
            check(served, pod, None if target.policies is None and target.hand is None else target.matching)
        loads: list[list[_Round]] = [[] for _ in targets_]
        with child.pinned(child.LOAD_CPU):
            for served in servers:
                _measure(served, body, connections, warmup, limit)
            for _ in range(rounds):
                for i, served in enumerate(servers):
                    loads[i].append(_measure(served, body, connections, seconds, limit))
        rss = [served.rss_bytes() for served in servers]
    results = [_summary(t, runs, r) for t, runs, r in zip(targets_, loads, rss, strict=True)]
    base = next((r for r in results if r.name == "floor"), None)
    if base is None:
        return results
    return [dataclasses.replace(r, ratio=r.rate / base.rate if base.rate else 0.0,
                                cpu_ratio=r.cpu_per_review / base.cpu_per_review if base.cpu_per_review else 0.0)
            for r in results]


def _summary(target: Target, rounds: list[_Round], rss: int) -> Saturation:
    latencies = sorted(x for r in rounds for x in r.load.latencies)

    def share(value: Callable[[_Round], float]) -> float:
        return float(statistics.median(value(r) / r.load.elapsed if r.load.elapsed else 0.0 for r in rounds))

    return Saturation(
        name=target.name, policies=len(target.policies or ()), matching=target.matching,
        rate=statistics.median(r.load.rate for r in rounds),
        p50=statistics.median(latencies) if latencies else 0.0, p99=percentile(latencies, 0.99),
        server_cpu=share(lambda r: r.server.running), server_busy=share(lambda r: r.server.running + r.server.waiting),
        load_cpu=share(lambda r: r.client.running), load_busy=share(lambda r: r.client.running + r.client.waiting),
        cpu_per_review=statistics.median(r.server.running / r.load.answered if r.load.answered else 0.0
                                         for r in rounds),
        rss=rss, answered=sum(r.load.answered for r in rounds), errors=sum(r.load.errors for r in rounds))
