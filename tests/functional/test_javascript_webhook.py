"""JavaScript rules through the webhook over HTTP: many slow scripts stay within the deadline, probes
are answered while scripts run, a denial is a 403, and a policy with a syntax error is refused."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import jsonpatch
import orjson
from aiohttp.test_utils import TestClient

from kinitiras_py.webhook.app import make_app
from tests.functional.test_webhook import make_handlers, post, review

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "a", "image": "nginx"}]}}


def script_policy(name: str, source: str, failure_policy: str = "Ignore", timeout_ms: int = 100) -> dict[str, Any]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "overrideRules": [
                {"failurePolicy": failure_policy,
                 "overriders": {"javascript": {"source": source, "timeoutMs": timeout_ms}}}]}}


SPIN = "function jsa_mutate() { while (true) {} }"
LABEL = "function jsa_mutate(obj) { obj.metadata.labels = {...obj.metadata.labels, js: 'yes'}; return {Result: obj} }"


async def test_many_slow_scripts_share_the_deadline(aiohttp_client: Any) -> None:
    # Twenty scripts of 2 s each would take 40 s; the request has 1 s for its scripts.
    policies = [script_policy(f"spin-{i:02}", SPIN, timeout_ms=2000) for i in range(20)]
    client: TestClient = await aiohttp_client(make_app(make_handlers(
        [*policies, script_policy("zz-label", LABEL)], deadline=1.5, lookup_timeout=1.0)))
    started = time.monotonic()
    status, doc = await post(client, "/mutate", review("CREATE", POD))
    assert time.monotonic() - started < 5  # far below the scripts' 40 s
    response = doc["response"]
    assert status == 200 and response["allowed"] is True  # every rule is Ignore
    warnings = " ".join(response.get("warnings", []))
    assert "no time is left for the script within the request's deadline" in warnings
    # The last script found no time either: nothing was applied, and nothing half-applied.
    assert "patch" not in response


async def test_probes_answer_while_a_script_runs(aiohttp_client: Any) -> None:
    client: TestClient = await aiohttp_client(make_app(make_handlers(
        [script_policy("spin", SPIN, timeout_ms=1500)], deadline=5, lookup_timeout=4)))
    mutating = asyncio.create_task(post(client, "/mutate", review("CREATE", POD)))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    health = await client.get("/healthz")
    # A probe stuck behind the script would wait about 1.3 s more.
    assert health.status == 200 and time.monotonic() - started < 1.0 and not mutating.done()
    status, doc = await mutating
    assert status == 200 and doc["response"]["allowed"] is True
    # Stopped by its CPU-time limit, or given up on at the request's deadline on a very busy machine.
    warnings = " ".join(doc["response"]["warnings"])
    assert "ran longer than its 1500 ms limit" in warnings or "its deadline passed" in warnings


async def test_a_result_is_sent_as_a_patch_and_a_denial_as_403(aiohttp_client: Any) -> None:
    deny = ("function jsa_mutate(obj) { if (obj.metadata.name === 'no') "
            "return {Allowed: false, Message: 'not this one'} }")
    client: TestClient = await aiohttp_client(make_app(make_handlers(
        [script_policy("a-label", LABEL, "Fail"), script_policy("b-deny", deny, "Ignore")])))
    status, doc = await post(client, "/mutate", review("CREATE", POD))
    response = doc["response"]
    assert status == 200 and response["allowed"] is True
    patch = orjson.loads(base64.b64decode(response["patch"]))
    assert jsonpatch.apply_patch(POD, patch)["metadata"]["labels"] == {"js": "yes"}
    refused = {**POD, "metadata": {**POD["metadata"], "name": "no"}}
    status, doc = await post(client, "/mutate", review("CREATE", refused))
    response = doc["response"]
    assert status == 200 and response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == "policy ClusterOverridePolicy b-deny, rule 0: not this one"


async def test_a_policy_with_a_syntax_error_is_refused_with_its_line(aiohttp_client: Any) -> None:
    client: TestClient = await aiohttp_client(make_app(make_handlers([])))
    broken = script_policy("broken", "function jsa_mutate(obj) {\n\n  return obj +;\n}")
    _status, doc = await post(client, "/validate", review("CREATE", broken))
    response = doc["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "spec.overrideRules[0].overriders.javascript.source: line 3: SyntaxError" in response["status"]["message"]


async def test_admitting_a_policy_waits_for_its_scripts_no_longer_than_the_deadline(aiohttp_client: Any) -> None:
    # Its top level may run 500 ms of CPU time; the webhook's 0.2 s deadline bounds the wait for it.
    client: TestClient = await aiohttp_client(make_app(make_handlers([], deadline=0.2)))
    looping = script_policy("looping", "while (true) {}\n" + SPIN, timeout_ms=2000)
    # quickjs' limit counts the process' CPU time, so waiting for the load would cost at least
    # 0.5 s of it; answering at the deadline costs what one spinning thread ran by then, about
    # 0.2 s, and less on a loaded machine, where a wall-clock bound would not hold.
    started = time.process_time()
    _status, doc = await post(client, "/validate", review("CREATE", looping))
    assert time.process_time() - started < 0.45
    response = doc["response"]
    assert response["allowed"] is False and "its deadline passed" in response["status"]["message"]
