"""The background scanner against informers fed by the test and an in-memory report sink."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench.scanscale import Preloaded
from kinitiras_py.cluster.client import Resource
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.scan import scanner as scanner_module
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from tests.compiling import compile_all
from tests.scanfakes import MemorySink
from tests.unit.registration.test_rules import FakeCatalog

PODS = Resource("", "v1", "pods", True, "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
GROUP = "policy.kcloudlabs.io/v1alpha1"


def pod(name: str, labels: dict[str, str] | None = None, version: str = "1") -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": version}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c"}]}}


def owner_policy(kind: str = "Pod", actions: tuple[str, ...] = ("Audit",)) -> Obj:
    return {"apiVersion": GROUP, "kind": "ClusterValidatePolicy", "metadata": {"name": "owner", "uid": "p1"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": kind}], "validateRules": [
                {"cel": "has(object.metadata.labels) && 'owner' in object.metadata.labels",
                 "message": "an owner label is required", "validationActions": list(actions)},
                {"cel": "request.userInfo.username != 'bob'", "message": "not bob"},
                {"cel": "object.metadata.name.startsWith('x') ? object.missing.field : true",
                 "failurePolicy": "Ignore"}]}}


LABEL: Obj = {"apiVersion": GROUP, "kind": "ClusterOverridePolicy", "metadata": {"name": "label"},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "overrideRules": [{
                  "overriders": {"plaintext": [{"op": "add", "path": "/metadata/annotations",
                                                "value": {"scanned": "yes"}}]}}]}}


async def until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait until ``check()`` holds; fail the test after ``seconds``."""
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.01)


@pytest.fixture
async def scan() -> AsyncIterator[tuple[Scanner, MemorySink]]:
    sink = MemorySink()
    scanner = Scanner(None, sink, Context(StaticStore()), FakeCatalog(), period=3600, cpu_share=1.0,
                      metrics=ScanMetrics(CollectorRegistry()),
                      make_informer=Preloaded)
    try:
        yield scanner, sink
    finally:
        await scanner.stop()


async def feed(scanner: Scanner, resource: Resource, kind: str, obj: Obj) -> None:
    await scanner.feed.informers[resource].apply({"type": kind, "object": copy.deepcopy(obj)})


async def policy(scanner: Scanner, doc: Obj | None, kind: str = "ClusterValidatePolicy", name: str = "owner") -> None:
    await scanner.on_policy(kind, None, name, compile_all([doc])[0] if doc is not None else None)


async def leading(scanner: Scanner, doc: Obj, kind: str = "ClusterValidatePolicy", name: str = "owner") -> None:
    """Give the scanner the policy, make it lead, and wait until it watches Pods."""
    await policy(scanner, doc, kind, name)
    await scanner.start()
    await until(lambda: PODS in scanner.feed.informers)


