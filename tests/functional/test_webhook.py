"""The webhook through real HTTP (aiohttp test server), with a static store behind the pipeline."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient

from kinitiras_py.admission.engine import Engine
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook.app import MAX_BODY_BYTES, make_app
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics

OVERSELL = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: oversell}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {type: resourcesOversell, operation: replace, resourcesOversell: {cpuFactor: "0.5"}}
""")
DENY_NS = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: protect-ns}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Namespace}]
  validateRules:
  - targetOperations: [DELETE]
    cel: "!has(object.metadata.labels) || !('protected' in object.metadata.labels)"
    message: protected namespaces cannot be deleted
""")
WARN_CM = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: warn-cm}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - validationActions: [Warn]
    cel: "has(object.data)"
    message: configmaps should carry data
""")


def owner_policy(failure_policy: str) -> dict[str, Any]:
    return yaml.safe_load(f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: owner-{failure_policy.lower()}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Secret}}]
  overrideRules:
  - failurePolicy: {failure_policy}
    overriders:
      template:
        type: labels
        operation: replace
        path: owner
        valueRef: {{from: owner, path: metadata.name}}
""")


class SlowStore(StaticStore):
    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        await asyncio.sleep(5)
        return None

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[dict[str, Any]]:
        await asyncio.sleep(5)
        return []


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
              "spec": {"template": {"spec": {"containers": [
                  {"name": "a", "image": "x", "resources": {"limits": {"cpu": "2"}}},
                  {"name": "b", "image": "y", "resources": {"limits": {"cpu": "500m"}}}]}}}}


def review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None,
           api_version: str = "admission.k8s.io/v1", uid: str = "uid-1") -> bytes:
    request: dict[str, Any] = {"uid": uid, "operation": operation, "namespace": "default",
                               "userInfo": {"username": "alice"}}
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "request": request})


def api_review(operation: str, obj: dict[str, Any], uid: str = "uid-1") -> bytes:
    """A review laid out as the API server writes it: kind first, the request's uid first."""
    kind = {"group": "", "version": "v1", "kind": obj["kind"]}
    request = {"uid": uid, "kind": kind, "resource": {"group": "", "version": "v1", "resource": "things"},
               "requestKind": kind, "name": "", "namespace": "default", "operation": operation,
               "userInfo": {"username": "alice"}, "object": obj, "oldObject": None, "dryRun": False,
               "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}
    return orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})


def make_handlers(policies: list[dict[str, Any]], store: StaticStore | None = None, deadline: float = 2.5,
                  lookup_timeout: float = 2.0) -> Handlers:
    engine = Engine([compile_policy(p) for p in policies], store=store or StaticStore(), lookup_timeout=lookup_timeout)
    return Handlers(engine, Metrics(), deadline=deadline)


@pytest.fixture
async def client(aiohttp_client: Any) -> TestClient:
    return await aiohttp_client(make_app(make_handlers([OVERSELL, DENY_NS, WARN_CM])))


async def post(client: TestClient, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
    return resp.status, await resp.json()


async def test_mutate_returns_a_patch_that_yields_the_oversold_object(client: TestClient) -> None:
    status, doc = await post(client, "/mutate", review("CREATE", DEPLOYMENT))
    assert status == 200
    response = doc["response"]
    assert response["uid"] == "uid-1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = orjson.loads(base64.b64decode(response["patch"]))
    result = jsonpatch.apply_patch(DEPLOYMENT, patch)
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["resources"]["requests"] for c in containers] == [{"cpu": "1"}, {"cpu": "250m"}]


async def test_no_patch_key_when_nothing_changes_and_v1beta1_is_echoed(client: TestClient) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
    _status, doc = await post(client, "/mutate", review("CREATE", pod, api_version="admission.k8s.io/v1beta1"))
    assert doc["apiVersion"] == "admission.k8s.io/v1beta1"
    assert doc["response"] == {"uid": "uid-1", "allowed": True}


