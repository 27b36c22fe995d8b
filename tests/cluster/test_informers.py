"""The informer against the real API server: list, watch, handlers, pagination, relist on 410."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from kinitiras_py.cluster import informers
from kinitiras_py.cluster.client import Resource
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
NAMESPACES = Resource("", "v1", "namespaces", False, "Namespace")


async def eventually(check: Callable[[], bool], within: float = 30.0) -> float:
    """Wait until ``check()`` holds; return how long it took; fail after ``within`` seconds."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > within:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - began


class Recorder:
    """Collects handler calls as (event, namespace/name, data)."""

    def __init__(self, informer: informers.Informer) -> None:
        self.seen: list[tuple[str, str, object]] = []
        informer.on_add(self.add)
        informer.on_update(self.update)
        informer.on_delete(self.delete)

    @staticmethod
    def _name(obj: dict[str, object]) -> str:
        meta = obj["metadata"]
        assert isinstance(meta, dict)
        return f"{meta.get('namespace') or ''}/{meta['name']}"

    async def add(self, obj: dict[str, object]) -> None:
        if self._name(obj).endswith("/kube-root-ca.crt"):  # created in every namespace
            return
        self.seen.append(("add", self._name(obj), obj.get("data")))

    async def update(self, old: dict[str, object], new: dict[str, object]) -> None:
        self.seen.append(("update", self._name(new), (old.get("data"), new.get("data"))))

    async def delete(self, obj: dict[str, object]) -> None:
        self.seen.append(("delete", self._name(obj), obj.get("data")))

    def has(self, event: str, name: str) -> bool:
        return any(e == event and n == name for e, n, _ in self.seen)


async def test_list_then_watch_sees_create_update_delete_within_2s(cluster: Cluster, api: object,
                                                                   namespace: str) -> None:
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "before", "--from-literal=k=0")
    informer = informers.Informer(api, CONFIGMAPS, namespace)
    seen = Recorder(informer)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert seen.seen == [("add", f"{namespace}/before", {"k": "0"})]
        obj = informer.get(namespace, "before")
        assert obj is not None and obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"

        await cluster.kubectl_ok("-n", namespace, "create", "configmap", "cm", "--from-literal=k=1")
        await eventually(lambda: seen.has("add", f"{namespace}/cm"))
        assert informer.get(namespace, "cm")["data"] == {"k": "1"}  # type: ignore[index]

        await cluster.kubectl_ok("-n", namespace, "patch", "configmap", "cm", "-p", '{"data":{"k":"2"}}')
        await eventually(lambda: seen.has("update", f"{namespace}/cm"))
        assert ("update", f"{namespace}/cm", ({"k": "1"}, {"k": "2"})) in seen.seen
        assert {o["metadata"]["name"] for o in informer.list(namespace)} == {"before", "cm", "kube-root-ca.crt"}

        await cluster.kubectl_ok("-n", namespace, "delete", "configmap", "cm")
        await eventually(lambda: seen.has("delete", f"{namespace}/cm"))
        assert informer.get(namespace, "cm") is None
        assert len(informer) == 2
        assert informer.relists == 1 and informer.errors == 0
        assert informer.resource_version
    finally:
        await informer.stop()
    assert not informer.running


async def test_cluster_scoped_paginated_list_with_label_selector(cluster: Cluster, api: object) -> None:
    label = f"inf-{uuid.uuid4().hex[:8]}"
    names = [f"{label}-{i}" for i in range(3)]
    for name in names:
        await cluster.kubectl_ok("create", "namespace", name)
        await cluster.kubectl_ok("label", "namespace", name, f"kinitiras-test={label}")
    informer = informers.Informer(api, NAMESPACES, label_selector=f"kinitiras-test={label}", page_size=1)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert sorted(o["metadata"]["name"] for o in informer.list()) == names
        assert informer.get("ignored-for-cluster-scope", names[0]) is not None
        assert informer.list("ignored")  # a namespace filter means nothing for cluster-scoped kinds
    finally:
        await informer.stop()
        for name in names:
            cluster.kubectl("delete", "namespace", name, "--wait=false")


async def test_relist_diffs_against_the_cache_and_synthesises_deletes(cluster: Cluster, api: object,
                                                                      namespace: str) -> None:
    # A young API server still has every resourceVersion, so a real 410 cannot be provoked here;
    # the 410 path itself is unit-tested. This checks the relist diff against a real list.
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "kept", "--from-literal=k=0")
    informer = informers.Informer(api, CONFIGMAPS, namespace)
    seen = Recorder(informer)
    await informer.relist()
    ghost = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "ghost", "namespace": namespace, "resourceVersion": "1"}}
    await informer.apply({"type": "ADDED", "object": ghost})
    await cluster.kubectl_ok("-n", namespace, "patch", "configmap", "kept", "-p", '{"data":{"k":"1"}}')
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "new")
    seen.seen.clear()
    await informer.relist()
    assert sorted(seen.seen, key=str) == sorted([
        ("delete", f"{namespace}/ghost", None),
        ("update", f"{namespace}/kept", ({"k": "0"}, {"k": "1"})),
        ("add", f"{namespace}/new", None),
    ], key=str)
    assert informer.get(namespace, "ghost") is None
    assert informer.relists == 2
