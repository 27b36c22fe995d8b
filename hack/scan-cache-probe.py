"""Does a background scan push out what admission's caches hold? Measured in process.

The scenario of ``bench --scan`` (its Pods and 50 validate policies), without a cluster: a probe
admits the benchmark Pod through an engine made as ``serve`` makes it, once every ``--every``
objects the scan's evaluator scans, out of ``--pods`` Pods on the same event loop; two more such
engines are probed in turn with it, one with nothing between its probes, one with as much
unrelated work (copying the Pods' JSON). Counted around each probe admission only: the engine's
own caches (CEL results, memory of mutations) and the process's shared caches (compiled programs,
parsed paths, quantities, ...), hits and misses, the garbage collections, and the time. A miss
the probe makes only beside the scan is an entry the scan evicted.

    nice -n 19 python3 hack/scan-cache-probe.py --pods 3000 --every 10
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

import orjson

from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Request
from kinitiras_py.bench import scanscale, workload
from kinitiras_py.engine.checking import checker
from kinitiras_py.engine.evaluation import bounds, cel, celext, celreads, celshapes, cost, regex
from kinitiras_py.engine.objects import fieldpath
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan.evaluation import Context, evaluator
from kinitiras_py.scan.plans import plan

SHARED: dict[str, Any] = {
    "cel.compile_program": cel.compile_program, "checker.compile_cel": checker.compile_cel, "celext._q": celext._q,
    "celext.scale": celext.scale, "celshapes.problems": celshapes.problems, "cost._parts": cost._parts,
    "fieldpath.parse_path": fieldpath.parse_path, "regex.compiled": regex.compiled}
"""The process's shared caches (functools.lru_cache) a request may look up."""


def _identity_entries(get: Any) -> int:
    """Entries of a :func:`~kinitiras_py.base.identity.by_identity` cache (its closure's dict)."""
    return next(len(cell.cell_contents) for cell in get.__closure__ if isinstance(cell.cell_contents, dict))


class _Collections:
    """Young and full collections, and the seconds they took, while installed."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._began


COLLECTIONS = _Collections()


def _counts(engine: Engine) -> dict[str, tuple[int, int]]:
    out = {name: (f.cache_info().hits, f.cache_info().misses) for name, f in SHARED.items()}
    out["engine.cel_results"] = (engine.cel_results.hits, engine.cel_results.misses)
    out["engine.mutations"] = (engine.mutations.hits, engine.mutations.misses)
    return out


class Probe:
    """Admissions of the benchmark Pod, each with a new name, and what they hit and missed."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.count = 0
        self.seconds: list[float] = []
        self.delta: dict[str, list[int]] = {}
        self.collections = [0, 0, 0]
        """Collections of each generation during its admissions."""
        self.collecting = 0.0
        self.tries = (0, 0)
        """Entries of the process's by-identity caches (celreads, bounds) once its phase was over."""

    async def admit(self) -> None:
        self.count += 1
        obj = workload.pod()
        obj["metadata"]["name"] = f"probe-{self.count}"
        before = _counts(self.engine)
        collections, collecting = list(COLLECTIONS.counts), COLLECTIONS.seconds
        began = time.perf_counter()
        await self.engine.admit(Request("CREATE", obj, namespace=workload.NAMESPACE))
        self.seconds.append(time.perf_counter() - began)
        self.collections = [n + now - then for n, now, then in zip(self.collections, COLLECTIONS.counts, collections,
                                                                     strict=True)]
        self.collecting += COLLECTIONS.seconds - collecting
        for name, (hits, misses) in _counts(self.engine).items():
            total = self.delta.setdefault(name, [0, 0])
            total[0] += hits - before[name][0]
            total[1] += misses - before[name][1]


async def _run(pods: int, every: int, policies: int) -> None:
    compiled = [compile_policy(doc) for doc in scanscale.policies(policies)]
    objects = scanscale.pods(pods)
    scan = evaluator({p.identity: plan(p) for p in compiled}, Context(StaticStore()))

    async def warmed() -> Probe:
        made = Probe(Engine(compiled, store=StaticStore()))  # serve's defaults for the caches
        for _ in range(20):
            await made.admit()
        made.delta.clear()
        made.seconds.clear()
        made.collections, made.collecting = [0, 0, 0], 0.0
        return made

    def tries() -> tuple[int, int]:
        return _identity_entries(celreads._trie), _identity_entries(bounds._trie)

    alone, beside, other = await warmed(), await warmed(), await warmed()
    # The three in turn, a probe of each per ``every`` Pods, so a busy moment of the machine falls
    # on all three alike: no work between probes; as much unrelated work (copying the Pods' JSON);
    # the scan of the Pods.
    for at in range(0, len(objects), every):
        batch = objects[at:at + every]
        await alone.admit()
        for obj in batch:
            for _ in range(12):
                orjson.loads(orjson.dumps(obj))
        await other.admit()
        for obj in batch:
            await scan.results(obj)
        await beside.admit()
    for probe in (alone, other, beside):
        probe.tries = tries()
    for name, probe in (("without the scan", alone), ("beside other work", other), ("beside the scan", beside)):
        print(f"{name}: {len(probe.seconds)} probes, p50 {statistics.median(probe.seconds) * 1000:.3f} ms; "
              f"collections during them (gen 0, 1, 2) {probe.collections}, {probe.collecting * 1000:.2f} ms; "
              f"by-identity entries after (celreads, bounds) {probe.tries}")
        for cache, (hits, misses) in sorted(probe.delta.items()):
            if hits or misses:
                print(f"  {cache:<22} hits {hits:>7} misses {misses:>6}")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--every", type=int, default=10, help="scanned Pods between two probes")
    parser.add_argument("--policies", type=int, default=50)
    args = parser.parse_args(argv)
    gc.callbacks.append(COLLECTIONS)
    asyncio.run(_run(args.pods, args.every, args.policies))


if __name__ == "__main__":
    main()
