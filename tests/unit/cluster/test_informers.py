"""The informer loop on a scripted transport: pagination, events, 410 relists, backoff, handlers."""

from __future__ import annotations

import asyncio
import collections
import gc
import tracemalloc
from typing import Any

import aiohttp
import orjson
import pytest

from kinitiras_py.base import pacing
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.informers import Gone, Informer, _packed
from tests.unit.base.test_collector import managed
from tests.unit.cluster.conftest import END, FakeApi, api_error, cm, eventually, page

CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
PATH = "/api/v1/namespaces/ns/configmaps"


class Events:
    def __init__(self, informer: Informer) -> None:
        self.seen: list[tuple[str, str, Any]] = []
        informer.on_add(self.add)
        informer.on_update(self.update)
        informer.on_delete(self.delete)

    async def add(self, obj: dict[str, Any]) -> None:
        self.seen.append(("add", obj["metadata"]["name"], obj.get("data")))

    async def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.seen.append(("update", new["metadata"]["name"], (old.get("data"), new.get("data"))))

    async def delete(self, obj: dict[str, Any]) -> None:
        self.seen.append(("delete", obj["metadata"]["name"], obj.get("data")))


def informer(fake: FakeApi, **kw: Any) -> Informer:
    return Informer(fake, CONFIGMAPS, "ns", backoff_initial=0.001, backoff_max=0.004, **kw)


async def test_paginated_first_list_fills_the_cache_and_sets_synced(fake: FakeApi) -> None:
    def pages(query: dict[str, str], _body: object) -> dict[str, Any]:
        assert query["limit"] == "2"
        if query.get("continue") == "p2":
            return page([cm("c", "12", k="3")], "15")
        return page([cm("a", "10", k="1"), cm("b", "11", k="2")], "15", cont="p2")

    fake.route("GET", PATH, pages)
    inf = informer(fake, page_size=2)
    events = Events(inf)
    inf.start()
    try:
        await asyncio.wait_for(inf.synced.wait(), 1)
        assert [e[:2] for e in events.seen] == [("add", "a"), ("add", "b"), ("add", "c")]
        assert inf.resource_version == "15"
        a = inf.get("ns", "a")
        assert a is not None and (a["apiVersion"], a["kind"]) == ("v1", "ConfigMap")
        assert sorted(o["metadata"]["name"] for o in inf.list("ns")) == ["a", "b", "c"]
        assert inf.list("other") == [] and inf.get("other", "a") is None
        await eventually(lambda: fake.watch_calls)
        watch = fake.watch_calls[0]
        assert watch == {"path": PATH, "watch": "true", "allowWatchBookmarks": "true",
                         "timeoutSeconds": "300", "resourceVersion": "15"}
    finally:
        await inf.stop()
    assert fake.closed_watches == 1 and fake.open_watches == 0


@pytest.mark.parametrize("compact", [False, True], ids=["dicts", "compact"])
async def test_watch_events_update_cache_handlers_and_resource_version(fake: FakeApi, compact: bool) -> None:
    fake.route("GET", PATH, page([cm("a", "10", k="1")], "10"))
    fake.watches = [[
        {"type": "ADDED", "object": cm("b", "11", k="b")},
        {"type": "MODIFIED", "object": cm("a", "12", k="2")},
        {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "20"}}},
        {"type": "DELETED", "object": cm("b", "21", k="b")},
        {"type": "MODIFIED", "object": cm("c", "22")},  # unknown so far: an add
        END,
    ]]
    inf = informer(fake, label_selector="app=x", compact=compact)
    events = Events(inf)
    inf.start()
    try:
        await eventually(lambda: len(fake.watch_calls) == 2)
        assert events.seen == [("add", "a", {"k": "1"}), ("add", "b", {"k": "b"}),
                               ("update", "a", ({"k": "1"}, {"k": "2"})), ("delete", "b", {"k": "b"}),
                               ("add", "c", {})]
        assert fake.watch_calls[1]["resourceVersion"] == "22"  # re-watch from the last version
        assert fake.watch_calls[1]["labelSelector"] == "app=x"
        assert fake.requests[0]["query"]["labelSelector"] == "app=x"
        assert inf.relists == 1 and inf.errors == 0
        assert sorted(o["metadata"]["name"] for o in inf.list()) == ["a", "c"]
    finally:
        await inf.stop()


