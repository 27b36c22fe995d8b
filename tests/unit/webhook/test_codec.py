"""The codec's shape checks, uid peeking and the error middleware's last-resort answer."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from kinitiras_py.base import nesting
from kinitiras_py.base.errors import ReviewError
from kinitiras_py.webhook import body, codec, peek, shape
from kinitiras_py.webhook.app import errors_middleware


def review(**request: Any) -> bytes:
    req = {"uid": "u-1", "operation": "CREATE", "object": {"apiVersion": "v1", "kind": "Pod"}, **request}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})


@pytest.mark.parametrize(("request_fields", "message"), [
    ({"object": {"kind": "Pod", "metadata": {"ownerReferences": [{"name": 1}]}}},
     "request.object.metadata.ownerReferences[0].name must be a string, got number"),
    ({"object": {"kind": "Pod", "metadata": {"ownerReferences": [{"controller": "true"}]}}},
     "request.object.metadata.ownerReferences[0].controller must be a bool, got string"),
    ({"object": {"kind": "Pod", "metadata": {"ownerReferences": ["rs"]}}},
     "request.object.metadata.ownerReferences[0] must be an object, got string"),
    ({"object": {"kind": "Pod", "metadata": {"finalizers": [None]}}},
     "request.object.metadata.finalizers[0] must be a string, got null"),
    ({"object": {"kind": "Pod", "metadata": []}}, "request.object.metadata must be an object, got array"),
    ({"userInfo": {"extra": {"scopes": "all"}}}, "request.userInfo.extra['scopes'] must be an array of strings"),
    ({"options": "x"}, "request.options must be an object, got string"),
    ({"resource": {"resource": 3}}, "request.resource.resource must be a string, got number"),
    ({"subResource": False}, "request.subResource must be a string, got bool"),
    ({"operation": ["CREATE"]}, "unsupported operation ['CREATE']"),
])
def test_decode_names_the_field_of_the_wrong_type(request_fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ReviewError) as caught:
        codec.decode(review(**request_fields))
    assert message in str(caught.value)


def test_well_typed_optional_fields_and_nulls_are_accepted() -> None:
    body = review(namespace=None, dryRun=None, userInfo=None, options=None, oldObject=None,
                  object={"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": None}})
    decoded = codec.decode(body)
    assert decoded.request.namespace == "" and decoded.request.dry_run is False
    assert decoded.request.size == len(body)  # what decides whether a dear rule leaves the event loop


@pytest.mark.parametrize(("operation", "namespace", "meta"), [
    ("CREATE", "team", {}), ("CREATE", "team", {"name": "a", "namespace": ""}), ("CREATE", "", {"name": "a"}),
    ("UPDATE", "team", {"name": "a", "namespace": "team"}), ("DELETE", "team", {"name": "a"}),
])
def test_the_objects_are_measured_for_the_rules_size_bounds(operation: str, namespace: str,
                                                           meta: dict[str, Any]) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"x": "é" * 10, "n": [1, 2.5]}}
    fields: dict[str, Any] = {"operation": operation, "namespace": namespace}
    if operation == "DELETE":
        fields.update(object=None, oldObject=obj)
    else:
        fields.update(object=obj, oldObject={**obj, "spec": {}} if operation == "UPDATE" else None)
    request = codec.decode(review(**fields)).request
    exact = {"object": request.object, "oldObject": request.old_object}
    assert set(request.sizes) == {name for name, value in exact.items() if value is not None}
    filled = bool(namespace) and not meta.get("namespace")  # then the sizes are upper bounds
    for name, size in request.sizes.items():
        measured = len(orjson.dumps(exact[name]))
        assert measured <= size <= measured + 32 if filled else size == measured


def test_depth_is_counted_below_the_object_and_the_path_is_shown() -> None:
    deep: Any = "leaf"
    for _ in range(shape.MAX_DEPTH):
        deep = [deep]
    shape.check_object({"spec": deep[0]}, "request.object")  # MAX_DEPTH levels: the bound itself is fine
    with pytest.raises(ReviewError) as caught:
        shape.check_object({"spec": {"x": deep}}, "request.object")
    assert str(caught.value).startswith(f"request.object is nested deeper than {shape.MAX_DEPTH} levels "
                                        "(at request.object.spec.x[0][0][0][0][0][0]...")


@pytest.mark.parametrize("levels", [shape.MAX_DEPTH - 1, shape.MAX_DEPTH, shape.MAX_DEPTH + 1, shape.MAX_DEPTH + 60])
@pytest.mark.parametrize("big_int", [False, True])
def test_the_fast_depth_check_agrees_with_the_exact_one(levels: int, big_int: bool) -> None:
    deep: Any = {"n": 2**70} if big_int else {}  # orjson refuses such an integer: measured in Python then
    for i in range(levels):
        deep = {"a": deep} if i % 2 else [deep]
    too_deep, blob = shape._written({"spec": deep})
    assert too_deep is nesting.exceeds({"spec": deep}, shape.MAX_DEPTH)
    assert too_deep is (levels + 1 > shape.MAX_DEPTH)
    if not too_deep:  # written on the way, unless orjson refused the integer
        assert blob == (None if big_int else orjson.dumps({"spec": deep}))


def test_peek_uid_reads_only_string_uids_and_our_api_versions() -> None:
    assert codec.peek_uid(orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "a"}})) == (
        "admission.k8s.io/v1beta1", "a")
    assert codec.peek_uid(orjson.dumps({"apiVersion": ["x"], "request": {"uid": {"a": 1}}})) == (
        "admission.k8s.io/v1", "")
    assert codec.peek_uid(b"[1]") == ("admission.k8s.io/v1", "")
    prefix = b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"big-1","kin'
    assert codec.peek_uid(prefix, complete=False) == ("admission.k8s.io/v1beta1", "big-1")
    assert codec.peek_uid(b'{"request":{"object":{"metadata":{"uid":"not-this"', complete=False)[1] == ""


SURROGATE = b'"\\ud800"'


@pytest.mark.parametrize(("body", "uid"), [
    (b'{"request":{"uid":"u","object":' + b"[" * 1100 + b"]" * 1100 + b"}}", "u"),
    (b'{"request":{"object":{"metadata":{"uid":"nested"}},"uid":"late","x":' + SURROGATE + b"}}", "late"),
    (b'{"request":{"object":{"uid":"nested"},"x":' + SURROGATE + b"}}", ""),
    (b'{"object":{"request":{"uid":"nested"}},"x":' + SURROGATE + b"}", ""),
    (b'{"request":{"uid":"a","uid":"b","x":' + SURROGATE + b"}}", ""),
    (b'{"request":{"uid":"a"},"request":{"uid":"a"},"x":' + SURROGATE + b"}", ""),
    (b'{"request":{"uid":5,"x":' + SURROGATE + b"}}", ""),
    (b'{"request":{"uid":["a"],"x":' + SURROGATE + b"}}", ""),
    (b'{"request":{"uid":' + SURROGATE + b"}}", ""),
    (b'{"request":{"uid":"a\\"b","x":' + SURROGATE + b"}}", 'a"b'),
    (b'{"request":{"uid":"cut","kind":{"kind":"Po', "cut"),
], ids=["deep", "uid-after-object", "only-nested", "request-nested", "uid-twice", "request-twice", "uid-number",
        "uid-list", "uid-surrogate", "uid-escaped", "cut"])
def test_peek_uid_scans_a_body_orjson_refuses_for_request_uid_only(body: bytes, uid: str) -> None:
    assert codec.peek_uid(body)[1] == uid


def test_the_scan_past_its_bound_takes_only_a_uid_where_the_api_server_writes_it() -> None:
    first = b'{"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"first","object":' + b"[1]," * 40 + b"1}}"
    assert peek.scan(first, max_tokens=50) == peek.Found("admission.k8s.io/v1beta1", "first")
    assert peek.scan(first, max_tokens=50, whole=False).uid == "first"
    second = b'{"request":{"kind":1,"uid":"second","object":' + b"[1]," * 40 + b"1}}"
    assert peek.scan(second).uid == "second"
    assert peek.scan(second, max_tokens=50).uid == ""  # another uid may follow unseen: doubtful
    assert peek.scan(second[:-10], whole=False).uid == ""


async def test_the_middleware_answers_with_the_uid_of_a_body_already_read(aiohttp_client: Any) -> None:
    async def broken(request: web.Request) -> web.Response:
        await body.read_body(request)
        raise RuntimeError("after reading")

    app = web.Application(middlewares=[errors_middleware])
    app.router.add_post("/validate", broken)
    client: TestClient = await aiohttp_client(app)
    resp = await client.post("/validate", data=review(uid="kept"), headers={"Content-Type": "application/json"})
    doc = await resp.json()
    assert doc["response"]["uid"] == "kept"
    assert doc["response"]["status"]["code"] == 500 and "after reading" in doc["response"]["status"]["message"]