async def test_existing_objects_get_fail_pass_skip_and_error_then_follow_changes(
        scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    await leading(scanner, owner_policy())
    for one in (pod("good", {"owner": "a"}), pod("bad"), pod("xbad", {"owner": "a"})):
        await feed(scanner, PODS, "ADDED", one)
    await until(lambda: len(sink.reports) == 3)
    assert sink.results_of("good") == {("owner", 0): "pass", ("owner", 1): "skip", ("owner", 2): "pass"}
    assert sink.results_of("bad") == {("owner", 0): "fail", ("owner", 1): "skip", ("owner", 2): "pass"}
    assert sink.results_of("xbad")[("owner", 2)] == "error"
    bad = sink.reports["uid-bad"][1]
    assert bad[0].message == "an owner label is required" and bad[0].audited and not bad[0].denied
    assert bad[1].message == "not evaluated in a background scan: cel reads request.userInfo"
    metrics = scanner.metrics
    assert metrics is not None and metrics.results.labels("fail")._value.get() == 1
    assert metrics.results.labels("skip")._value.get() == 3

    await feed(scanner, PODS, "MODIFIED", pod("bad", {"owner": "b"}, version="2"))
    await until(lambda: sink.results_of("bad")[("owner", 0)] == "pass")
    writes = len(sink.calls)
    await feed(scanner, PODS, "MODIFIED", pod("good", {"owner": "a", "other": "x"}, version="2"))
    await until(lambda: metrics.scanned._value.get() >= 5)
    await asyncio.sleep(0.05)
    assert len(sink.calls) == writes, "results that did not change are not written again"

    await feed(scanner, PODS, "DELETED", pod("bad", {"owner": "b"}, version="3"))
    await until(lambda: ("forget_resource", "uid-bad") in sink.calls)
    assert "uid-bad" not in sink.reports


async def test_a_deny_rule_that_fails_does_not_stop_the_others_and_keeps_its_actions(
        scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    await policy(scanner, owner_policy(actions=("Deny",)))
    await scanner.start()
    await until(lambda: PODS in scanner.feed.informers)
    await feed(scanner, PODS, "ADDED", pod("xbad"))
    await until(lambda: "uid-xbad" in sink.reports)
    results = sink.reports["uid-xbad"][1]
    assert [(r.rule, r.result, r.denied) for r in results] == [(0, "fail", True), (1, "skip", False),
                                                               (2, "error", False)]


async def test_override_policies_say_would_change_and_write_nothing(scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    await leading(scanner, LABEL, "ClusterOverridePolicy", "label")
    done = pod("done")
    done["metadata"]["annotations"] = {"scanned": "yes"}
    await feed(scanner, PODS, "ADDED", pod("fresh"))
    await feed(scanner, PODS, "ADDED", done)
    await until(lambda: len(sink.reports) == 2)
    fresh, kept = sink.reports["uid-fresh"][1], sink.reports["uid-done"][1]
    assert [(r.type, r.result, r.message, r.patched) for r in fresh] == [
        ("override", "pass", "would change the object", True)]
    assert [(r.result, r.message, r.patched) for r in kept] == [("pass", "leaves the object unchanged", False)]
    assert "annotations" not in scanner.feed.get((PODS, "team", "fresh"))["metadata"]  # type: ignore[index]


async def test_policy_change_rescans_and_deletion_forgets(scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    await leading(scanner, owner_policy())
    await feed(scanner, PODS, "ADDED", pod("bad"))
    await until(lambda: sink.results_of("bad").get(("owner", 0)) == "fail")
    # The policy now selects ConfigMaps: the Pod informer stops, and the Pod's results are cleared.
    await policy(scanner, owner_policy("ConfigMap"))
    await until(lambda: CONFIGMAPS in scanner.feed.informers and PODS not in scanner.feed.informers)
    await until(lambda: sink.reports["uid-bad"][1] == [])
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team", "uid": "uid-cm"}}
    await feed(scanner, CONFIGMAPS, "ADDED", cm)
    await until(lambda: sink.results_of("cm").get(("owner", 0)) == "fail")
    await policy(scanner, None)
    await until(lambda: ("forget_policy", "ClusterValidatePolicy owner") in sink.calls)
    assert sink.results_of("cm") == {}
    await until(lambda: not scanner.feed.informers)


async def test_a_new_leader_publishes_everything_again_and_a_follower_writes_nothing(
        scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    await leading(scanner, owner_policy())
    await feed(scanner, PODS, "ADDED", pod("bad"))
    await until(lambda: "uid-bad" in sink.reports)
    await scanner.on_leading(False)
    calls = len(sink.calls)
    await policy(scanner, None)
    assert len(sink.calls) == calls and not scanner.feed.informers
    await policy(scanner, owner_policy())
    sink.reports.clear()
    await scanner.on_leading(True)
    await until(lambda: PODS in scanner.feed.informers)
    await feed(scanner, PODS, "ADDED", pod("bad"))
    await until(lambda: "uid-bad" in sink.reports and scanner.passes >= 1)


async def test_full_passes_end_and_are_timed(scan: tuple[Scanner, MemorySink]) -> None:
    scanner, sink = scan
    scanner.period = 0.05
    await leading(scanner, owner_policy())
    await feed(scanner, PODS, "ADDED", pod("good", {"owner": "a"}))
    await until(lambda: scanner.passes >= 3)
    metrics = scanner.metrics
    assert metrics is not None and metrics.last_pass._value.get() > 0
    assert metrics.scanned._value.get() >= 3  # each pass scans the Pod again
    assert [c for c in sink.calls if c[0] == "publish"] == [("publish", "uid-good")]  # written once
    assert sink.calls.count(("sweep", "")) == 1  # after the first pass only: every object was published
    await scanner.stop()
    await scanner.start()  # a new term: a new leader's first pass
    await until(lambda: scanner.passes >= 1 and sink.calls.count(("sweep", "")) == 2)



async def test_the_same_version_again_scans_nothing(scan: tuple[Scanner, MemorySink]) -> None:
    scanner, _sink = scan
    compiled = compile_all([owner_policy()])[0]
    await scanner.on_policy("ClusterValidatePolicy", None, "owner", compiled)
    await scanner.start()
    await until(lambda: PODS in scanner.feed.informers)
    await feed(scanner, PODS, "ADDED", pod("good", {"owner": "a"}))
    metrics = scanner.metrics
    assert metrics is not None
    await until(lambda: metrics.scanned._value.get() == 1)
    await scanner.on_policy("ClusterValidatePolicy", None, "owner", compiled)  # its status was written
    await asyncio.sleep(0.1)
    assert metrics.scanned._value.get() == 1
    await scanner.on_policy("ClusterValidatePolicy", None, "owner", compile_all([owner_policy()])[0])
    await until(lambda: metrics.scanned._value.get() == 2)


class NotListing(Preloaded):
    """An informer that cannot list (as without RBAC for its kind) until the test lets it."""

    def start(self) -> None:
        pass


async def test_a_kind_that_cannot_be_listed_does_not_hold_the_pass_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanner_module, "SYNC_WAIT", 0.3)
    sink = MemorySink()
    scanner = Scanner(None, sink, Context(StaticStore()), FakeCatalog(), cpu_share=1.0,
                      make_informer=lambda client, resource: (Preloaded(client, resource, [pod("bad")])
                                                              if resource == PODS else NotListing(client, resource)))
    doc = owner_policy()
    doc["spec"]["resourceSelectors"].append({"apiVersion": "v1", "kind": "ConfigMap"})
    try:
        await leading(scanner, doc)
        await until(lambda: scanner.passes == 1 and "uid-bad" in sink.reports)
        late = scanner.feed.informers[CONFIGMAPS]
        await late.apply({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": "cm", "namespace": "team", "uid": "u-cm"}}})
        late.synced.set()
        await until(lambda: sink.results_of("cm").get(("owner", 0)) == "fail")
    finally:
        await scanner.stop()


class FailingOnce(MemorySink):
    """A sink whose first publish fails, as a report write refused by the API server."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the API server refused the report")
        await super().publish(resource, uid, results)


async def test_a_failed_write_is_written_again_at_the_next_pass() -> None:
    sink = FailingOnce()
    scanner = Scanner(None, sink, Context(StaticStore()), FakeCatalog(), period=0.1, cpu_share=1.0,
                      make_informer=lambda client, resource: Preloaded(client, resource, [pod("bad")]))
    try:
        await leading(scanner, owner_policy())
        await until(lambda: sink.failed and "uid-bad" in sink.reports)
        assert sink.results_of("bad")[("owner", 0)] == "fail"
    finally:
        await scanner.stop()


async def test_a_policy_removed_while_an_object_is_evaluated_loses_nothing(
        scan: tuple[Scanner, MemorySink], monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator is dropped when policies change; an evaluation under way finishes with its own."""
    scanner, sink = scan
    await leading(scanner, owner_policy())
    started, release = asyncio.Event(), asyncio.Event()
    real = scanner_module.Evaluator.results

    async def slow(self: Any, obj: Obj) -> list[RuleResult]:
        started.set()
        await release.wait()
        return await real(self, obj)

    monkeypatch.setattr(scanner_module.Evaluator, "results", slow)
    await feed(scanner, PODS, "ADDED", pod("bad"))
    await until(started.is_set)
    await policy(scanner, None)  # removed while "bad" is evaluated
    release.set()
    metrics = scanner.metrics
    assert metrics is not None
    await until(lambda: metrics.scanned._value.get() >= 1)  # finished, not failed
    await until(lambda: not sink.reports.get("uid-bad", (None, []))[1])  # and the policy's results are gone
