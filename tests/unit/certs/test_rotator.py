"""The rotator with a file store, fake injection and an injected clock: bootstrap, renewal, CA rotation
across replicas, stale replicas, corruption, and the loop."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

import pytest

from kinitiras_py.base.latest import Latest
from kinitiras_py.certs import policy as p
from kinitiras_py.certs.authority import new_ca, new_serving
from kinitiras_py.certs.policy import TLS_CERT, TLS_KEY, Action
from kinitiras_py.certs.rotator import Rotator
from kinitiras_py.certs.storage import FileStore

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
POLICY = p.CertPolicy.for_service("hook", "ns", ips=("127.0.0.1",))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


class Injector:
    """The registration layer's hook: records every bundle; ``ok`` decides the answer."""

    def __init__(self) -> None:
        self.bundles: list[bytes] = []
        self.ok = True

    async def __call__(self, bundle: bytes) -> bool:
        self.bundles.append(bundle)
        return self.ok

    @property
    def last(self) -> bytes:
        return self.bundles[-1]


class Replicas:
    """Rotators sharing one store; the leader is whoever ``leader`` names."""

    def __init__(self, directory: Path) -> None:
        self.store = FileStore(directory)
        self.clock = Clock()
        self.inject = Injector()
        self.leader = "a"

    def make(self, replica: str) -> Rotator:
        return Rotator(self.store, POLICY, replica_id=replica, on_bundle=self.inject,
                       is_leader=lambda: self.leader == replica, clock=self.clock)

    async def data(self) -> dict[str, bytes]:
        snapshot = await self.store.read()
        assert snapshot is not None
        return snapshot.data

    async def annotations(self) -> dict[str, str]:
        snapshot = await self.store.read()
        assert snapshot is not None
        return snapshot.annotations


@pytest.fixture
def replicas(tmp_path: Path) -> Replicas:
    return Replicas(tmp_path / "certs")


def cas(bundle: bytes | None) -> int:
    return len(p.split_pems(bundle or b""))


