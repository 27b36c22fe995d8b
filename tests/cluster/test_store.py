"""InformerStore against the real API server: direct lookups first, the cache later, late CRDs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from kinitiras_py.cluster import client
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.cluster.store import InformerStore
from tests.conftest import Cluster

T = TypeVar("T")

pytestmark = pytest.mark.cluster


async def test_configmaps_direct_until_synced_then_from_the_cache(cluster: Cluster, api: object,
                                                                  namespace: str) -> None:
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "a", "--from-literal=k=a")
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "b", "--from-literal=k=b")
    store = InformerStore(api)
    try:
        first = await store.get("v1", "ConfigMap", namespace, "a")
        assert first is not None and first["data"] == {"k": "a"} and first["kind"] == "ConfigMap"
        assert store.direct_lookups == 1  # the informer had only just started
        assert await store.get("v1", "ConfigMap", namespace, "missing") is None

        (informer,) = store.informers.values()
        await asyncio.wait_for(informer.synced.wait(), 30)
        before = store.direct_lookups
        cached = await store.get("v1", "ConfigMap", namespace, "b")
        assert cached is not None and cached["data"] == {"k": "b"}
        assert store.direct_lookups == before
        names = {o["metadata"]["name"] for o in await store.list("v1", "ConfigMap", namespace)}
        assert {"a", "b"} <= names
        assert all(o["metadata"]["namespace"] == namespace for o in await store.list("v1", "ConfigMap", namespace))
        assert len(await store.list("v1", "ConfigMap", None)) >= 3  # every namespace
        assert await store.get("v1", "ConfigMap", namespace, "missing") is None
        assert store.direct_lookups == before

        with pytest.raises(LookupError, match="unknown kind"):
            await store.get("v1", "NoSuchKind", namespace, "a")
        with pytest.raises(LookupError, match="namespace is needed"):
            await store.get("v1", "ConfigMap", None, "a")
        # A cluster-scoped kind ignores the namespace it is given.
        assert await store.get("v1", "Namespace", "whatever", namespace) is not None
    finally:
        await store.close()
    assert not store.informers


async def test_direct_list_before_sync(cluster: Cluster, api: object, namespace: str) -> None:
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", "only", "--from-literal=k=1")
    store = InformerStore(api)
    try:
        items = await store.list("v1", "ConfigMap", namespace)
        assert store.direct_lookups == 1
        assert {o["metadata"]["name"] for o in items} == {"only", "kube-root-ca.crt"}
        assert all(o["apiVersion"] == "v1" and o["kind"] == "ConfigMap" for o in items)
    finally:
        await store.close()


async def _after_refresh(get: Callable[[], Awaitable[T]], within: float = 30.0) -> T:
    """``await get()`` until the mapper knows the kind (it refreshes every half second; a busy machine
    may take longer than that), failing after ``within`` seconds."""
    async with asyncio.timeout(within):
        while True:
            try:
                return await get()
            except LookupError:
                await asyncio.sleep(0.1)


def _crd(group: str) -> str:
    return f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""


async def test_a_crd_created_after_start_is_found_by_the_mapper_refresh(cluster: Cluster, api: object,
                                                                        namespace: str) -> None:
    group = f"w{uuid.uuid4().hex[:8]}.kinitiras.test"
    mapper = Discovery(api, max_age=0.5)
    store = InformerStore(api, mapper)
    try:
        with pytest.raises(LookupError, match="unknown kind Widget"):
            await store.get(f"{group}/v1", "Widget", namespace, "w1")
        await cluster.kubectl_ok("apply", "-f", "-", input=_crd(group))
        await cluster.kubectl_ok("wait", "--for", "condition=established", "--timeout=30s", f"crd/widgets.{group}")
        await cluster.kubectl_ok("-n", namespace, "apply", "-f", "-",
                      input=f"apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w1}}\nsize: 3\n")
        found = await _after_refresh(lambda: store.get(f"{group}/v1", "Widget", namespace, "w1"))
        assert found is not None and found["size"] == 3
        resource = await mapper.resolve(f"{group}/v1", "Widget")
        assert (resource.group, resource.version, resource.plural, resource.namespaced) == (group, "v1", "widgets",
                                                                                          True)
        informer = store.informers[resource]
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert [o["metadata"]["name"] for o in await store.list(f"{group}/v1", "Widget", namespace)] == ["w1"]
    finally:
        await store.close()
        cluster.kubectl("delete", "crd", f"widgets.{group}", "--wait=false")


async def test_mapper_resolves_core_and_group_kinds(api: object) -> None:
    mapper = Discovery(api)
    pod = await mapper.resolve("v1", "Pod")
    assert pod == client.Resource("", "v1", "pods", True, "Pod")
    deploy = await mapper.resolve("apps/v1", "Deployment")
    assert (deploy.plural, deploy.namespaced, deploy.path("ns", "d")) == (
        "deployments", True, "/apis/apps/v1/namespaces/ns/deployments/d")
    crd = await mapper.resolve("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert not crd.namespaced
    op = await mapper.resolve("policy.kcloudlabs.io/v1alpha1", "OverridePolicy")
    assert op.plural == "overridepolicies" and op.namespaced
    with pytest.raises(LookupError):
        await mapper.resolve("nosuchgroup.example/v1", "Thing")
    assert mapper.discoveries == 5
    await mapper.resolve("v1", "Pod")
    assert mapper.discoveries == 5
