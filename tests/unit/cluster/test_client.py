"""Resource paths and Api over a real HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from kinitiras_py.cluster.client import Api, ApiException, Resource, is_status
from kinitiras_py.cluster.kubeconfig import Connection, StaticCredentials, TokenFile
from tests.unit.cluster.conftest import api_error


def test_resource_paths() -> None:
    core = Resource("", "v1", "configmaps", True, "ConfigMap")
    assert core.api_version == "v1"
    assert core.path() == "/api/v1/configmaps"
    assert core.path("ns") == "/api/v1/namespaces/ns/configmaps"
    assert core.path("ns", "a") == "/api/v1/namespaces/ns/configmaps/a"
    group = Resource("policy.kcloudlabs.io", "v1alpha1", "clustervalidatepolicies", False)
    assert group.api_version == "policy.kcloudlabs.io/v1alpha1"
    assert group.path("ignored", "p", "status") == (
        "/apis/policy.kcloudlabs.io/v1alpha1/clustervalidatepolicies/p/status")
    assert core.path("n s", "a/b") == "/api/v1/namespaces/n%20s/configmaps/a%2Fb"


def test_is_status() -> None:
    assert is_status(api_error(410), 410) and not is_status(api_error(404), 410)
    assert not is_status(ValueError(), 410)


# -- Api over a real HTTP server ---------------------------------------------------------------

BIG = "x" * 300_000


async def _object(request: web.Request) -> web.Response:
    if request.headers.get("Authorization") != "Bearer s3cret":
        return web.json_response({"kind": "Status", "code": 401, "message": "Unauthorized"}, status=401)
    name = request.match_info["name"]
    if name == "missing":
        return web.json_response({"kind": "Status", "code": 404, "message": 'configmaps "missing" not found'},
                                 status=404)
    return web.json_response({"kind": "ConfigMap", "metadata": {"name": name}, "query": dict(request.query)})


async def _patch(request: web.Request) -> web.Response:
    return web.json_response({"contentType": request.content_type, "body": await request.json()})


async def _watch(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    first = orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": "a"}}}) + b"\n"
    await resp.write(first[:10])  # one event split across chunks
    await asyncio.sleep(0.01)
    await resp.write(first[10:] + b"\n")  # and an empty line
    await resp.write(orjson.dumps({"type": "MODIFIED", "object": {"data": {"big": BIG}}}) + b"\n")
    await resp.write(orjson.dumps({"type": "DELETED", "object": {"metadata": {"name": "a"}}}))  # no newline
    await resp.write_eof()
    return resp


async def _named(request: web.Request) -> web.Response:
    return web.json_response({"path": request.raw_path, "body": (await request.read()).decode()})


@pytest.fixture
async def server(aiohttp_server: Any) -> Any:
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/{name}", _object)
    app.router.add_patch("/api/v1/namespaces/ns/configmaps/{name}/status", _patch)
    app.router.add_get("/api/v1/configmaps", _watch)
    app.router.add_route("*", "/named/{name}", _named)
    return await aiohttp_server(app)


@pytest.fixture
async def api(server: Any) -> AsyncIterator[Api]:
    api = Api(Connection(str(server.make_url("")).rstrip("/"), credentials=StaticCredentials("Bearer s3cret")))
    assert Api.of(api) is api
    try:
        yield api
    finally:
        await api.close()


async def test_api_request_decodes_json_and_raises_api_exception(api: Api) -> None:
    got = await api.request("GET", "/api/v1/namespaces/ns/configmaps/a", query=[("limit", "1")], timeout=5)
    assert got == {"kind": "ConfigMap", "metadata": {"name": "a"}, "query": {"limit": "1"}}
    with pytest.raises(ApiException) as raised:
        await api.request("GET", "/api/v1/namespaces/ns/configmaps/missing")
    assert raised.value.status == 404 and 'configmaps "missing" not found' in str(raised.value.reason)
    patched = await api.request("PATCH", "/api/v1/namespaces/ns/configmaps/a/status", body={"status": {"x": 1}},
                                content_type="application/merge-patch+json")
    assert patched == {"contentType": "application/merge-patch+json", "body": {"status": {"x": 1}}}


async def test_api_watch_splits_lines_of_any_size(api: Api) -> None:
    events = [e async for e in api.watch("/api/v1/configmaps", [("watch", "true")], timeout=5)]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["data"]["big"] == BIG


async def test_api_keeps_quoted_paths_and_sends_bodies_as_json(api: Api) -> None:
    got = await api.request("PATCH", "/named/a%2Fb", body={"k": "é"}, content_type="application/apply-patch+yaml")
    assert got == {"path": "/named/a%2Fb", "body": '{"k":"é"}'}


async def test_a_401_makes_the_token_file_be_read_again(server: Any, tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    credentials = TokenFile(token, period=3600)
    api = Api(Connection(str(server.make_url("")).rstrip("/"), credentials=credentials))
    try:
        with pytest.raises(ApiException):
            await api.request("GET", "/api/v1/namespaces/ns/configmaps/a")  # 'Bearer old' is refused
        token.write_text("s3cret")  # rotated; without the 401 the file would be read an hour later
        assert (await api.request("GET", "/api/v1/namespaces/ns/configmaps/a"))["metadata"] == {"name": "a"}
    finally:
        await api.close()

