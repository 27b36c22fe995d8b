"""InformerStore on a scripted transport: direct lookups until synced, then the cache."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinitiras_py.cluster.store import InformerStore
from tests.unit.cluster.conftest import FakeApi, api_error, cm, page

ALL = "/api/v1/configmaps"
ONE = "/api/v1/namespaces/ns/configmaps"


@pytest.fixture
def fake_discovery(fake: FakeApi) -> FakeApi:
    fake.route("GET", "/api/v1", {"resources": [
        {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
        {"name": "namespaces", "kind": "Namespace", "namespaced": False}]})
    return fake


async def test_lookups_go_direct_until_the_informer_syncs(fake_discovery: FakeApi) -> None:
    fake = fake_discovery
    fake.route("GET", ALL, api_error(503))  # the informer cannot sync yet
    fake.route("GET", f"{ONE}/a", cm("a", "1", k="direct"))
    fake.route("GET", ONE, page([cm("a", "1"), cm("b", "2")], "2"))
    store = InformerStore(fake)
    try:
        got = await store.get("v1", "ConfigMap", "ns", "a")
        assert got is not None and got["data"] == {"k": "direct"}
        direct = next(r for r in fake.requests if r["path"] == f"{ONE}/a")
        assert direct["timeout"] == 1.0
        assert await store.get("v1", "ConfigMap", "ns", "missing") is None
        listed = await store.list("v1", "ConfigMap", "ns")
        assert [(o["kind"], o["metadata"]["name"]) for o in listed] == [("ConfigMap", "a"), ("ConfigMap", "b")]
        assert store.direct_lookups == 3
        assert len(store.informers) == 1  # one informer per kind, started by the first lookup
    finally:
        await store.close()
    assert store.informers == {}


async def test_direct_lookup_failures_are_lookup_errors(fake_discovery: FakeApi) -> None:
    fake = fake_discovery
    fake.route("GET", ALL, api_error(503))
    fake.route("GET", f"{ONE}/a", api_error(403, "Forbidden"))
    fake.route("GET", f"{ONE}/slow", TimeoutError())
    fake.route("GET", ONE, page([], "1"))
    fake.delays[("GET", ONE)] = 5
    store = InformerStore(fake, direct_timeout=0.05)
    try:
        with pytest.raises(LookupError, match="403"):
            await store.get("v1", "ConfigMap", "ns", "a")
        with pytest.raises(LookupError, match="timed out"):
            await store.get("v1", "ConfigMap", "ns", "slow")
        with pytest.raises(LookupError, match="timed out"):
            await store.list("v1", "ConfigMap", "ns")
        with pytest.raises(LookupError, match="namespace is needed"):
            await store.get("v1", "ConfigMap", None, "a")
        with pytest.raises(LookupError, match="unknown kind"):
            await store.get("v1", "Gizmo", "ns", "a")
    finally:
        await store.close()


async def test_after_sync_lookups_read_the_cache(fake_discovery: FakeApi) -> None:
    fake = fake_discovery
    fake.route("GET", ALL, page([cm("a", "1", k="cached"), cm("b", "2", namespace="other")], "2"))
    fake.route("GET", "/api/v1/namespaces", {"metadata": {"resourceVersion": "3"},
                                            "items": [{"metadata": {"name": "ns", "resourceVersion": "3"}}]})
    store = InformerStore(fake)
    try:
        await store.list("v1", "ConfigMap", None)  # direct; starts the informer
        for informer in store.informers.values():
            await asyncio.wait_for(informer.synced.wait(), 1)
        before = len(fake.requests)
        got = await store.get("v1", "ConfigMap", "ns", "a")
        assert got is not None and got["data"] == {"k": "cached"}
        assert [o["metadata"]["name"] for o in await store.list("v1", "ConfigMap", "other")] == ["b"]
        assert len(await store.list("v1", "ConfigMap", None)) == 2
        assert len(fake.requests) == before
        assert store.direct_lookups == 1
    finally:
        await store.close()


async def test_cluster_scoped_kinds_ignore_the_namespace(fake_discovery: FakeApi) -> None:
    fake = fake_discovery
    fake.route("GET", "/api/v1/namespaces", api_error(503))
    fake.route("GET", "/api/v1/namespaces/ns", {"kind": "Namespace", "metadata": {"name": "ns"}})
    store = InformerStore(fake)
    try:
        found: Any = await store.get("v1", "Namespace", "some-namespace", "ns")
        assert found["metadata"]["name"] == "ns"
    finally:
        await store.close()
