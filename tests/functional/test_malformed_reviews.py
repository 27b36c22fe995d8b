"""Malformed AdmissionReviews are refused at the codec with a 400 naming the field (issue 10, item 3).

Each case reached the engine before and came back as a 500 (or, for ``dryRun: "false"`` and a
numeric namespace, was silently misread). Policies matching the objects are loaded, so a review
that slipped past the codec would reach the engine.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient

from kinitiras_py.webhook.app import make_app
from kinitiras_py.webhook.shape import MAX_DEPTH
from tests.functional.test_webhook import make_handlers

LABEL_PODS = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: label-pods}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/annotations, value: {seen: "yes"}}]
""")
CHECK_PODS = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: check-pods}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  validateRules:
  - cel: "request.dryRun || object.metadata.name != 'forbidden'"
    message: "forbidden name"
""")
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}


def request(**fields: Any) -> dict[str, Any]:
    """A well-formed CREATE of POD, with ``fields`` replacing members of ``request``."""
    req: dict[str, Any] = {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                           "resource": {"group": "", "version": "v1", "resource": "pods"},
                           "operation": "CREATE", "namespace": "default", "userInfo": {"username": "alice"},
                           "object": POD, "dryRun": False}
    req.update(fields)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    for _ in range(depth):
        inner = {"a": inner}
    return inner


def with_deep_spec(depth: int) -> bytes:
    """A review whose Pod has ``spec`` nested ``depth`` levels: written as text, as orjson cannot
    serialise more than 255 levels itself."""
    marker = "__deep__"
    text = orjson.dumps(request(object={**POD, "spec": marker}))
    return text.replace(f'"{marker}"'.encode(), b'{"a":' * depth + b"{}" + b"}" * depth)


@pytest.fixture
async def client(aiohttp_client: Any) -> TestClient:
    return await aiohttp_client(make_app(make_handlers([LABEL_PODS, CHECK_PODS])))


async def answer(client: TestClient, path: str, body: bytes, content_type: str = "application/json") -> dict[str, Any]:
    resp = await client.post(path, data=body, headers={"Content-Type": content_type})
    assert resp.status == 200
    doc: dict[str, Any] = await resp.json()
    assert doc["kind"] == "AdmissionReview" and doc["apiVersion"] == "admission.k8s.io/v1"
    return doc["response"]


REPRO = (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":"Pod",'
         b'"operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}}')
POLICY_WITH_LIST_KIND = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": ["OverridePolicy"],
                         "metadata": {"name": "p", "namespace": "default"}, "spec": {}}


@pytest.mark.parametrize(("body", "fragment"), [
    (REPRO, "request.kind must be an object, got string"),
    (orjson.dumps(request(kind=7)), "request.kind must be an object, got number"),
    (orjson.dumps(request(kind=["Pod"])), "request.kind must be an object, got array"),
    (orjson.dumps(request(kind={"group": "", "version": 1, "kind": "Pod"})), "request.kind.version must be a string"),
    (orjson.dumps(request(object=POLICY_WITH_LIST_KIND)), "request.object.kind must be a string, got array"),
    (orjson.dumps(request(object={**POD, "metadata": {"name": "p", "labels": 5}})),
     "request.object.metadata.labels must be an object, got number"),
    (orjson.dumps(request(object={**POD, "metadata": {"name": "p", "labels": True}})),
     "request.object.metadata.labels must be an object, got bool"),
    (orjson.dumps(request(object={**POD, "metadata": {"name": "p", "labels": {"a": 1}}})),
     "request.object.metadata.labels['a'] must be a string, got number"),
    (orjson.dumps(request(object={**POD, "metadata": {"name": ["p"]}})),
     "request.object.metadata.name must be a string, got array"),
    (orjson.dumps(request(operation="UPDATE", oldObject={**POD, "metadata": {"annotations": {"a": None}}})),
     "request.oldObject.metadata.annotations['a'] must be a string, got null"),
    (with_deep_spec(MAX_DEPTH + 60),
     f"request.object is nested deeper than {MAX_DEPTH} levels (at request.object.spec.a.a"),
    (orjson.dumps(request(dryRun="false")), "request.dryRun must be a bool, got string"),
    (orjson.dumps(request(namespace=5)), "request.namespace must be a string, got number"),
    (orjson.dumps(request(userInfo={"username": "a", "groups": "system:masters"})),
     "request.userInfo.groups must be an array of strings, got string"),
], ids=["kind-string-repro", "kind-number", "kind-list", "kind-version-number", "policy-kind-list", "labels-number",
        "labels-bool", "label-value-number", "name-list", "old-annotation-null", "too-deep", "dry-run-string",
        "namespace-number", "groups-string"])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
async def test_malformed_reviews_get_a_400_naming_the_field(client: TestClient, path: str, body: bytes,
                                                            fragment: str) -> None:
    response = await answer(client, path, body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400, response["status"]
    assert fragment in response["status"]["message"]
    assert response["uid"] == orjson.loads(body)["request"]["uid"]


async def test_depth_below_the_bound_is_served(client: TestClient) -> None:
    response = await answer(client, "/mutate", orjson.dumps(request(object={**POD, "spec": nested(MAX_DEPTH - 2)})))
    assert response["allowed"] is True and "patch" in response


async def test_dry_run_true_is_read_as_true(client: TestClient) -> None:
    forbidden = {**POD, "metadata": {"name": "forbidden", "namespace": "default"}}
    assert (await answer(client, "/validate", orjson.dumps(request(object=forbidden))))["allowed"] is False
    assert (await answer(client, "/validate", orjson.dumps(request(object=forbidden, dryRun=True))))["allowed"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/yaml"])
async def test_a_body_not_declared_json_is_a_400(client: TestClient, content_type: str) -> None:
    response = await answer(client, "/mutate", orjson.dumps(request()), content_type)
    assert response["uid"] == "u-1" and response["allowed"] is False
    assert response["status"]["code"] == 400 and "is not application/json" in response["status"]["message"]


@pytest.mark.parametrize(("body", "uid"), [
    (b"\xff\xfe not utf-8", ""),
    (b'{"apiVersion": "admission.k8s.io/v1", "request": {"uid": 12}}', ""),
    (orjson.dumps({"apiVersion": 3, "kind": "AdmissionReview", "request": {"uid": "u-2"}}), "u-2"),
], ids=["not-utf8", "uid-number", "api-version-number"])
async def test_undecodable_bodies_still_get_an_admission_review(client: TestClient, body: bytes, uid: str) -> None:
    response = await answer(client, "/validate", body)
    assert response["uid"] == uid and response["allowed"] is False and response["status"]["code"] == 400


def with_raw_spec(raw: bytes) -> bytes:
    """A review whose Pod's ``spec`` is the JSON text ``raw``, which orjson may refuse to decode."""
    marker = "__raw__"
    return orjson.dumps(request(object={**POD, "spec": marker})).replace(f'"{marker}"'.encode(), raw)


@pytest.mark.parametrize("body", [
    with_deep_spec(1023), with_deep_spec(5000), with_raw_spec(b'{"a":"\\ud800"}'),
    with_raw_spec(b'{"metadata":{"uid":"not-this"},"x":"\\udfff"}'),
], ids=["nested-1023", "nested-5000", "lone-surrogate", "lone-surrogate-nested-uid"])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
async def test_bodies_orjson_refuses_get_a_400_with_their_uid(client: TestClient, path: str, body: bytes) -> None:
    response = await answer(client, path, body)
    assert response["allowed"] is False and response["status"]["code"] == 400, response["status"]
    assert "is not JSON" in response["status"]["message"]
    assert response["uid"] == "u-1"


async def test_a_get_on_an_admission_path_is_answered_with_a_review(client: TestClient) -> None:
    resp = await client.get("/mutate")
    doc = await resp.json()
    assert doc["kind"] == "AdmissionReview" and doc["response"]["status"]["code"] == 405
