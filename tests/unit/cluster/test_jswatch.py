"""The informers feeding JavaScript watch hooks (cluster/jswatch.py), on a scripted transport."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.jswatch import HookFeed, _Target
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import watchhooks
from tests.unit.cluster.conftest import FakeApi, cm, page

CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
PATH = "/api/v1/configmaps"
KEY = ("ClusterValidatePolicy", None, "seen")
SOURCE = """
function jsa_init(state) { state.seen = []; }
function jsa_created(obj, sync, state) { state.seen.push('+' + obj.metadata.namespace + '/' + obj.metadata.name); }
function jsa_updated(obj, old, sync, state) { state.seen.push(old.data.k + '>' + obj.data.k); }
function jsa_deleted(obj, sync, state) { state.seen.push('-' + obj.metadata.name); }
function jsa_validate(state) {}
"""


class Mapper:
    """Resolves ConfigMaps only."""

    async def resolve(self, api_version: str, kind: str) -> Resource:
        if (api_version, kind) != ("v1", "ConfigMap"):
            raise LookupError(f"unknown kind {kind} in {api_version}")
        return CONFIGMAPS


def policy(kind: str = "ConfigMap") -> CompiledPolicy:
    return compile_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
                           "metadata": {"name": "seen"}, "spec": {
                               "resourceSelectors": [{"apiVersion": "v1", "kind": kind}],
                               "validateRules": [{"javascript": {"source": SOURCE}}]}})


def seen(compiled: CompiledPolicy) -> Any:
    [hooks] = watchhooks.watching(compiled)
    hooks.script.queue(lambda: None).result()
    return orjson.loads(hooks.state.text).get("seen")


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


async def test_hooks_start_with_the_listed_objects_in_order_then_follow_each_event(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([cm("a", "10", "other", k="1"), cm("b", "11", k="1")], "15"))
    feed = HookFeed(fake, Mapper())  # type: ignore[arg-type]
    compiled = policy()
    feed.update(KEY, compiled)
    try:
        await asyncio.wait_for(feed.settled(), 2)
        assert seen(compiled) == ["+ns/b", "+other/a"]  # by namespace, then name
        informer = feed._informers[CONFIGMAPS]  # its watch stays open without events: these come in order
        for change in (event("ADDED", cm("c", "16")), event("MODIFIED", cm("b", "17", k="2")),
                       event("DELETED", cm("c", "18"))):
            await informer.apply(change)
        assert seen(compiled) == ["+ns/b", "+other/a", "+ns/c", "1>2", "-c"]
        # A new version starts afresh with what exists; the old one no longer follows events.
        newer = policy()
        feed.update(KEY, newer)
        feed.update(KEY, newer)  # the same version again (a status update): nothing happens
        await asyncio.wait_for(feed.settled(), 2)
        assert seen(newer) == ["+ns/b", "+other/a"] and len(seen(compiled)) == 5
        feed.update(KEY, None)
        assert not feed._informers  # nothing follows configmaps any more
    finally:
        await feed.stop()


async def test_events_the_snapshot_already_holds_are_skipped(fake: FakeApi) -> None:
    compiled = policy()
    [hooks] = watchhooks.watching(compiled)
    hooks.start([cm("a", "20")]).result()
    feed = HookFeed(fake, Mapper())  # type: ignore[arg-type]
    feed._targets[CONFIGMAPS] = [_Target(compiled, hooks, {CONFIGMAPS: 20})]
    added = feed._handler(CONFIGMAPS, "created")
    await added(cm("a", "20"))  # what a relist replays of the snapshot
    await added(cm("b", "21"))
    await feed._handler(CONFIGMAPS, "deleted")(cm("a", "19"))  # the cached copy a relist reports gone
    await feed._handler(CONFIGMAPS, "deleted")(cm("b", "22"))
    assert seen(compiled) == ["+ns/a", "+ns/b", "-b"]


async def test_an_unknown_kind_fails_the_rule_clearly(fake: FakeApi) -> None:
    feed = HookFeed(fake, Mapper())  # type: ignore[arg-type]
    compiled = policy("Widget")
    feed.update(KEY, compiled)
    await asyncio.wait_for(feed.settled(), 2)
    [hooks] = watchhooks.watching(compiled)
    assert hooks.state.problem is not None and "unknown kind Widget in v1" in hooks.state.problem
    await feed.stop()