async def test_policy_admission_renders_cel_and_refuses_malformed(client: TestClient) -> None:
    _status, doc = await post(client, "/mutate", review("CREATE", OVERSELL))
    patch = orjson.loads(base64.b64decode(doc["response"]["patch"]))
    assert [op["path"] for op in patch] == ["/spec/overrideRules/0/overriders/renderedCel"]
    assert "scale(\"0.5\", \"0.001\")" in patch[0]["value"]
    bad = orjson.loads(orjson.dumps(OVERSELL))
    bad["spec"]["overrideRules"][0]["overriders"]["template"]["resourcesOversell"]["cpuFactor"] = "1.5"
    bad["spec"]["overrideRules"][0]["overriders"]["cue"] = "patches: [1 / 2]"
    for endpoint in ("/mutate", "/validate"):
        _status, doc = await post(client, endpoint, review("CREATE", bad))
        response = doc["response"]
        assert response["allowed"] is False and response["status"]["code"] == 403
        message = response["status"]["message"]
        assert "spec.overrideRules[0].overriders.template.resourcesOversell.cpuFactor" in message
        assert "spec.overrideRules[0].overriders.cue" in message
        assert "line 1, column 13: `/` is not supported" in message


async def test_validate_denies_with_the_policy_message_and_warns(client: TestClient) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"protected": "y"}}}
    _status, doc = await post(client, "/validate", review("DELETE", None, old=ns))
    response = doc["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == "ClusterValidatePolicy protect-ns: protected namespaces cannot be deleted"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    _status, doc = await post(client, "/validate", review("CREATE", cm))
    assert doc["response"]["allowed"] is True
    assert doc["response"]["warnings"] == ["ClusterValidatePolicy warn-cm: configmaps should carry data"]


@pytest.mark.parametrize(("body", "fragment"), [
    (b"{not json", "not JSON"),
    (b"[]", "not a JSON object"),
    (orjson.dumps({"apiVersion": "v1", "kind": "Pod"}), "expected an AdmissionReview"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), "has no request"),
    (review("CREATE", None), "carries no object"),
    (review("PATCH", {"kind": "Pod"}), "unsupported operation 'PATCH'"),
    (review("UPDATE", {"kind": "Pod"}), "carries no oldObject"),
])
async def test_malformed_requests_get_a_well_formed_400(client: TestClient, body: bytes, fragment: str) -> None:
    status, doc = await post(client, "/mutate", body)
    assert status == 200
    assert doc["kind"] == "AdmissionReview"
    assert doc["response"]["allowed"] is False
    assert doc["response"]["status"]["code"] == 400
    assert fragment in doc["response"]["status"]["message"]


async def test_connect_is_allowed_untouched(client: TestClient) -> None:
    for endpoint in ("/mutate", "/validate"):
        _status, doc = await post(client, endpoint, review("CONNECT", None))
        assert doc["response"] == {"uid": "uid-1", "allowed": True}


async def test_oversized_request_is_refused_with_a_413_admission_review(client: TestClient) -> None:
    padding = {"data": {"blob": "x" * (MAX_BODY_BYTES + 1)}}
    body = review("CREATE", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, **padding})
    for data in (body, b"x" * (MAX_BODY_BYTES + 1)):
        resp = await client.post("/mutate", data=data, headers={"Content-Type": "application/json"})
        assert resp.status == 200
        doc = await resp.json()
        assert doc["kind"] == "AdmissionReview" and doc["apiVersion"] == "admission.k8s.io/v1"
        assert doc["response"]["uid"] == ("uid-1" if data is body else "")
        assert doc["response"]["allowed"] is False
        assert doc["response"]["status"]["code"] == 413 and "exceeds" in doc["response"]["status"]["message"]


@pytest.mark.parametrize(("failure_policy", "allowed"), [("Fail", False), ("Ignore", True)])
async def test_lookup_overrun_follows_failure_policy(aiohttp_client: Any, failure_policy: str, allowed: bool) -> None:
    handlers = make_handlers([owner_policy(failure_policy)], SlowStore(), deadline=2.5, lookup_timeout=0.3)
    client = await aiohttp_client(make_app(handlers))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s", "namespace": "default",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u", "controller": True}]}}
    _status, doc = await post(client, "/mutate", review("CREATE", secret))
    response = doc["response"]
    assert response["allowed"] is allowed
    text = response["status"]["message"] if not allowed else response["warnings"][0]
    assert f"ClusterOverridePolicy owner-{failure_policy.lower()}" in text
    assert "took longer than 0.3 s" in text


async def test_internal_deadline_answers_before_the_api_server_gives_up(aiohttp_client: Any) -> None:
    handlers = make_handlers([owner_policy("Fail")], SlowStore(), deadline=0.2, lookup_timeout=5)
    client = await aiohttp_client(make_app(handlers))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s", "namespace": "default",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}
    _status, doc = await post(client, "/mutate", review("CREATE", secret))
    assert doc["response"]["allowed"] is False
    assert "deadline" in doc["response"]["status"]["message"]


