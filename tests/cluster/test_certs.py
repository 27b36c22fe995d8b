"""Certificate storage and rotation against the real API server, served by a real HTTPS listener."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import ssl
from collections.abc import Callable
from typing import Any

import pytest

from kinitiras_py.certs import policy as p
from kinitiras_py.certs.authority import new_ca, new_serving
from kinitiras_py.certs.rotator import Rotator
from kinitiras_py.certs.storage import Change, Conflict, SecretStore, Snapshot, modify
from kinitiras_py.cluster.client import Api
from tests.conftest import Cluster, serve_tls

pytestmark = pytest.mark.cluster

SECRET = "webhook-cert"


class Injector:
    def __init__(self) -> None:
        self.bundles: list[bytes] = []

    async def __call__(self, bundle: bytes) -> bool:
        self.bundles.append(bundle)
        return True


def rotator(api: Any, namespace: str, replica: str, *, leader: Callable[[], bool] = lambda: True,
            inject: Injector | None = None) -> Rotator:
    return Rotator(SecretStore(api, namespace, SECRET), p.CertPolicy.for_service("hook", namespace, ips=("127.0.0.1",)),
                   replica_id=replica, on_bundle=inject, is_leader=leader, poll_interval=0.2)


async def handshake(port: int, bundle: bytes, hostname: str = "127.0.0.1") -> str:
    """Connect with a stdlib client trusting only ``bundle``; the served leaf's fingerprint."""
    ctx = ssl.create_default_context(cadata=bundle.decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=hostname)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await reader.read()).startswith(b"HTTP/1.1 200")
        return hashlib.sha256(writer.get_extra_info("ssl_object").getpeercert(binary_form=True)).hexdigest()
    finally:
        writer.close()


def secret_json(cluster: Cluster, namespace: str) -> dict[str, Any]:
    proc = cluster.kubectl("-n", namespace, "get", "secret", SECRET, "-o", "json", check=True)
    return dict(json.loads(proc.stdout))


