"""Expensive CEL through the webhook: refused at admission, bounded while it runs, probes answered."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kinitiras_py.engine.evaluation import bounds
from kinitiras_py.engine.running import overriding
from kinitiras_py.webhook.app import make_app
from tests.functional.test_webhook import make_handlers, post, review

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "a", "image": "nginx"}]}}
# Admitted (about 8,300,000 of the 10,000,000 budget) but slow: 6,000 uncached quantity parses
# and scalings, a few tenths of a second. Our functions run Python, so a worker thread lets the
# event loop in between them.
# It reads the object, so admission does not evaluate it.
SLOW = ("cel.bind(n, size(object.metadata.name) * 0, range(1000).exists(i, range(6).exists(j,"
        " quantity(string(i * 6 + j + n) + 'Mi').scale('0.5', '1') == 'x'))"
        " ? [{'op': 'add', 'path': '/metadata/labels', 'value': {'a': 'b'}}] : [])")


def _policy(expression: str, failure_policy: str = "Fail") -> dict[str, Any]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": "slow"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "overrideRules": [{"failurePolicy": failure_policy, "overriders": {"cel": expression}}]}}


async def test_the_issue_repro_is_refused_with_its_field_and_estimate(aiohttp_client: Any) -> None:
    client = await aiohttp_client(make_app(make_handlers([])))
    _status, doc = await post(client, "/validate", review("CREATE", _policy("range(12000000).size() > 0 ? [] : []")))
    response = doc["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert "spec.overrideRules[0].overriders.cel" in message
    assert re.search(r"estimated cost [0-9,]{10} exceeds the budget of 10,000,000", message)


async def test_healthz_answers_while_a_slow_rule_runs(aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    started, finished = threading.Event(), threading.Event()
    original = overriding.mutate

    def watched(*args: Any) -> Any:
        started.set()
        try:
            return original(*args)
        finally:
            finished.set()

    monkeypatch.setattr(overriding, "mutate", watched)
    # Ignore: on a loaded machine the rule may reach its time limit; either way the Pod is allowed.
    client: TestClient = await aiohttp_client(make_app(make_handlers([_policy(SLOW, "Ignore")], deadline=30)))
    mutating = asyncio.create_task(post(client, "/mutate", review("CREATE", POD)))
    for _ in range(10_000):  # the loop runs while the rule does, or this never sees it start
        if started.is_set():
            break
        await asyncio.sleep(0.001)
    assert started.is_set()
    health = await client.get("/healthz")
    assert health.status == 200 and not finished.is_set()  # answered before the rule was over
    status, doc = await mutating
    assert status == 200 and doc["response"]["allowed"] is True
    assert finished.is_set()


@pytest.mark.parametrize(("failure_policy", "allowed"), [("Fail", False), ("Ignore", True)])
async def test_a_rule_past_its_time_limit_follows_its_failure_policy(
        aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch, failure_policy: str, allowed: bool) -> None:
    monkeypatch.setattr(bounds, "TIME_LIMIT", 0.01)
    client = await aiohttp_client(make_app(make_handlers([_policy(SLOW, failure_policy)], deadline=30)))
    status, doc = await post(client, "/mutate", review("CREATE", POD))
    response = doc["response"]
    assert status == 200 and response["allowed"] is allowed
    text = response.get("status", {}).get("message", "") + " ".join(response.get("warnings", []))
    assert "the evaluation ran longer than its 0.01 s limit" in text
