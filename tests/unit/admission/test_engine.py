"""The engine object: its policies, evaluation in and out of an event loop, caches of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from kinitiras_py import Engine, PolicyErrors, Request
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.offline.static import StaticStore


def override(name: str, overriders: dict[str, Any], kind: str = "ClusterOverridePolicy") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": "team-a"} if kind == "OverridePolicy" else {})}
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "overrideRules": [{"overriders": overriders}]}}


def label(name: str, value: str = "yes") -> dict[str, Any]:
    return override(name, {"template": {"type": "labels", "operation": "add", "path": name,
                                        "value": {"string": value}}})


DENY_LATEST = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
               "metadata": {"name": "no-latest"},
               "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                        "validateRules": [{"cel": "object.spec.containers.all(c, !c.image.endsWith(':latest'))",
                                           "message": "no :latest images"}]}}
ENV = override("env", {"cel": "[{'op': 'add', 'path': '/metadata/labels/env', "
                              "'value': namespaceObject.metadata.labels.env}]"})
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}


def pod(image: str = "nginx", namespace: str | None = "team-a") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "app", "image": image}]}}


def labels_of(engine: Engine, obj: Obj) -> dict[str, str]:
    return dict(engine.evaluate_sync(obj).decision.object["metadata"].get("labels") or {})


# -- policies ---------------------------------------------------------------------------------------

def test_policies_are_added_replaced_and_removed() -> None:
    engine = Engine([label("a")])
    assert labels_of(engine, pod()) == {"a": "yes"}
    engine.add(label("a", "again"), label("b"))  # the same identity replaces
    assert labels_of(engine, pod()) == {"a": "again", "b": "yes"}
    engine.replace(label("c"))
    assert labels_of(engine, pod()) == {"c": "yes"}
    assert engine.remove("ClusterOverridePolicy", "c") and not engine.remove("ClusterOverridePolicy", "c")
    assert labels_of(engine, pod()) == {}
    engine.add(DENY_LATEST)
    assert [p.name for p in engine.policies] == ["no-latest"]
    assert engine.remove("ClusterValidatePolicy", "no-latest") and engine.policies == []


def test_a_refused_policy_is_named_with_its_rule_and_field_and_nothing_is_added() -> None:
    engine = Engine([label("a")])
    with pytest.raises(PolicyErrors) as refused:
        engine.add(label("b"), override("broken", {"cel": "1 +"}))
    assert "ClusterOverridePolicy broken" in str(refused.value)
    assert "spec.overrideRules[0].overriders.cel" in str(refused.value)
    assert [p.name for p in engine.policies] == ["a"]
    with pytest.raises(PolicyErrors) as both:
        engine.replace(override("x", {"cel": "1 +"}), override("y", {"cel": "[] +"}))
    assert len(both.value.errors) == 2 and "ClusterOverridePolicy y" in str(both.value)
    assert [p.name for p in engine.policies] == ["a"]


def test_http_references_are_held_to_the_egress_setting_as_the_webhook_holds_them() -> None:
    ref = override("call", {"template": {"type": "labels", "operation": "add", "path": "x", "valueRef": {
        "from": "http", "path": "/v", "http": {"url": "http://127.0.0.1:9/value"}}}})
    with pytest.raises(PolicyErrors, match=r"ClusterOverridePolicy call.*http\.url"):
        Engine([ref])


# -- evaluation -------------------------------------------------------------------------------------

def test_one_object_gives_the_decision_and_each_rule_result() -> None:
    engine = Engine([label("a"), DENY_LATEST])
    allowed = engine.evaluate_sync(pod())
    assert allowed.decision.allowed and allowed.decision.object["metadata"]["labels"] == {"a": "yes"}
    assert [(r.policy.name, r.type, r.result, r.patched) for r in allowed.rules] == [
        ("a", "override", "pass", True), ("no-latest", "validate", "pass", False)]
    denied = engine.evaluate_sync(pod("nginx:latest"))
    assert not denied.decision.allowed
    assert denied.decision.message == "ClusterValidatePolicy no-latest: no :latest images"
    assert denied.rules[-1].result == "fail" and denied.rules[-1].denied
    with pytest.raises(ValueError, match="unknown operation"):
        engine.evaluate_sync(pod(), "PATCH")


def test_the_namespace_given_fills_an_object_that_has_none() -> None:
    engine = Engine([override("ns", {"cel": "[{'op': 'add', 'path': '/metadata/labels', "
                                            "'value': {'ns': object.metadata.namespace}}]"}, "OverridePolicy")])
    assert labels_of(engine, pod(namespace=None)) == {}  # a namespaced policy: not its namespace
    result = engine.evaluate_sync(pod(namespace=None), namespace="team-a")
    assert result.decision.object["metadata"]["labels"] == {"ns": "team-a"}


def test_references_are_read_through_the_store_given() -> None:
    assert labels_of(Engine([ENV], store=StaticStore([NAMESPACE])), pod()) == {"env": "prod"}
    failed = Engine([ENV]).evaluate_sync(pod())  # no store: no Namespace, so the rule fails
    assert not failed.decision.allowed and failed.rules[0].result == "error"


async def test_inside_a_running_loop_the_async_methods_are_awaited() -> None:
    engine = Engine([label("a")])
    result = await engine.evaluate(pod())
    decision = await engine.admit(Request("CREATE", pod(), namespace="team-a"))
    assert result.decision.object == decision.object
    assert decision.object["metadata"]["labels"] == {"a": "yes"}


async def test_a_sync_call_on_the_loops_own_thread_is_refused_not_deadlocked() -> None:
    engine = Engine([label("a")])
    with pytest.raises(RuntimeError, match=r"Engine\.evaluate_sync .*running event loop.*await Engine\.evaluate"):
        engine.evaluate_sync(pod())
    with pytest.raises(RuntimeError, match=r"await Engine\.admit\("):
        engine.admit_sync(Request("CREATE", pod()))


class LoopRecordingStore(StaticStore):
    """Notes the event loop and thread each read runs on."""

    def __init__(self, objects: Sequence[Obj]) -> None:
        super().__init__(objects)
        self.seen: list[tuple[asyncio.AbstractEventLoop, int]] = []

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        self.seen.append((asyncio.get_running_loop(), threading.get_ident()))
        return await super().get(api_version, kind, namespace, name)


async def test_a_sync_call_from_another_thread_runs_on_the_engines_loop() -> None:
    store = LoopRecordingStore([NAMESPACE])
    engine = Engine([ENV], store=store, mutation_results_bytes=0)
    await engine.evaluate(pod())  # the engine now runs on this loop
    result = await asyncio.to_thread(engine.evaluate_sync, pod())
    assert result.decision.object["metadata"]["labels"] == {"env": "prod"}
    loop, here = asyncio.get_running_loop(), threading.get_ident()
    assert store.seen == [(loop, here), (loop, here)]  # both reads on the engine's loop and thread


def test_sync_calls_outside_any_loop_and_from_threads_without_one() -> None:
    engine = Engine([label("a")])
    assert labels_of(engine, pod()) == {"a": "yes"}
    results: list[dict[str, str]] = []
    threads = [threading.Thread(target=lambda: results.append(labels_of(engine, pod()))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [{"a": "yes"}] * 4


# -- caches -----------------------------------------------------------------------------------------

def test_each_engine_has_caches_of_its_own() -> None:
    policies = [override("cel", {"cel": "[{'op': 'add', 'path': '/metadata/labels', "
                                        "'value': {'image': object.spec.containers[0].image}}]"})]
    one, two = Engine(policies), Engine(policies)
    one.evaluate_sync(pod())
    one.evaluate_sync({**pod(), "metadata": {"name": "other", "namespace": "team-a"}})  # the same parts read
    assert one.cel_results.hits == 1 and len(one.cel_results) > 0
    two.evaluate_sync(pod())
    assert (two.cel_results.hits, two.mutations.hits) == (0, 0)
    off = Engine(policies, cel_results_bytes=0, mutation_results_bytes=0)
    for _ in range(2):
        off.evaluate_sync(pod())
    assert (len(off.cel_results), len(off.mutations), off.answers.enabled) == (0, 0, False)
