"""A rule sees the object the rules before it made, whatever the caches kept (issue 21).

A Widget whose ``spec.selector`` is empty, and three ClusterOverridePolicies that run in name
order: ``a-reader`` reads the selector through a computed key, ``b-writer`` adds that key and
``c-reader`` reads it again. ``c-reader`` must see what ``b-writer`` wrote, as it does when run
alone on ``b-writer``'s output, offline and through the webhook, the first time and when the
answer comes from the caches.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
import pytest

from kinitiras_py.admission.engine import Engine
from kinitiras_py.engine.evaluation import conversionrecord
from kinitiras_py.engine.evaluation.conversionrecord import ConversionRecord
from kinitiras_py.offline.apply import Case, run
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics

ZONE = 'object.spec.selector[?("zone-" + object.metadata.name)].orValue("none")'
WRITES = f'[{{"op": "add", "path": "/metadata/annotations/%s", "value": {ZONE}}}]'
"""A reader that writes what it read into an annotation."""
ONLY_READS = f'{ZONE} == "none" ? [] : [{{"op": "add", "path": "/metadata/annotations/%s", "value": "seen"}}]'
"""A reader that changes nothing while the zone is missing."""


def policy(name: str, overriders: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "example.io/v1", "kind": "Widget"}],
                     "overrideRules": [{"overriders": overriders}]}}


def policies(first: str) -> list[dict[str, Any]]:
    return [policy("a-reader", {"cel": first % "a"}),
            policy("b-writer", {"plaintext": [{"op": "add", "path": "/spec/selector/zone-w1", "value": "eu"}]}),
            policy("c-reader", {"cel": WRITES % "c"})]


def widget(selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w1", "annotations": {}},
            "spec": {"selector": selector}}


@pytest.mark.parametrize("first", [WRITES, ONLY_READS], ids=["a-writes", "a-only-reads"])
def test_offline_the_last_reader_sees_the_key_written_before_it(first: str) -> None:
    alone = run(Case([policies(first)[2]], widget({"zone-w1": "eu"})))
    assert alone.object["metadata"]["annotations"] == {"c": "eu"}
    assert run(Case(policies(first), widget({}))).object["metadata"]["annotations"]["c"] == "eu"
    engine = Engine(policies(first))
    for _ in range(2):  # the second time, the CEL results are remembered
        decision = engine.evaluate_sync(widget({})).decision
        assert decision.object["metadata"]["annotations"]["c"] == "eu"
        assert decision.object["spec"]["selector"] == {"zone-w1": "eu"}
    assert engine.cel_results.hits > 0


def review(uid: str) -> bytes:
    kind = {"group": "example.io", "version": "v1", "kind": "Widget"}
    return orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": uid, "kind": kind, "resource": {"group": "example.io", "version": "v1", "resource": "widgets"},
        "requestKind": kind, "operation": "CREATE", "namespace": "", "userInfo": {"username": "u"},
        "object": widget({}), "oldObject": None, "dryRun": False}})


@pytest.mark.parametrize("first", [WRITES, ONLY_READS], ids=["a-writes", "a-only-reads"])
def test_through_the_webhook_the_last_reader_sees_the_key_written_before_it(first: str) -> None:
    engine = Engine(policies(first))
    handlers = Handlers(engine, Metrics())
    for uid, cache in (("u-1", None), ("u-2", engine.answers), ("u-3", engine.mutations)):
        if cache is engine.mutations:  # the remembered answers off: the memory of mutations answers
            engine.answers.configure(0)
        hits = 0 if cache is None else cache.hits
        out, code = asyncio.run(handlers.answer("mutate", review(uid)))
        assert code == 200
        assert cache is None or cache.hits == hits + 1
        response = orjson.loads(out)["response"]
        patch = orjson.loads(base64.b64decode(response["patch"]))
        assert {"op": "add", "path": "/metadata/annotations/c", "value": "eu"} in patch


def test_a_change_the_read_record_cannot_describe_keeps_no_conversion_and_nothing_is_remembered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversionrecord, "CHANGING", "no variable")  # no change of the object is described
    made: list[ConversionRecord] = []
    real = conversionrecord.ConversionRecord.__init__

    def recording(self: ConversionRecord, undescribed: list[str] | None = None) -> None:
        real(self, undescribed)
        made.append(self)

    monkeypatch.setattr(conversionrecord.ConversionRecord, "__init__", recording)
    engine = Engine(policies(WRITES))
    handlers = Handlers(engine, Metrics())
    for uid in ("u-1", "u-2"):
        out, code = asyncio.run(handlers.answer("mutate", review(uid)))
        response = orjson.loads(out)["response"]
        assert code == 200 and response["allowed"]
        patch = orjson.loads(base64.b64decode(response["patch"]))
        assert {"op": "add", "path": "/metadata/annotations/c", "value": "eu"} in patch
    # Each request's record noted the change it could not describe and kept nothing across it.
    assert len(made) == 2 and all(r.undescribed and r.changes and r.kept_count == 0 for r in made)
    assert (engine.answers.hits, engine.mutations.hits, len(engine.answers)) == (0, 0, 0)
