"""The scan's long loops give the event loop turns (admission is served between them)."""

from __future__ import annotations

import asyncio
import collections

import pytest
from prometheus_client import CollectorRegistry

from kinitiras_py.base import pacing
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.bench.scanscale import Preloaded
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.feed import Key
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from tests.scanfakes import MemorySink
from tests.unit.registration.test_rules import FakeCatalog
from tests.unit.scan.test_scanner import owner_policy, pod, policy, until


async def test_a_slicer_yields_once_its_slice_is_used_and_starts_a_new_one() -> None:
    now = [0.0]
    slicer = Slicer(0.001, clock=lambda: now[0])
    await slicer.turn()
    now[0] = 0.0009
    await slicer.turn()
    assert slicer.yields == 0
    now[0] = 0.001
    await slicer.turn()
    assert slicer.yields == 1
    now[0] = 0.0015  # half of the new slice
    await slicer.turn()
    assert slicer.yields == 1
    now[0] = 0.0021
    await slicer.turn()
    assert slicer.yields == 2


async def test_a_slicer_gives_other_tasks_a_turn() -> None:
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    task = asyncio.get_running_loop().create_task(other())
    await Slicer(0.0).turn()
    assert ran == ["other"]
    await task


async def test_a_first_list_and_its_pass_are_queued_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every object queued is followed by a turn of the event loop (a slice of 0 s), so a ticker
    task runs between any two objects one task queues: without slicing, the first list's
    announcement and each full pass queue all their objects in one turn."""
    monkeypatch.setattr(pacing, "SLICE", 0.0)
    existing = [pod(f"p{i:04d}", {"owner": "a"}) for i in range(400)]
    sink = MemorySink()
    scanner = Scanner(None, sink, Context(StaticStore()), FakeCatalog(), cpu_share=1.0, period=0.05,
                      metrics=ScanMetrics(CollectorRegistry()),
                      make_informer=lambda client, resource: Preloaded(client, resource, existing))
    ticks = 0
    queued_at: collections.Counter[int] = collections.Counter()
    enqueue = scanner._enqueue

    def noting(key: Key) -> None:
        queued_at[ticks] += 1
        enqueue(key)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    monkeypatch.setattr(scanner, "_enqueue", noting)
    ticking = asyncio.get_running_loop().create_task(ticker())
    try:
        await policy(scanner, owner_policy())
        await scanner.start()
        await until(lambda: scanner.passes >= 2, seconds=30)
    finally:
        ticking.cancel()
        await scanner.stop()
    # Announced, then queued by the second pass at least.
    assert sum(queued_at.values()) >= 2 * len(existing)
    # At most one object per queueing task (the announcement, the pass) between two ticks.
    assert max(queued_at.values()) <= 2
    assert len(sink.reports) == len(existing)
