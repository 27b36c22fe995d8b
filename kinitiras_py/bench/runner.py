"""Compile a policy set once, then time ``Pipeline.admit`` on the same Pod request by request."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.offline.apply import build_pipeline, compile_all


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
    rank = max(1, round(fraction * len(sorted_values) + 0.5))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def prepare(policies: Sequence[Obj]) -> tuple[Pipeline, float]:
    """The pipeline over ``policies`` and the seconds it took to compile them."""
    start = time.perf_counter()
    pipeline = build_pipeline(compile_all(policies))
    return pipeline, time.perf_counter() - start


async def _time_requests(pipeline: Pipeline, request: Request, count: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await pipeline.admit(request)
    gc.collect()
    durations = []
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        await pipeline.admit(request)
        durations.append(clock() - start)
    return durations


def check(pipeline: Pipeline, request: Request, matching: int) -> None:
    """Fail loudly unless the request is allowed and every matching policy changed the Pod."""
    decision = asyncio.run(pipeline.admit(request))
    labels = {k for k in decision.object["metadata"].get("labels", {}) if k.startswith("bench.example.com/")}
    if not decision.allowed or len(labels) != matching:
        raise RuntimeError(f"benchmark setup is wrong: allowed={decision.allowed} ({decision.message}), "
                           f"{len(labels)} of {matching} matching policies applied")


def run(policies: Sequence[Obj], pod: Obj, matching: int, requests: int, warmup: int) -> Stats:
    """Compile ``policies``, check the setup, then time ``requests`` CREATE admissions of ``pod``."""
    pipeline, compile_seconds = prepare(policies)
    request = Request(operation="CREATE", object=pod, namespace=str(pod["metadata"].get("namespace") or ""),
                      user_info={"username": "bench"})
    check(pipeline, request, matching)
    durations = asyncio.run(_time_requests(pipeline, request, requests, warmup))
    ordered = sorted(durations)
    return Stats(policies=len(policies), matching=matching, requests=requests, compile_seconds=compile_seconds,
                 median=statistics.median(ordered), p90=percentile(ordered, 0.90), p99=percentile(ordered, 0.99),
                 mean=statistics.fmean(ordered), total=sum(ordered))