async def test_the_deadline_in_force_is_the_handlers_own_even_when_changed(aiohttp_client: Any) -> None:
    handlers = make_handlers([owner_policy("Fail")], SlowStore(), deadline=30, lookup_timeout=5)
    handlers.deadline = 0.2  # the watchdog keeps no copy of its own
    client = await aiohttp_client(make_app(handlers))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s", "namespace": "default",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}
    started = time.monotonic()
    _status, doc = await post(client, "/mutate", review("CREATE", secret))
    assert time.monotonic() - started < 10  # the deadline it was made with is 30 s
    assert doc["response"]["status"]["message"] == "kinitiras-py did not finish within its 0.2 s deadline"


async def test_unexpected_error_is_a_denial_not_a_traceback(aiohttp_client: Any) -> None:
    handlers = make_handlers([OVERSELL])

    async def boom(*_args: Any) -> Any:
        raise RuntimeError("kaboom")

    handlers.engine.mutate = boom  # type: ignore[method-assign,assignment]
    client = await aiohttp_client(make_app(handlers))
    status, doc = await post(client, "/mutate", review("CREATE", DEPLOYMENT, uid="uid-500"))
    assert status == 200
    # The API server rejects an answer whose uid differs from the request's.
    assert doc["response"]["uid"] == "uid-500"
    assert doc["response"]["allowed"] is False
    assert doc["response"]["status"] == {"status": "Failure", "code": 500, "reason": "InternalError",
                                         "message": "kinitiras-py internal error: kaboom"}


@pytest.mark.parametrize(("endpoint", "trouble"), [("/mutate", "deadline"), ("/mutate", "error"),
                                                   ("/validate", "error")])
async def test_with_failure_policy_ignore_a_request_the_webhook_cannot_finish_is_admitted_unchanged(
        aiohttp_client: Any, endpoint: str, trouble: str) -> None:
    # As the API server treats a webhook call that failed under failurePolicy Ignore.
    if trouble == "deadline":
        handlers = make_handlers([owner_policy("Fail")], SlowStore(), deadline=0.2, lookup_timeout=5)
        obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "s", "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]}}
        reason = "kinitiras-py did not finish within its 0.2 s deadline"
    else:
        handlers, obj, reason = make_handlers([OVERSELL]), DEPLOYMENT, "kinitiras-py internal error: kaboom"

        async def boom(*_args: Any) -> Any:
            raise RuntimeError("kaboom")

        handlers.engine.mutate = handlers.engine.validate = boom  # type: ignore[method-assign,assignment]
    handlers.failure_policy = "Ignore"
    client = await aiohttp_client(make_app(handlers))
    status, doc = await post(client, endpoint, review("CREATE", obj, uid="uid-7"))
    assert status == 200
    assert doc["response"] == {"uid": "uid-7", "allowed": True,
                               "warnings": [f"{reason} (failurePolicy Ignore: admitted unchanged)"]}


async def test_readyz_healthz_and_metrics(aiohttp_client: Any) -> None:
    state = {"ready": False}
    handlers = make_handlers([OVERSELL])
    handlers.ready = lambda: state["ready"]
    client = await aiohttp_client(make_app(handlers))
    assert (await client.get("/readyz")).status == 503
    state["ready"] = True
    assert (await client.get("/readyz")).status == 200
    assert (await client.get("/healthz")).status == 200
    await post(client, "/mutate", review("CREATE", DEPLOYMENT))
    text = await (await client.get("/metrics")).text()
    assert 'kinitiras_webhook_requests_total{code="200",endpoint="mutate"} 1.0' in text
    assert 'kinitiras_policy_patched_total{policy="ClusterOverridePolicy oversell"} 1.0' in text


async def test_object_without_namespace_gets_the_request_namespace_for_matching(aiohttp_client: Any) -> None:
    policy = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: label-pods, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      template: {type: labels, operation: add, path: team, value: {string: a}}
""")
    client = await aiohttp_client(make_app(make_handlers([policy])))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}}
    body = orjson.loads(review("CREATE", pod))
    body["request"]["namespace"] = "team-a"
    _status, doc = await post(client, "/mutate", orjson.dumps(body))
    # The namespace is not part of the patch: the API server fills it in itself.
    assert orjson.loads(base64.b64decode(doc["response"]["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "a"}}]
    body["request"]["namespace"] = "team-b"
    _status, doc = await post(client, "/mutate", orjson.dumps(body))
    assert "patch" not in doc["response"]
