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

LEASE, RENEW, RETRY = 8.0, 5.0, 0.5
"""Short enough for quick tests, long enough that a busy machine (API calls taking a second or two)
neither loses a live lease nor blurs a release (the next retry) into an expiry (LEASE)."""
WAIT = 30.0
"""Deadline for what should happen within a retry or two: generous, since it only bounds a failure."""


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
        leader = await first_leader(electors, WAIT)
        await asyncio.sleep(LEASE + 1)  # longer than a lease: the leader renewed, nobody took over
        assert [e.is_leader for e in electors].count(True) == 1 and leader.is_leader
        spec = (await lease(api, namespace))["spec"]
        assert spec["holderIdentity"] == leader.identity and spec["leaseDurationSeconds"] == int(LEASE)
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
        await first_leader(electors, WAIT)
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
    await first_leader([first], WAIT)
    await first.stop()  # released: the lease is free
    raced = False
    wrote_at = 0.0

    async def intruder_writes_first() -> None:
        nonlocal raced, wrote_at
        if not raced:
            raced = True
            current = await lease(api, namespace)
            current["spec"]["holderIdentity"] = "intruder"
            current["spec"]["leaseDurationSeconds"] = int(LEASE)
            current["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            await Api.of(api).request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/"
                                      "webhook-leader", body=current)
            wrote_at = time.monotonic()

    second = LeaderElector(Interfering(api, intruder_writes_first), namespace, "webhook-leader", "second",
                           lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY)
    second.start()
    try:
        async with asyncio.timeout(WAIT):
            while second.holder != "intruder":
                await asyncio.sleep(0.02)
        assert second.conflicts == 1 and not second.is_leader
        await first_leader([second], LEASE + WAIT)  # the intruder never renews: its lease expires
        # LEASE after its write, give or take the clock tolerance of a second
        assert time.monotonic() - wrote_at > LEASE - 1 - 0.5
    finally:
        await second.stop()


async def test_release_hands_over_at_the_next_retry(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, "one"), elector(api, namespace, "two")]
    for e in electors:
        e.start()
    try:
        leader = await first_leader(electors, WAIT)
        follower = next(e for e in electors if e is not leader)
        began = time.monotonic()
        await leader.stop()
        assert not leader.is_leader
        await first_leader([follower], WAIT)
        # at the follower's next retry (RETRY); waiting for the lease to run out would take LEASE - RETRY
        assert time.monotonic() - began < LEASE - 2
        assert (await lease(api, namespace))["spec"]["leaseTransitions"] >= 1
    finally:
        await stop_all(electors)


async def test_a_crashed_leader_is_replaced_within_the_lease_duration(api: Any, namespace: str) -> None:
    electors = [elector(api, namespace, "one"), elector(api, namespace, "two")]
    for e in electors:
        e.start()
    try:
        leader = await first_leader(electors, WAIT)
        follower = next(e for e in electors if e is not leader)
        await asyncio.sleep(1)
        began = time.monotonic()
        await leader.stop(release=False)  # no release: like a killed process
        assert (await lease(api, namespace))["spec"]["holderIdentity"] == leader.identity
        await first_leader([follower], LEASE + WAIT)
        took = time.monotonic() - began
        # The lease runs out LEASE after the last renewal, which came at most RETRY before the stop;
        # the follower looks again right then, plus request time (seconds on a busy machine: that
        # it counts from the renewal, not from when it saw it, the unit tests show with a fake clock).
        assert LEASE - RETRY - 0.2 < took <= LEASE + 3, took
    finally:
        await stop_all(electors)


async def test_the_leader_steps_down_when_someone_else_holds_the_lease(api: Any, namespace: str) -> None:
    leader = elector(api, namespace, "one")
    lost = asyncio.Event()
    leader.on_change(lambda leading: None if leading else lost.set())
    leader.start()
    try:
        await first_leader([leader], WAIT)
        current = await lease(api, namespace)
        current["spec"]["holderIdentity"] = "usurper"
        await Api.of(api).request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/webhook-leader",
                                  body=current)
        async with asyncio.timeout(WAIT):
            await lost.wait()
        assert not leader.is_leader and leader.holder == "usurper"
    finally:
        await leader.stop()