async def test_bootstrap_creates_publishes_injects_then_serves(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    assert await b.check() is None and await replicas.store.read() is None  # followers never create
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    data = await replicas.data()
    ins = p.inspect(data)
    assert ins.servable and replicas.inject.bundles == [ins.bundle]
    assert a.ready.is_set() and a.fingerprint == ins.leaf_fingerprint
    assert (await a.serving).cert == data[TLS_CERT] and a.bundle.get() == ins.bundle
    assert p.reports(await replicas.annotations(), T0, a.stale_after)[a.report_key].fingerprint == a.fingerprint
    await b.check()
    assert b.fingerprint == a.fingerprint and b.report_key in await replicas.annotations()
    assert [r for _, r, _ in replicas.store.events] == ["CARotationStarted", "CertificateIssued"]


async def test_nothing_is_issued_until_the_bundle_is_injected(replicas: Replicas) -> None:
    a = replicas.make("a")
    replicas.inject.ok = False
    step = await a.check()
    assert step is not None and step.action == Action.INJECT
    assert p.inspect(await replicas.data()).leaf is None and not a.ready.is_set()
    replicas.inject.ok = True
    step = await a.check()
    assert step is not None and step.action == Action.IDLE and a.ready.is_set()


async def test_leaf_renewal_follows_the_clock(replicas: Replicas) -> None:
    a = replicas.make("a")
    await a.check()
    first = a.fingerprint
    leaf = p.inspect(await replicas.data()).leaf
    assert leaf is not None
    replicas.clock.now = leaf.not_valid_after_utc - 31 * DAY
    await a.check()
    assert a.fingerprint == first
    replicas.clock.now = leaf.not_valid_after_utc - 29 * DAY
    step = await a.check()
    assert step is not None and step.action == Action.IDLE and a.fingerprint != first
    assert len(replicas.inject.bundles) == 1  # a leaf renewal does not touch the bundle


async def test_ca_rotation_waits_for_every_replica_then_drops_the_old_ca(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    await a.check()
    await b.check()
    old_bundle, old_leaf = replicas.inject.last, a.fingerprint
    forced = await a.rotate_ca_now()
    assert forced.action == Action.WAIT and forced.behind == (b.report_key,)
    data = await replicas.data()
    ins = p.inspect(data)
    # published old+new, injected it, issued the leaf from the new CA; a serves it already
    assert replicas.inject.bundles == [old_bundle, ins.bundle] and cas(ins.bundle) == 2
    assert ins.leaf_issuer == ins.signer and a.fingerprint == ins.leaf_fingerprint != old_leaf
    assert b.fingerprint == old_leaf
    # b reloads: the issuer of what it now serves is in the injected bundle
    await b.check()
    assert b.fingerprint == ins.leaf_fingerprint
    assert ins.signer is not None and p.fingerprint(ins.signer) in {
        p.fingerprint(c) for c in p.inspect({"ca.crt": replicas.inject.last}).cas}
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    final = await replicas.data()
    assert cas(final["ca.crt"]) == 1 and replicas.inject.last == final["ca.crt"] and len(replicas.inject.bundles) == 3
    await b.check()
    assert b.bundle.get() == final["ca.crt"]


async def test_a_stale_replica_does_not_hold_the_rotation_back(replicas: Replicas) -> None:
    a, b, gone = replicas.make("a"), replicas.make("b"), replicas.make("gone")
    await a.check()
    await b.check()
    await gone.check()
    assert gone.report_key in await replicas.annotations()
    replicas.clock.now = T0 + 2 * dt.timedelta(hours=1)
    await b.check()  # b's heartbeat is due after one check interval: b stays fresh
    forced = await a.rotate_ca_now()
    assert forced.action == Action.WAIT and set(forced.behind) == {b.report_key, gone.report_key}
    replicas.clock.now = T0 + 3 * dt.timedelta(hours=1) + dt.timedelta(minutes=1)  # gone is stale now
    await b.check()
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    assert cas((await replicas.data())["ca.crt"]) == 1
    annotations = await replicas.annotations()
    assert gone.report_key not in annotations and b.report_key in annotations  # stale reports are removed


async def test_a_corrupted_secret_keeps_serving_emits_one_event_and_is_repaired(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    await a.check()
    await b.check()
    served = b.fingerprint
    snapshot = await replicas.store.read()
    assert snapshot is not None
    stranger = new_serving(new_ca(), ["x"])
    await replicas.store.update(snapshot, {TLS_KEY: stranger.key})  # a half-rotated pair: cert/key mismatch
    await b.check()
    await b.check()
    assert b.fingerprint == served and b.events == 1
    assert [(t, r) for t, r, _ in replicas.store.events][-1] == ("Warning", "CertificateInvalid")
    assert "tls.key: does not match tls.crt" in replicas.store.events[-1][2]
    assert b.tls.failures == 0  # refused before it ever reached the TLS context
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    await b.check()
    repaired = p.inspect(await replicas.data())
    assert repaired.servable and b.fingerprint == a.fingerprint == repaired.leaf_fingerprint != served


async def test_garbage_in_the_pair_never_reaches_a_follower(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    await a.check()
    await b.check()
    served = b.fingerprint
    snapshot = await replicas.store.read()
    assert snapshot is not None
    await replicas.store.update(snapshot, {TLS_CERT: b"garbage"})
    await b.check()
    assert b.fingerprint == served and b.events == 1


async def test_forced_rotation_needs_leadership_and_stop_forgets_the_report(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    await a.check()
    await b.check()
    with pytest.raises(RuntimeError, match="not the leader"):
        await b.rotate_leaf_now()
    before = a.fingerprint
    step = await a.rotate_leaf_now()
    assert step.action == Action.IDLE and a.fingerprint != before
    await b.stop()
    assert b.report_key not in await replicas.annotations()


async def test_leadership_moves_and_the_new_leader_reinjects(replicas: Replicas) -> None:
    a, b = replicas.make("a"), replicas.make("b")
    await a.check()
    await b.check()
    replicas.leader = "b"
    assert await a.check() is None
    step = await b.check()
    assert step is not None and step.action == Action.IDLE
    assert replicas.inject.bundles[-1] == replicas.inject.bundles[0] and len(replicas.inject.bundles) == 2


async def test_the_loop_serves_and_follows(replicas: Replicas) -> None:
    a = Rotator(replicas.store, POLICY, replica_id="a", on_bundle=replicas.inject, poll_interval=0.05)
    b = Rotator(replicas.store, POLICY, replica_id="b", is_leader=lambda: False, poll_interval=0.05)
    a.start()
    b.start()
    try:
        async with asyncio.timeout(5):
            await a.ready.wait()
            await b.ready.wait()
            version = b.serving.version
            await a.rotate_leaf_now()
            pair = await b.serving.next(version)
        assert p.inspect({"tls.crt": pair.cert}).leaf_fingerprint == a.fingerprint == b.fingerprint
    finally:
        await a.stop()
        await b.stop()


async def test_latest_box() -> None:
    box: Latest[int] = Latest()
    assert box.get() is None
    waiter = asyncio.ensure_future(box.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    box.set(1)
    assert await waiter == 1 and await box == 1
    box.set(1)
    assert box.version == 1  # an equal value is not a change
    later = asyncio.ensure_future(box.next(box.version))
    await asyncio.sleep(0)
    box.set(2)
    assert await later == 2


async def test_a_new_ca_is_used_only_after_its_bundle_had_time_to_propagate(replicas: Replicas) -> None:
    a = replicas.make("a")
    a.propagation_delay = 0.3
    await a.check()  # bootstrap: no old CA, so no grace is needed
    first_leaf = a.fingerprint
    moments: list[float] = []
    inject = replicas.inject

    async def timed(bundle: bytes) -> bool:
        moments.append(time.monotonic())
        return await inject(bundle)

    a._on_bundle = timed
    started = time.monotonic()
    await a.rotate_ca_now()
    # The bundle with old + new CA went out first; the new CA's leaf was served no sooner than the grace.
    assert cas(replicas.inject.bundles[-2 if cas(replicas.inject.last) == 1 else -1]) == 2
    assert a.fingerprint != first_leaf
    assert moments and time.monotonic() - moments[0] >= 0.3
    assert time.monotonic() - started >= 0.3
