#!/usr/bin/env python3
"""CPU time per review of Pods unlike any before, in process: the policies of `bench --floor`
(1,000, of which --matching match), the webhook's memories off, each Pod its own name and limits
(--same: the benchmark's one Pod every time), answered through the /mutate handler (decode,
pipeline, encode; no HTTP). With --profile FILE, under cProfile (its own overhead included).

    python3 hack/profile-new-pods.py --matching 20 --pods 300
    python3 hack/profile-new-pods.py --matching 20 --profile /tmp/new-pods.prof
    python3 hack/profile-new-pods.py --matching 20 --cel-time   # and the share inside the programs
    py-spy record -r 500 -f raw -o /tmp/new-pods.txt -- python3 hack/profile-new-pods.py --pods 600

Run it from the worktree root, so that this copy of the package is the one imported.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kinitiras_py.admission.engine import Engine
from kinitiras_py.base import logs
from kinitiras_py.bench import workload
from kinitiras_py.bench.webhook import review
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics

WARM_UP = 50


def reviews(count: int, same: bool) -> list[bytes]:
    """``count`` AdmissionReviews of the benchmark Pod, each with its own name and limits unless ``same``."""
    out = []
    for i in range(count):
        pod = copy.deepcopy(workload.server_pod())
        if not same:
            pod["metadata"]["name"] = f"web-{i}"
            for j, container in enumerate(pod["spec"]["containers"]):
                container["resources"] = {"limits": {"cpu": f"{100 + i + j}m", "memory": f"{64 + 3 * i + j}Mi"},
                                          "requests": {"cpu": f"{50 + i}m", "memory": f"{32 + i}Mi"}}
        out.append(review(pod))
    return out


class _Timed:
    """A compiled expression whose evaluations add their wall time to ``spent`` (one process, no
    waiting: the time the stored program runs in cel-cpp, the functions it calls included)."""

    spent = 0.0

    def __init__(self, expression: object) -> None:
        self._expression = expression

    def eval(self, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return self._expression.eval(**kwargs)  # type: ignore[attr-defined]
        finally:
            _Timed.spent += time.perf_counter() - started

    def __getattr__(self, name: str) -> object:
        return getattr(self._expression, name)


def time_programs() -> None:
    """Time the evaluations of every compiled program from now on."""
    for program in [o for o in gc.get_objects() if isinstance(o, cel.Program)]:
        object.__setattr__(program, "_expression", _Timed(program._expression))


async def run(handlers: Handlers, bodies: list[bytes], profile: str | None) -> float:
    """CPU seconds per review over ``bodies`` after a warm-up (profiled into ``profile``)."""
    for body in bodies[:WARM_UP]:
        await handlers.answer("mutate", body)
    profiler = cProfile.Profile()
    started = time.process_time()
    _Timed.spent = 0.0
    if profile:
        profiler.enable()
    for body in bodies[WARM_UP:]:
        _, code = await handlers.answer("mutate", body)
        if code != 200:
            raise SystemExit(f"the webhook answered {code}")
    if profile:
        profiler.disable()
        profiler.dump_stats(profile)
    return (time.process_time() - started) / (len(bodies) - WARM_UP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matching", type=int, default=20)
    parser.add_argument("--total", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--same", action="store_true", help="the benchmark's one Pod every time")
    parser.add_argument("--profile", help="write cProfile statistics here and print the top functions")
    parser.add_argument("--cel-time", action="store_true",
                        help="also report the time spent inside the programs' evaluations (cel-cpp and the "
                             "functions it calls)")
    args = parser.parse_args()
    logs.configure("info", "json")
    engine = Engine(workload.some_matching(args.total, args.matching), cel_results_bytes=0, mutation_results_bytes=0)
    handlers = Handlers(engine, Metrics())
    if args.cel_time:
        time_programs()
    per_review = asyncio.run(run(handlers, reviews(args.pods + WARM_UP, args.same), args.profile))
    print(f"{args.matching} of {args.total} matching, {args.pods} {'same' if args.same else 'distinct'} Pods: "
          f"{per_review * 1e3:.3f} ms of CPU per review")
    if args.cel_time:
        inside = _Timed.spent / args.pods
        print(f"  of which inside the programs' evaluations: {inside * 1e3:.3f} ms ({inside / per_review:.0%})")
    if args.profile:
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
