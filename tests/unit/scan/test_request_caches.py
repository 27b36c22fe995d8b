"""A background scan beside the webhook's engine: it keeps nothing in any cache of results, so it
cannot push out what admission requests find there (hack/scan-cache-probe.py measures it at scale)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Request
from kinitiras_py.bench import scanscale, workload
from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan.evaluation import Context, evaluator
from kinitiras_py.scan.plans import plan


def _probe(count: int) -> Request:
    obj = workload.pod()
    obj["metadata"]["name"] = f"probe-{count}"
    return Request("CREATE", obj, namespace=workload.NAMESPACE)


def test_a_scan_beside_admission_keeps_no_results_and_leaves_the_webhooks_caches_as_they_were(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = [compile_policy(doc) for doc in scanscale.policies(5)]
    kept: list[celmemo.Results] = []
    put = celmemo.Results.put

    def counting(self: celmemo.Results, *args: Any) -> None:
        kept.append(self)
        put(self, *args)

    monkeypatch.setattr(celmemo.Results, "put", counting)

    async def run(scanned: int) -> tuple[Engine, list[tuple[int, int]], list[celmemo.Results]]:
        engine = Engine(compiled, store=StaticStore())  # serve's caches
        scan = evaluator({p.identity: plan(p) for p in compiled}, Context(StaticStore()))
        for count in range(3):
            await engine.admit(_probe(count))
        counts = []
        scans = []
        for count, obj in enumerate(scanscale.pods(scanned * 5)):
            kept.clear()
            results = await scan.results(obj)
            assert results  # every Pod is scanned by every policy
            scans.extend(kept)
            if count % 5 == 4:
                before = (engine.cel_results.hits, engine.cel_results.misses)
                await engine.admit(_probe(100 + count))
                counts.append((engine.cel_results.hits - before[0], engine.cel_results.misses - before[1]))
        return engine, counts, scans

    engine, beside, scans = asyncio.run(run(12))
    assert not scans, "the scan kept results in a cache"
    # Each probe finds what the three before it found (its name is new, everything else is not).
    assert beside and len(set(beside)) == 1 and beside[0][0] > 0
    assert engine.cel_results.size > 0