async def until(check: Callable[[], Any], within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while not check():
            await asyncio.sleep(0.05)


async def reported(api: Any, namespace: str, rot: Rotator, within: float = 30.0) -> str:
    """The fingerprint ``rot`` reported in the Secret, once it equals what it serves."""
    store = SecretStore(api, namespace, SECRET)
    async with asyncio.timeout(within):
        while True:
            snapshot = await store.read()
            value = snapshot.annotations.get(rot.report_key) if snapshot is not None else None
            if value is not None and json.loads(value)["fingerprint"] == rot.fingerprint:
                return str(rot.fingerprint)
            await asyncio.sleep(0.1)


async def test_storage_creates_the_secret_when_missing(cluster: Cluster, api: Any, namespace: str) -> None:
    store = SecretStore(api, namespace, SECRET)
    assert await store.read() is None
    written = await modify(store, lambda s: Change({"ca.crt": b"CA"}, {"a": "1"}) if s is None else None)
    assert written is not None and written.version
    secret = secret_json(cluster, namespace)
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert base64.b64decode(secret["data"]["ca.crt"]) == b"CA" and secret["metadata"]["annotations"] == {"a": "1"}
    with pytest.raises(Conflict):
        await store.create({"ca.crt": b"again"})


async def test_concurrent_updates_conflict_and_are_redecided(api: Any, namespace: str) -> None:
    one, two = SecretStore(api, namespace, SECRET), SecretStore(api, namespace, SECRET)
    await one.create({}, {"counter": "0"})
    a, b = await one.read(), await two.read()
    assert a is not None and b is not None and a.version == b.version
    await one.update(a, {"tls.crt": b"one"})
    with pytest.raises(Conflict):
        await two.update(b, {"tls.crt": b"two"})
    decisions = 0

    def bump(snapshot: Snapshot | None) -> Change:
        nonlocal decisions
        decisions += 1
        assert snapshot is not None
        return Change({}, {"counter": str(int(snapshot.annotations["counter"]) + 1)})

    stores = [SecretStore(api, namespace, SECRET) for _ in range(5)]
    await asyncio.gather(*(modify(s, bump, attempts=10) for s in stores))
    final = await one.read()
    assert final is not None and final.annotations["counter"] == "5" and final.data["tls.crt"] == b"one"
    assert decisions >= 5


async def test_rotator_issues_a_pair_the_published_bundle_verifies(cluster: Cluster, api: Any, namespace: str) -> None:
    inject = Injector()
    rot = rotator(api, namespace, "a", inject=inject)
    rot.start()
    runner, port = await serve_tls(rot.tls)
    try:
        async with asyncio.timeout(10):
            await rot.ready.wait()
        secret = secret_json(cluster, namespace)
        bundle = base64.b64decode(secret["data"]["ca.crt"])
        assert inject.bundles == [bundle] and rot.bundle.get() == bundle
        assert await handshake(port, bundle) == rot.fingerprint
        assert await handshake(port, bundle, f"hook.{namespace}.svc") == rot.fingerprint
        with pytest.raises(ssl.SSLCertVerificationError):
            await handshake(port, new_ca().cert)
        assert await reported(api, namespace, rot) == rot.fingerprint
    finally:
        await runner.cleanup()
        await rot.stop()
    assert rot.report_key not in secret_json(cluster, namespace)["metadata"].get("annotations", {})


async def test_a_forced_leaf_rotation_reaches_a_follower(api: Any, namespace: str) -> None:
    leader = rotator(api, namespace, "leader", inject=Injector())
    follower = rotator(api, namespace, "follower", leader=lambda: False)
    leader.start()
    follower.start()
    runner, port = await serve_tls(follower.tls)
    try:
        async with asyncio.timeout(10):
            await follower.ready.wait()
        bundle = await follower.bundle
        before = await handshake(port, bundle)
        step = await leader.rotate_leaf_now()
        assert step.action == p.Action.IDLE and leader.fingerprint != before
        await until(lambda: follower.fingerprint == leader.fingerprint)
        assert await handshake(port, bundle) == leader.fingerprint
        assert await reported(api, namespace, follower) == leader.fingerprint
    finally:
        await runner.cleanup()
        await follower.stop()
        await leader.stop()


async def test_ca_rotation_across_two_replicas(api: Any, namespace: str) -> None:
    inject = Injector()
    leader = rotator(api, namespace, "leader", inject=inject)
    follower = rotator(api, namespace, "follower", leader=lambda: False)
    leader.start()
    follower.start()
    runner, port = await serve_tls(follower.tls)
    try:
        async with asyncio.timeout(10):
            await follower.ready.wait()
        old = inject.bundles[-1]
        await leader.rotate_ca_now()
        assert len(p.split_pems(inject.bundles[1])) == 2 and p.split_pems(old)[0] in p.split_pems(inject.bundles[1])
        await until(lambda: len(inject.bundles) == 3)  # the follower reported: the old CA is dropped
        final = inject.bundles[2]
        assert len(p.split_pems(final)) == 1 and final not in (old, p.split_pems(old)[0])
        await until(lambda: follower.bundle.get() == final)
        assert await handshake(port, final) == leader.fingerprint == follower.fingerprint
        with pytest.raises(ssl.SSLCertVerificationError):
            await handshake(port, old)
    finally:
        await runner.cleanup()
        await follower.stop()
        await leader.stop()


async def test_a_corrupted_secret_emits_an_event_and_serving_continues(cluster: Cluster, api: Any,
                                                                       namespace: str) -> None:
    leading = True
    leader = rotator(api, namespace, "leader", leader=lambda: leading, inject=Injector())
    follower = rotator(api, namespace, "follower", leader=lambda: False)
    leader.start()
    follower.start()
    runner, port = await serve_tls(follower.tls)
    try:
        async with asyncio.timeout(10):
            await follower.ready.wait()
        bundle = await follower.bundle
        served = follower.fingerprint
        leading = False  # nobody repairs while we look
        stranger = new_serving(new_ca(), ["x"])
        patch = json.dumps({"data": {"tls.key": base64.b64encode(stranger.key).decode()}})
        cluster.kubectl("-n", namespace, "patch", "secret", SECRET, "--type=merge", "-p", patch, check=True)
        await until(lambda: follower.events >= 1)
        events = await Api.of(api).request("GET", f"/api/v1/namespaces/{namespace}/events", query=[
            ("fieldSelector", f"involvedObject.name={SECRET},reason=CertificateInvalid")])
        assert events["items"] and events["items"][0]["type"] == "Warning"
        assert "does not match" in events["items"][0]["message"]
        assert events["items"][0]["involvedObject"]["kind"] == "Secret"
        for _ in range(3):
            assert await handshake(port, bundle) == served
            await asyncio.sleep(0.2)
        leading = True
        leader.kick()
        await until(lambda: follower.fingerprint != served)
        assert await handshake(port, bundle) == follower.fingerprint == leader.fingerprint
    finally:
        await runner.cleanup()
        await follower.stop()
        await leader.stop()
