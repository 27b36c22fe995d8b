"""Admission-time Audit and Warn results reach the PolicyReports through the webhook, off the request path."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import yaml

from kinitiras_py.admission.results import ResourceRef
from kinitiras_py.reports.admission import AdmissionFeed
from kinitiras_py.reports.sink import MemorySink
from kinitiras_py.webhook.app import make_app
from tests.functional.test_webhook import make_handlers, post, review

CHECKS = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: cm-checks}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - validationActions: [Audit]
    cel: "has(object.data)"
    message: needs data
  - validationActions: [Warn]
    cel: "has(object.metadata.labels)"
    message: needs labels
  - validationActions: [Deny]
    cel: "object.metadata.name != 'forbidden'"
    message: forbidden name
""")


def cm(name: str, uid: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def dry(body: bytes) -> bytes:
    doc = orjson.loads(body)
    doc["request"]["dryRun"] = True
    return orjson.dumps(doc)


def said(sink: MemorySink) -> dict[tuple[str, str], dict[tuple[int, str], str]]:
    out = {}
    for key in sink.ledger:
        record = sink.ledger.get(key)
        assert record is not None
        out[(record.resource.name, record.uid)] = {(s.result.rule, s.result.policy.name): s.result.result
                                                   for s in record.results()}
    return out


async def test_audit_and_warn_results_of_allowed_requests_are_reported(aiohttp_client: Any) -> None:
    handlers = make_handlers([CHECKS])
    sink = MemorySink()
    feed = handlers.findings = AdmissionFeed(sink, handlers.engine.validations)
    client = await aiohttp_client(make_app(handlers))
    status, doc = await post(client, "/validate", review("CREATE", cm("bare")))
    assert status == 200 and doc["response"]["allowed"] is True
    assert said(sink) == {}  # queued only: nothing was reported while the request was answered
    fixed = cm("fixed", "u-2", data={"k": "v"})
    fixed["metadata"]["labels"] = {"a": "b"}
    for body in (review("UPDATE", fixed, cm("fixed", "u-2")),
                 review("CREATE", cm("forbidden")),  # denied: no object stored, nothing reported
                 dry(review("CREATE", cm("dry-run"))),
                 review("DELETE", None, cm("gone", "u-3"))):
        await post(client, "/validate", body)
    await feed.drain()
    assert said(sink) == {
        # The Deny rule is not an admission finding: only Audit and Warn rules are reported.
        ("bare", ""): {(0, "cm-checks"): "fail", (1, "cm-checks"): "warn"},
        ("fixed", "u-2"): {(0, "cm-checks"): "pass", (1, "cm-checks"): "pass"},
    }
    (report,) = sink.reports()  # the one with a uid
    assert report["metadata"]["name"] == "u-2" and report["summary"]["pass"] == 2


async def test_the_feed_runs_as_a_task_and_a_full_queue_drops_the_oldest(aiohttp_client: Any) -> None:
    handlers = make_handlers([CHECKS])
    sink = MemorySink()
    feed = AdmissionFeed(sink, handlers.engine.validations, capacity=2)
    handlers.findings = feed
    client = await aiohttp_client(make_app(handlers))
    for name in ("a", "b", "c"):
        await post(client, "/validate", review("CREATE", cm(name)))
    assert feed.dropped == 1
    feed.start()
    try:
        for _ in range(100):
            if len(sink.ledger) == 2:
                break
            await asyncio.sleep(0.01)
    finally:
        await feed.stop()
    assert {key[1] for key in sink.ledger} == {ResourceRef("v1", "ConfigMap", "default", n) for n in "bc"}