async def test_bookmark_moves_the_resource_version(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([], "5"))
    fake.watches = [[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99"}}}, END]]
    inf = informer(fake)
    inf.start()
    try:
        await eventually(lambda: len(fake.watch_calls) == 2)
        assert fake.watch_calls[1]["resourceVersion"] == "99"
    finally:
        await inf.stop()


@pytest.mark.parametrize("gone", [api_error(410, "Gone"),
                                  {"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                               "message": "too old resource version"}}],
                         ids=["ApiException-410", "ERROR-event-410"])
@pytest.mark.parametrize("compact", [False, True], ids=["dicts", "compact"])
async def test_410_relists_and_synthesises_the_missed_events(fake: FakeApi, gone: Any, compact: bool) -> None:
    fake.route("GET", PATH, [
        page([cm("kept", "1", k="0"), cm("changed", "2", k="0"), cm("vanished", "3", k="0")], "3"),
        page([cm("kept", "1", k="0"), cm("changed", "7", k="1"), cm("new", "8", k="0")], "9"),
    ])
    fake.watches = [[gone]]
    inf = informer(fake, compact=compact)
    events = Events(inf)
    inf.start()
    try:
        await eventually(lambda: inf.relists == 2 and len(fake.watch_calls) == 2)
        assert events.seen[3:] == [("delete", "vanished", {"k": "0"}),
                                   ("update", "changed", ({"k": "0"}, {"k": "1"})),
                                   ("add", "new", {"k": "0"})]
        assert fake.watch_calls[1]["resourceVersion"] == "9"
        assert inf.errors == 0  # a 410 is routine, not an error
        assert inf.get("ns", "vanished") is None
    finally:
        await inf.stop()


async def test_other_errors_back_off_and_rewatch_without_relisting(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([cm("a", "4")], "4"))
    fake.watches = [[api_error(500)], [aiohttp.ClientPayloadError("cut")],
                    [{"type": "ERROR", "object": {"code": 500, "message": "internal"}}],
                    [{"type": "ADDED", "object": cm("b", "6")}, END]]
    inf = informer(fake)
    inf.start()
    try:
        await eventually(lambda: len(fake.watch_calls) == 5)
        assert inf.errors == 3 and inf.relists == 1
        assert [c["resourceVersion"] for c in fake.watch_calls] == ["4", "4", "4", "4", "6"]
    finally:
        await inf.stop()


async def test_a_failing_list_is_retried_before_synced(fake: FakeApi) -> None:
    fake.route("GET", PATH, [api_error(503), TimeoutError(), page([cm("a", "1")], "1")])
    inf = informer(fake)
    inf.start()
    try:
        await asyncio.wait_for(inf.synced.wait(), 1)
        assert inf.errors == 2 and inf.get("ns", "a") is not None
    finally:
        await inf.stop()


async def test_410_right_after_a_relist_backs_off(fake: FakeApi) -> None:
    fake.route("GET", PATH, [page([], "1"), api_error(410, "continue expired"), page([], "2")])
    fake.watches = [[api_error(410)]]
    inf = informer(fake)
    inf.start()
    try:
        await eventually(lambda: len(fake.watch_calls) == 2)
        assert inf.relists == 2 and inf.errors == 1
    finally:
        await inf.stop()


async def test_a_failing_handler_does_not_stop_the_informer(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([], "1"))
    fake.watches = [[{"type": "ADDED", "object": cm("a", "2")}, {"type": "ADDED", "object": cm("b", "3")}]]
    inf = informer(fake)

    @inf.on_add
    async def boom(obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    events = Events(inf)
    inf.start()
    try:
        await eventually(lambda: len(events.seen) == 2)
        assert inf.get("ns", "b") is not None
    finally:
        await inf.stop()


async def test_handlers_must_be_registered_before_start(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([], "1"))
    inf = informer(fake)
    inf.start()
    try:
        with pytest.raises(RuntimeError, match="before start"):
            inf.on_add(lambda obj: asyncio.sleep(0))
        assert inf.running
    finally:
        await inf.stop()
    assert not inf.running
    await inf.stop()  # idempotent


async def test_apply_rejects_malformed_events_and_raises_gone(fake: FakeApi) -> None:
    inf = informer(fake)
    with pytest.raises(ValueError):
        await inf.apply({"type": "ADDED"})
    with pytest.raises(Gone):
        await inf.apply({"type": "ERROR", "object": {"code": 410, "message": "Expired"}})


async def test_cluster_scoped_resources_ignore_namespaces(fake: FakeApi) -> None:
    namespaces = Resource("", "v1", "namespaces", False, "Namespace")
    fake.route("GET", "/api/v1/namespaces", {"kind": "NamespaceList", "metadata": {"resourceVersion": "3"},
                                            "items": [{"metadata": {"name": "a", "resourceVersion": "3"}}]})
    inf = Informer(fake, namespaces, "ignored")
    await inf.relist()
    assert inf.namespace is None
    assert inf.get("whatever", "a") == {"metadata": {"name": "a", "resourceVersion": "3"},
                                        "apiVersion": "v1", "kind": "Namespace"}
    assert len(inf.list("whatever")) == 1


async def test_managed_fields_are_dropped_unless_kept(fake: FakeApi) -> None:
    heavy = cm("a", "2")
    heavy["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]
    fake.route("GET", PATH, page([heavy], "2"))
    inf = informer(fake)
    await inf.relist()
    newer = {**heavy, "metadata": {**heavy["metadata"], "resourceVersion": "3"}}
    await inf.apply({"type": "MODIFIED", "object": newer})
    assert "managedFields" not in inf.get("ns", "a")["metadata"]  # type: ignore[index]
    kept = informer(fake, keep_managed_fields=True)
    await kept.relist()
    assert kept.get("ns", "a")["metadata"]["managedFields"]  # type: ignore[index]


async def test_a_compact_cache_keeps_json_text_and_hands_out_copies(fake: FakeApi) -> None:
    fake.route("GET", PATH, page([cm("a", "10", k="1")], "10"))
    inf = informer(fake, compact=True)
    inf.start()
    try:
        await asyncio.wait_for(inf.synced.wait(), 1)
        assert isinstance(inf._cache["ns"]["a"], bytes)
        got = inf.get("ns", "a")
        assert got is not None and got["data"] == {"k": "1"}
        got["data"]["k"] = "changed by a caller"
        assert inf.get("ns", "a")["data"] == {"k": "1"}  # type: ignore[index]
        assert [o["data"] for o in inf.list("ns")] == [{"k": "1"}] and len(inf) == 1
    finally:
        await inf.stop()


def test_a_packed_object_holds_only_its_text() -> None:
    obj = cm("a", "1", k="v" * 600)
    tracemalloc.start()
    try:
        packed = _packed(obj)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert orjson.loads(packed) == obj
    assert held < 2 * len(packed)  # orjson's own bytes object would keep an 8 KiB buffer


@pytest.mark.parametrize("compact", [False, True], ids=["dicts", "compact"])
async def test_a_relist_of_many_objects_gives_the_event_loop_turns(fake: FakeApi, compact: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With a slice of 0 s every handler is followed by a turn of the event loop: a ticker task
    (standing for admission requests) runs between any two of a relist's events, on the first list
    and on a relist after a 410 (deletions, changes and additions alike)."""
    monkeypatch.setattr(pacing, "SLICE", 0.0)
    first = [cm(f"c{i:03d}", "1") for i in range(300)]
    fake.route("GET", PATH, page(first, "1"))
    inf = informer(fake, compact=compact)
    ticks = 0
    handled_at: collections.Counter[int] = collections.Counter()

    async def note(*_objs: Any) -> None:
        handled_at[ticks] += 1

    inf.on_add(note)
    inf.on_update(note)
    inf.on_delete(note)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticking = asyncio.get_running_loop().create_task(ticker())
    try:
        await inf.relist()
        # Then: 100 deleted, 100 changed, 100 kept, 100 new.
        fake.route("GET", PATH, page([*(cm(f"c{i:03d}", "2" if i < 200 else "1") for i in range(100, 300)),
                                      *(cm(f"n{i:03d}", "2") for i in range(100))], "2"))
        await inf.relist()
    finally:
        ticking.cancel()
    assert sum(handled_at.values()) == 300 + 100 + 100 + 100
    assert max(handled_at.values()) == 1
    assert len(inf) == 300


@pytest.mark.usefixtures(managed.__name__)
async def test_a_relist_after_a_410_settles_the_new_cache_out_of_the_full_collections_walk(fake: FakeApi) -> None:
    """In a process that manages the collector (serve), the objects a relist brings are frozen as
    soon as it is over, not at some later settle. They are made when the relist asks for them, so
    the first list's settle cannot have frozen them."""
    def relisted(_query: Any, _body: Any) -> dict[str, Any]:
        return page([cm("kept", "1"), *(cm(f"new-{i}", "8") for i in range(50))], "9")

    fake.route("GET", PATH, [page([cm("kept", "1")], "3"), relisted])
    fake.watches = [[api_error(410, "Gone")]]
    inf = informer(fake)
    inf.start()
    try:
        await eventually(lambda: len(fake.watch_calls) == 2)  # the relist is over: it watches again
        fresh = [inf._cache["ns"][f"new-{i}"] for i in range(50)]
        walked = {id(obj) for obj in gc.get_objects()}
        assert inf.relists == 2 and not walked & {id(obj) for obj in fresh}
    finally:
        await inf.stop()
