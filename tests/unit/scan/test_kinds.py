"""Selectors to the resources a scan watches."""

from __future__ import annotations

from kinitiras_py.cluster.client import Resource
from kinitiras_py.scan.kinds import resolve
from tests.unit.registration.test_rules import FakeCatalog


async def test_named_kinds_are_watched_once_per_group_and_wildcards_are_not() -> None:
    found = await resolve([[{"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "apps/v1", "kind": "Deployment"}],
                           [{"kind": "Widget"}, {"apiVersion": "example.com/v2", "kind": "Widget"}],
                           [{"apiVersion": "networking.k8s.io", "kind": "Ingress"}],
                           [{"apiVersion": "v1", "kind": "*"}], []], FakeCatalog())
    assert found.resources == {Resource("", "v1", "pods", True, "Pod"),
                               Resource("apps", "v1", "deployments", True, "Deployment"),
                               Resource("example.com", "v1", "widgets", True, "Widget"),
                               Resource("networking.k8s.io", "v1", "ingresses", True, "Ingress")}
    assert found.unscanned == ["selector v1 *: every kind is not scanned",
                               "a policy without resourceSelectors (every kind) is not scanned"]
    assert not found.retry


async def test_excluded_unknown_and_unreachable_kinds() -> None:
    catalog = FakeCatalog(broken=frozenset({"broken.io"}))
    found = await resolve([[{"apiVersion": "v1", "kind": "Event"}, {"apiVersion": "v1", "kind": "Gizmo"},
                            {"apiVersion": "broken.io/v1", "kind": "Thing"}]], catalog)
    assert found.resources == set()
    assert found.retry
    assert found.unscanned == ["selector v1 Gizmo: unknown kind Gizmo in v1",
                               "selector broken.io/v1 Thing: discovery of broken.io/v1 failed: 503 Service Unavailable"]
