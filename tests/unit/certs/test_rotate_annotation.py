"""Operator-triggered rotation: the leader honours ``kinitiras.kcloudlabs.io/rotate`` = ``leaf`` | ``ca`` on
the stored Secret at its next check and removes it in the write that performs the step."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from kinitiras_py.certs import policy as p
from kinitiras_py.certs.policy import CA_CERT, Action
from kinitiras_py.certs.rotator import ROTATE_ANNOTATION, Rotator
from kinitiras_py.certs.storage import FileStore, Snapshot

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
POLICY = p.CertPolicy.for_service("hook", "ns", ips=("127.0.0.1",))


class Injector:
    """The registration layer's hook: records every bundle; ``ok`` decides the answer."""

    def __init__(self) -> None:
        self.bundles: list[bytes] = []
        self.ok = True

    async def __call__(self, bundle: bytes) -> bool:
        self.bundles.append(bundle)
        return self.ok


class CountingStore(FileStore):
    """A FileStore that records every data write with the annotation changes it carried."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.writes: list[dict[str, str | None]] = []

    async def update(self, snapshot: Snapshot, data, annotations=None) -> Snapshot:  # type: ignore[no-untyped-def]
        self.writes.append(dict(annotations or {}))
        return await super().update(snapshot, data, annotations)


class Setup:
    def __init__(self, directory: Path) -> None:
        self.store = CountingStore(directory)
        self.inject = Injector()
        self.leader = "a"
        self.now = T0

    def make(self, replica: str, poll_interval: float = 10.0) -> Rotator:
        return Rotator(self.store, POLICY, replica_id=replica, on_bundle=self.inject,
                       is_leader=lambda: self.leader == replica, clock=lambda: self.now, poll_interval=poll_interval)

    async def snapshot(self) -> Snapshot:
        snapshot = await self.store.read()
        assert snapshot is not None
        return snapshot

    async def request(self, value: str) -> None:
        await self.store.annotate({ROTATE_ANNOTATION: value})

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.store.events]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path / "certs")


def cas(bundle: bytes) -> int:
    return len(p.split_pems(bundle))


async def test_leaf_request_issues_a_new_leaf_and_is_removed_in_the_same_write(setup: Setup) -> None:
    a = setup.make("a")
    await a.check()
    before, bundle = a.fingerprint, (await setup.snapshot()).data[CA_CERT]
    await setup.request("leaf")
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    after = await setup.snapshot()
    assert ROTATE_ANNOTATION not in after.annotations
    assert a.fingerprint != before and a.fingerprint == p.inspect(after.data).leaf_fingerprint
    assert after.data[CA_CERT] == bundle and len(setup.inject.bundles) == 1  # the CA is untouched
    assert setup.store.writes[-1].get(ROTATE_ANNOTATION, "absent") is None  # removed by the leaf write
    assert setup.reasons()[-1] == "CertificateIssued"
    # honoured once: the next check changes nothing
    again = a.fingerprint
    await a.check()
    assert a.fingerprint == again


async def test_ca_request_rotates_the_ca_across_replicas(setup: Setup) -> None:
    a, b = setup.make("a"), setup.make("b")
    await a.check()
    await b.check()
    old_leaf, old_bundle = a.fingerprint, (await setup.snapshot()).data[CA_CERT]
    writes = len(setup.store.writes)
    await setup.request("CA ")  # case and blanks do not matter
    step = await a.check()
    assert step is not None and step.action == Action.WAIT and step.behind == (b.report_key,)
    mid = await setup.snapshot()
    assert ROTATE_ANNOTATION not in mid.annotations
    assert cas(mid.data[CA_CERT]) == 2 and a.fingerprint != old_leaf
    assert setup.inject.bundles[-1] == mid.data[CA_CERT]
    # the request went with the write of the new CA, not with a later one
    assert [ROTATE_ANNOTATION in w for w in setup.store.writes[writes:]] == [True, False]
    await b.check()
    assert b.fingerprint == a.fingerprint
    step = await a.check()
    assert step is not None and step.action == Action.IDLE
    final = await setup.snapshot()
    assert cas(final.data[CA_CERT]) == 1 and final.data[CA_CERT] != old_bundle
    assert setup.inject.bundles[-1] == final.data[CA_CERT]
    assert setup.reasons()[-3:] == ["CARotationStarted", "CertificateIssued", "CARotationFinished"]


async def test_followers_leave_the_request_to_the_leader(setup: Setup) -> None:
    a, b = setup.make("a"), setup.make("b")
    await a.check()
    await b.check()
    served = b.fingerprint
    await setup.request("leaf")
    assert await b.check() is None
    assert (await setup.snapshot()).annotations[ROTATE_ANNOTATION] == "leaf" and b.fingerprint == served
    await a.check()
    await b.check()
    assert ROTATE_ANNOTATION not in (await setup.snapshot()).annotations
    assert b.fingerprint == a.fingerprint != served


async def test_an_invalid_request_is_removed_with_a_warning(setup: Setup) -> None:
    a = setup.make("a")
    await a.check()
    served, writes = a.fingerprint, len(setup.store.writes)
    await setup.request("everything")
    await a.check()
    await a.check()
    assert ROTATE_ANNOTATION not in (await setup.snapshot()).annotations
    assert a.fingerprint == served and len(setup.store.writes) == writes
    kind, reason, message = setup.store.events[-1]
    assert (kind, reason) == ("Warning", "RotationRequestInvalid") and "'everything'" in message
    assert setup.reasons().count("RotationRequestInvalid") == 1


async def test_a_request_waits_while_the_bundle_cannot_be_injected(setup: Setup) -> None:
    a, b = setup.make("a"), setup.make("b")
    await a.check()
    await b.check()
    served = b.fingerprint
    setup.leader = "b"  # a new leader must inject before it issues anything
    setup.inject.ok = False
    await setup.request("leaf")
    step = await b.check()
    assert step is not None and step.action == Action.INJECT
    assert (await setup.snapshot()).annotations[ROTATE_ANNOTATION] == "leaf" and b.fingerprint == served
    assert not b._force_leaf  # the annotation, not a leftover flag, carries the request on
    setup.inject.ok = True
    step = await b.check()
    assert step is not None and step.action == Action.IDLE
    assert ROTATE_ANNOTATION not in (await setup.snapshot()).annotations and b.fingerprint != served


async def test_rotate_now_is_unchanged_by_a_pending_request(setup: Setup) -> None:
    a = setup.make("a")
    await a.check()
    first = a.fingerprint
    await setup.request("leaf")
    step = await a.rotate_leaf_now()  # one new leaf serves both the call and the annotation
    assert step.action == Action.IDLE and a.fingerprint != first
    assert ROTATE_ANNOTATION not in (await setup.snapshot()).annotations
    assert not a._force_leaf and not a._force_ca


async def test_the_loop_honours_the_request_at_the_next_poll(setup: Setup) -> None:
    a = setup.make("a", poll_interval=0.05)
    b = setup.make("b", poll_interval=0.05)
    a.start()
    b.start()
    try:
        async with asyncio.timeout(5):
            await a.ready.wait()
            await b.ready.wait()
            version, first = b.serving.version, b.fingerprint
            await setup.request("leaf")
            await b.serving.next(version)
            while ROTATE_ANNOTATION in (await setup.snapshot()).annotations:
                await asyncio.sleep(0.01)
        assert b.fingerprint != first
        assert p.inspect((await setup.snapshot()).data).leaf_fingerprint == a.fingerprint
    finally:
        await a.stop()
        await b.stop()
