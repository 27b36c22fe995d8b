"""Lease leader election against the real API server: one leader, conflicts, release, crash, takeover."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from kinitiras_py.cluster.client import Api
from kinitiras_py.cluster.leader import LeaderElector

pytestmark = pytest.mark.cluster

LEASE, RENEW, RETRY = 3.0, 2.0, 0.3


def elector(api: Any, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(api, namespace, "webhook-leader", identity, lease_duration=LEASE, renew_deadline=RENEW,
                         retry_period=RETRY)


async def lease(api: Any, namespace: str) -> dict[str, Any]:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/webhook-leader"
    return await Api.of(api).request("GET", path)


async def first_leader(electors: list[LeaderElector], within: float) -> LeaderElector:
    async with asyncio.timeout(within):
        while True:
            leaders = [e for e in electors if e.is_leader]
            if leaders:
                return leaders[0]
            await asyncio.sleep(0.02)


async def stop_all(electors: list[LeaderElector]) -> None:
    for e in electors:
        await e.stop()


async def test_one_of_two_leads_and_keeps_renewing(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, "one"), elector(api, namespace, "two")]
    changes: list[tuple[str, bool]] = []
    for e in electors:
        def record(leading: bool, e: LeaderElector = e) -> None:
            changes.append((e.identity, leading))

        e.on_change(record)
        e.start()
    try:
        leader = await first_leader(electors, 5)
        await asyncio.sleep(LEASE + 1)  # longer than a lease: the leader renewed, nobody took over
        assert [e.is_leader for e in electors].count(True) == 1 and leader.is_leader
        spec = (await lease(api, namespace))["spec"]
        assert spec["holderIdentity"] == leader.identity and spec["leaseDurationSeconds"] == 3
        assert changes == [(leader.identity, True)]
        follower = next(e for e in electors if e is not leader)
        assert follower.holder == leader.identity
    finally:
        await stop_all(electors)
    assert changes[-1] == (leader.identity, False)


async def test_three_candidates_racing_elect_one(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, f"c{i}") for i in range(3)]
    for e in electors:
        e.start()
    try:
        await first_leader(electors, 5)
        await asyncio.sleep(1)
        assert [e.is_leader for e in electors].count(True) == 1
    finally:
        await stop_all(electors)


class Interfering:
    """A transport that lets ``before_put`` run just before each PUT (to stage a race)."""

    def __init__(self, inner: Any, before_put: Callable[[], Awaitable[None]]) -> None:
        self.inner, self.before_put = Api.of(inner), before_put

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "PUT":
            await self.before_put()
        return await self.inner.request(method, path, **kwargs)


async def test_a_conflicting_write_is_handled(api: Any, namespace: str) -> None:
    first = elector(api, namespace, "first")
    first.start()
    await first_leader([first], 5)
    await first.stop()  # released: the lease is free
    raced = False

    async def intruder_writes_first() -> None:
        nonlocal raced
        if not raced:
            raced = True
            current = await lease(api, namespace)
            current["spec"]["holderIdentity"] = "intruder"
            current["spec"]["leaseDurationSeconds"] = 3
            current["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            await Api.of(api).request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/"
                                      "webhook-leader", body=current)

    second = LeaderElector(Interfering(api, intruder_writes_first), namespace, "webhook-leader", "second",
                           lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY)
    second.start()
    try:
        await asyncio.sleep(1)
        assert second.conflicts == 1 and not second.is_leader and second.holder == "intruder"
        began = time.monotonic()
        await first_leader([second], LEASE + 2)  # the intruder never renews: its lease expires
        assert time.monotonic() - began > LEASE - 1 - 0.5  # LEASE after its write, which was 1 s ago
    finally:
        await second.stop()


async def test_release_hands_over_at_the_next_retry(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, "one"), elector(api, namespace, "two")]
    for e in electors:
        e.start()
    try:
        leader = await first_leader(electors, 5)
        follower = next(e for e in electors if e is not leader)
        began = time.monotonic()
        await leader.stop()
        assert not leader.is_leader
        await first_leader([follower], 2 * RETRY + 1)
        assert time.monotonic() - began < 2 * RETRY + 1
        assert (await lease(api, namespace))["spec"]["leaseTransitions"] >= 1
    finally:
        await stop_all(electors)


async def test_a_crashed_leader_is_replaced_within_the_lease_duration(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, "one"), elector(api, namespace, "two")]
    for e in electors:
        e.start()
    try:
        leader = await first_leader(electors, 5)
        follower = next(e for e in electors if e is not leader)
        await asyncio.sleep(1)
        began = time.monotonic()
        await leader.stop(release=False)  # no release: like a killed process
        assert (await lease(api, namespace))["spec"]["holderIdentity"] == leader.identity
        await first_leader([follower], LEASE + 2 * RETRY + 1)
        took = time.monotonic() - began
        # The lease runs out LEASE after the last renewal, which came at most RETRY before the stop;
        # the follower looks again right then (plus request time).
        assert LEASE - RETRY - 0.2 < took <= LEASE + 0.5, took
    finally:
        await stop_all(electors)


async def test_the_leader_steps_down_when_someone_else_holds_the_lease(api: Any, namespace: str) -> None:
    leader = elector(api, namespace, "one")
    lost = asyncio.Event()
    leader.on_change(lambda leading: None if leading else lost.set())
    leader.start()
    try:
        await first_leader([leader], 5)
        current = await lease(api, namespace)
        current["spec"]["holderIdentity"] = "usurper"
        await Api.of(api).request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/webhook-leader",
                                  body=current)
        async with asyncio.timeout(2 * RETRY + 1):
            await lost.wait()
        assert not leader.is_leader and leader.holder == "usurper"
    finally:
        await leader.stop()
