"""Compile a policy set once into an engine, then time ``Engine.admit`` on the same Pod request by request."""

from __future__ import annotations

import asyncio
import gc
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Request
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.matching.selection import PolicyIndex


@dataclass(frozen=True)
class Stats:
    """Timings of one run; durations in seconds."""

    policies: int
    matching: int
    requests: int
    compile_seconds: float
    median: float
    p90: float
    p99: float
    mean: float
    total: float

    @property
    def ops_per_second(self) -> float:
        """Requests per second, one after the other on one core."""
        return self.requests / self.total if self.total else 0.0


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values) - 1e-9))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def prepare(policies: Sequence[Obj]) -> tuple[Engine, float]:
    """The engine over ``policies`` and the seconds it took to compile them."""
    start = time.perf_counter()
    engine = Engine(policies)
    return engine, time.perf_counter() - start


async def _time_requests(engine: Engine, request: Request, count: int) -> list[float]:
    durations = []
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        await engine.admit(request)
        durations.append(clock() - start)
    return durations


def _request(pod: Obj) -> Request:
    return Request(operation="CREATE", object=pod, namespace=str(pod["metadata"].get("namespace") or ""),
                   user_info={"username": "bench"})


@dataclass(frozen=True)
class Setup:
    """One policy set to time: the policies and how many of them match the Pod.

    ``update``: time an UPDATE of the Pod as the policies stored it (their rules find nothing to
    do) instead of its CREATE.
    """

    policies: Sequence[Obj]
    matching: int
    update: bool = False


def _admitted(engine: Engine, request: Request) -> tuple[Obj, list[Obj]]:
    decision = engine.admit_sync(request)
    if not decision.allowed:
        raise RuntimeError(f"benchmark setup is wrong: the request was denied ({decision.message})")
    return decision.object, decision.patch


def _matching(request: Request, *indexes: PolicyIndex) -> set[str]:
    """The policies of ``indexes`` that ``request`` reaches."""
    return {p.ref for index in indexes for p, _ in index.matching(request.object, request.operation)}


def setup_request(engine: Engine, setup: Setup, pod: Obj) -> Request:
    """The request to time, checked once: fails loudly unless the policies do what the run says."""
    request = _request(pod)
    stored, _ = _admitted(engine, request)
    overriding = _matching(request, engine.overrides)
    labels = [k for k in stored["metadata"].get("labels", {}) if k.startswith("bench.example.com/")]
    if len(labels) != len(overriding):
        raise RuntimeError(f"benchmark setup is wrong: {len(labels)} of {len(overriding)} override policies applied")
    if setup.update:
        request = Request(operation="UPDATE", object=stored, old_object=stored, namespace=request.namespace,
                          user_info=request.user_info)
        if _admitted(engine, request)[1]:
            raise RuntimeError("benchmark setup is wrong: updating the stored Pod changes it again")
    matched = _matching(request, engine.overrides, engine.validations)
    if len(matched) != setup.matching:
        raise RuntimeError(f"benchmark setup is wrong: {len(matched)} of {setup.matching} policies match the Pod")
    return request


def _stats(setup: Setup, compile_seconds: float, durations: list[float]) -> Stats:
    ordered = sorted(durations)
    return Stats(policies=len(setup.policies), matching=setup.matching, requests=len(ordered),
                 compile_seconds=compile_seconds, median=statistics.median(ordered),
                 p90=percentile(ordered, 0.90), p99=percentile(ordered, 0.99), mean=statistics.fmean(ordered),
                 total=sum(ordered))


def run(setups: Sequence[Setup], pod: Obj, requests: int, warmup: int, rounds: int = 10) -> list[Stats]:
    """Time ``requests`` admissions of ``pod`` for each setup (its CREATE, or see :class:`Setup`).

    Every setup is compiled and checked first; then the timed requests are taken in ``rounds``
    interleaved batches (setup A, B, C, A, B, C, ...), so that drift in machine load or CPU
    clock affects all setups alike instead of whichever happened to run last.
    """
    prepared = []
    for setup in setups:
        engine, seconds = prepare(setup.policies)
        prepared.append((engine, seconds, setup_request(engine, setup, pod)))

    async def timed() -> list[list[float]]:
        for engine, _, request in prepared:
            await _time_requests(engine, request, warmup)
        gc.collect()
        durations: list[list[float]] = [[] for _ in prepared]
        rounds_ = max(1, min(rounds, requests))
        for r in range(rounds_):
            batch = requests // rounds_ + (1 if r < requests % rounds_ else 0)
            for i, (engine, _, request) in enumerate(prepared):
                durations[i] += await _time_requests(engine, request, batch)
        return durations

    results = asyncio.run(timed())
    return [_stats(setup, seconds, durations)
            for setup, (_, seconds, _), durations in zip(setups, prepared, results, strict=True)]
