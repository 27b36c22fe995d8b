"""The scan settles the garbage collector (:mod:`kinitiras_py.base.collector`): after a first list
and after every full pass, what they built leaves the full collections' walk."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry

from kinitiras_py.base import collector
from kinitiras_py.bench.scanscale import Preloaded
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from tests.scanfakes import MemorySink
from tests.unit.base.test_collector import managed
from tests.unit.registration.test_rules import FakeCatalog
from tests.unit.scan.test_scanner import owner_policy, pod, policy, until


def scanner_over(count: int) -> Scanner:
    existing = [pod(f"p{i:03d}", {"owner": "a"}) for i in range(count)]
    return Scanner(None, MemorySink(), Context(StaticStore()), FakeCatalog(), cpu_share=1.0, period=0.05,
                   metrics=ScanMetrics(CollectorRegistry()),
                   make_informer=lambda client, resource: Preloaded(client, resource, existing))


@pytest.mark.usefixtures(managed.__name__)
async def test_a_first_list_and_each_full_pass_settle_what_they_built(monkeypatch: pytest.MonkeyPatch) -> None:
    settled: list[str] = []
    settle = collector.settle
    monkeypatch.setattr(collector, "settle", lambda reason: settled.append(reason) or settle(reason))
    scanner = scanner_over(50)
    try:
        await policy(scanner, owner_policy())
        await scanner.start()
        await until(lambda: scanner.passes >= 2, seconds=30)
        walked = {id(obj) for obj in gc.get_objects()}
        published = list(scanner._published.values())
        assert len(published) == 50 and not walked & {id(one) for one in published}
    finally:
        await scanner.stop()
    assert settled[:3] == ["list 1 of pods", "scan pass 1", "scan pass 2"]


async def test_a_scan_in_a_process_that_does_not_manage_the_collector_freezes_nothing() -> None:
    scanner = scanner_over(20)
    try:
        await policy(scanner, owner_policy())
        await scanner.start()
        await until(lambda: scanner.passes >= 1, seconds=30)
    finally:
        await scanner.stop()
    assert gc.get_freeze_count() == 0
