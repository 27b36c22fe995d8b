"""The one discovery client: kinds to resources, group listings, one cache with one age."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import ApiException, Resource
from kinitiras_py.cluster.discovery import MAX_AGE, Discovery
from tests.unit.cluster.conftest import FakeApi, api_error


def _discovery(*resources: tuple[str, str, bool]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [
        {"name": name, "kind": kind, "namespaced": namespaced, "verbs": ["get"]}
        for name, kind, namespaced in resources]}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_discovery_caches_and_refreshes_unknown_kinds_at_most_once_per_interval(fake: FakeApi) -> None:
    fake.route("GET", "/apis/example.com/v1", [_discovery(("gadgets", "Gadget", True)),
                                               _discovery(("gadgets", "Gadget", True), ("widgets", "Widget", False),
                                                          ("widgets/status", "Widget", False))])
    clock = Clock()
    discovery = Discovery(fake, max_age=5, clock=clock)
    gadget = Resource("example.com", "v1", "gadgets", True, "Gadget")
    assert await discovery.resolve("example.com/v1", "Gadget") == gadget
    assert await discovery.resolve("example.com/v1", "Gadget") is not None
    assert discovery.discoveries == 1
    with pytest.raises(LookupError, match=r"unknown kind Widget in example\.com/v1"):
        await discovery.resolve("example.com/v1", "Widget")  # within the interval: no new discovery
    assert discovery.discoveries == 1
    clock.now += 5
    widget = await discovery.resolve("example.com/v1", "Widget")
    assert widget == Resource("example.com", "v1", "widgets", False, "Widget")  # not the status subresource
    assert discovery.discoveries == 2


async def test_discovery_core_group_unknown_groups_and_failures(fake: FakeApi) -> None:
    fake.route("GET", "/api/v1", _discovery(("pods", "Pod", True), ("pods/log", "Pod", True)))
    fake.route("GET", "/apis/broken.io/v1", api_error(503))
    discovery = Discovery(fake)
    assert (await discovery.resolve("v1", "Pod")).path("ns", "p") == "/api/v1/namespaces/ns/pods/p"
    with pytest.raises(LookupError, match="unknown kind Thing"):
        await discovery.resolve("nosuch.io/v1", "Thing")  # 404: the group version does not exist
    with pytest.raises(LookupError, match=r"discovery of broken\.io/v1 failed: 503"):
        await discovery.resolve("broken.io/v1", "Thing")
    for api_version, kind in (("", "Pod"), ("v1", ""), ("a/b/c", "Pod")):
        with pytest.raises(LookupError):
            await discovery.resolve(api_version, kind)


async def test_concurrent_lookups_share_one_discovery(fake: FakeApi) -> None:
    fake.route("GET", "/apis/apps/v1", _discovery(("deployments", "Deployment", True)))
    discovery = Discovery(fake)
    found = await asyncio.gather(*(discovery.resolve("apps/v1", "Deployment") for _ in range(5)))
    assert len(set(found)) == 1 and discovery.discoveries == 1


class DiscoveryApi:
    """Discovery documents of a tiny API server, counting requests."""

    DOCS: dict[str, Obj] = {
        "/api": {"versions": ["v1"]},
        "/apis": {"groups": [{"name": "apps", "versions": [{"version": "v1"}]},
                             {"name": "authentication.k8s.io", "versions": [{"version": "v1"}]}]},
        "/api/v1": {"resources": [
            {"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["create", "get", "list", "delete"]},
            {"name": "pods/status", "kind": "Pod", "namespaced": True, "verbs": ["get", "patch"]},
            {"name": "bindings", "kind": "Binding", "namespaced": True, "verbs": ["create"]},
            {"name": "componentstatuses", "kind": "ComponentStatus", "verbs": ["get", "list"]}]},
        "/apis/apps/v1": {"resources": [
            {"name": "deployments", "kind": "Deployment", "namespaced": True, "verbs": ["get", "update"]}]},
        "/apis/authentication.k8s.io/v1": {"resources": [
            {"name": "tokenreviews", "kind": "TokenReview", "verbs": ["create"]}]},
    }

    def __init__(self) -> None:
        self.gets: list[str] = []
        self.down = False

    async def request(self, method: str, path: str, **_kw: Any) -> Obj:
        self.gets.append(path)
        if self.down:
            raise ApiException(status=503, reason="Service Unavailable")
        return copy.deepcopy(self.DOCS[path])


async def test_discovery_lists_stored_resources_and_caches() -> None:
    now = [0.0]
    api = DiscoveryApi()
    catalog = Discovery(api, max_age=30, clock=lambda: now[0])
    assert await catalog.groups() == ["", "apps", "authentication.k8s.io"]
    assert [r.plural for r in await catalog.group_resources("")] == ["pods"]
    assert await catalog.group_resources("authentication.k8s.io") == []
    assert await catalog.group_resources("nothere") == []
    deployments = (await catalog.group_resources("apps"))[0]
    assert (deployments.group, deployments.version, deployments.plural, deployments.kind) == (
        "apps", "v1", "deployments", "Deployment")
    count = len(api.gets)
    await catalog.groups()
    await catalog.group_resources("apps")
    assert len(api.gets) == count  # cached
    now[0] = 31
    api.down = True
    with pytest.raises(LookupError, match=r"^discovery of"):
        await catalog.group_resources("apps")
    api.down = False
    catalog.invalidate()
    assert len(await catalog.group_resources("apps")) == 1




async def test_kind_lookups_and_listings_share_one_cache() -> None:
    now = [0.0]
    api = DiscoveryApi()
    discovery = Discovery(api, max_age=5, clock=lambda: now[0])
    await discovery.group_resources("apps")
    assert api.gets == ["/api", "/apis", "/apis/apps/v1"]
    assert (await discovery.resolve("apps/v1", "Deployment")).plural == "deployments"
    assert (await discovery.resolve("v1", "Binding")).plural == "bindings"  # kinds keep virtual resources
    assert api.gets == ["/api", "/apis", "/apis/apps/v1", "/api/v1"]
    assert [r.plural for r in await discovery.group_resources("")] == ["pods"]  # listings do not
    assert len(api.gets) == 4 == discovery.discoveries
    now[0] = 5
    await discovery.resolve("apps/v1", "Deployment")  # a known kind never waits for a refresh
    assert len(api.gets) == 4
    await discovery.group_resources("apps")  # a listing past max_age is read again
    assert api.gets[4:] == ["/api", "/apis", "/apis/apps/v1"]


async def test_a_failed_read_is_remembered_for_max_age(fake: FakeApi) -> None:
    fake.route("GET", "/apis/broken.io/v1", api_error(503))
    clock = Clock()
    discovery = Discovery(fake, clock=clock)
    for _ in range(3):
        with pytest.raises(LookupError, match=r"discovery of broken\.io/v1 failed: 503"):
            await discovery.resolve("broken.io/v1", "Thing")
    assert discovery.discoveries == 1
    clock.now += MAX_AGE
    with pytest.raises(LookupError, match="failed: 503"):
        await discovery.resolve("broken.io/v1", "Thing")
    assert discovery.discoveries == 2
    discovery.invalidate()
    with pytest.raises(LookupError, match="failed: 503"):
        await discovery.resolve("broken.io/v1", "Thing")
    assert discovery.discoveries == 3
