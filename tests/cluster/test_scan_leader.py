"""Two replicas' scanners behind one Lease against the real API server: only the leader scans and
writes; when it crashes, the other takes the Lease over and writes every object's results again."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.cluster.store import InformerStore
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.scanner import Scanner
from tests.cluster.test_informers import eventually
from tests.cluster.test_leader import WAIT, elector, first_leader, stop_all
from tests.cluster.test_scan_live import create_pod, policy
from tests.conftest import Cluster
from tests.scanfakes import MemorySink

pytestmark = pytest.mark.cluster


async def test_only_the_leader_scans_and_a_successor_writes_everything_again(
        cluster: Cluster, api: Any, namespace: str) -> None:
    name = f"scan-lead-{uuid.uuid4().hex[:6]}"
    await create_pod(cluster, "bad-a", namespace)
    store = InformerStore(api)
    sinks = {"one": MemorySink(), "two": MemorySink()}
    scanners = {who: Scanner(api, sink, Context(store), store.discovery, period=60.0, cpu_share=1.0)
                for who, sink in sinks.items()}

    async def changed(kind: str, ns: str | None, policy_name: str, compiled: CompiledPolicy | None,
                      _error: str | None) -> None:
        for scanner in scanners.values():
            await scanner.on_policy(kind, ns, policy_name, compiled)

    watch = PolicyWatch(api, on_change=changed)
    watch.start()
    electors = {who: elector(api, namespace, who) for who in scanners}
    try:
        await watch.synced.wait()
        await cluster.kubectl_ok("apply", "-f", "-", input=policy(name, namespace))
        for who, one in electors.items():
            one.on_change(scanners[who].on_leading)
            one.start()
        leader = await first_leader(list(electors.values()), WAIT)
        follower = next(who for who in electors if who != leader.identity)

        def fails(who: str) -> bool:
            return sinks[who].results_of("bad-a").get((name, 0)) == "fail"

        await eventually(lambda: fails(leader.identity), WAIT)
        assert sinks[follower].calls == [] and not scanners[follower].feed.informers

        await leader.stop(release=False)  # a crash: the Lease is not released, the follower waits it out
        written = len(sinks[leader.identity].calls)
        assert not scanners[leader.identity].running
        await eventually(lambda: fails(follower), WAIT)
        assert electors[follower].is_leader
        await asyncio.sleep(1.0)
        assert len(sinks[leader.identity].calls) == written
    finally:
        await stop_all(list(electors.values()))
        for scanner in scanners.values():
            await scanner.stop()
        await watch.stop()
        await store.close()
        cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
