"""The TLS server's lifetime: in-flight requests finish on shutdown, new ones are refused."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp
import orjson
import pytest

from kinitiras_py.certs import authority
from kinitiras_py.certs.tls import ReloadableTLS
from kinitiras_py.webhook.app import make_app
from kinitiras_py.webhook.server import Server
from tests.functional.test_webhook import SlowStore, make_handlers, owner_policy, review

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def tls() -> tuple[ReloadableTLS, ssl.SSLContext]:
    ca = authority.new_ca("test-ca")
    leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
    client = ssl.create_default_context(cadata=ca.cert.decode())
    return ReloadableTLS(leaf.cert, leaf.key), client


async def test_shutdown_finishes_in_flight_requests_and_refuses_new_ones(
        tls: tuple[ReloadableTLS, ssl.SSLContext]) -> None:
    server_tls, client_ctx = tls
    # An owner lookup that takes ~0.5 s keeps a request in flight while the server stops.
    handlers = make_handlers([owner_policy("Ignore")], SlowStore(), lookup_timeout=0.5)
    server = Server(make_app(handlers), "127.0.0.1", 0, server_tls.context, shutdown_timeout=5)
    await server.start()
    url = f"https://127.0.0.1:{server.port}/mutate"
    owners = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}]
    secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": "s", "namespace": "default", "ownerReferences": owners}}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx)) as session:
        in_flight = asyncio.create_task(session.post(url, data=review("CREATE", secret), headers=JSON))
        await asyncio.sleep(0.15)
        stopping = asyncio.create_task(server.stop())
        response = await in_flight
        assert response.status == 200
        body = orjson.loads(await response.read())
        assert body["response"]["allowed"] is True  # failurePolicy Ignore: skipped with a warning
        await stopping
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx)) as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.post(url, data=review("CREATE", secret), headers=JSON)


async def test_a_draining_server_answers_old_and_new_connections_and_closes_each_after_its_answer(
        tls: tuple[ReloadableTLS, ssl.SSLContext]) -> None:
    server_tls, client_ctx = tls
    server = Server(make_app(make_handlers([])), "127.0.0.1", 0, server_tls.context, shutdown_timeout=5)
    await server.start()
    url = f"https://127.0.0.1:{server.port}/validate"
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx, limit=1)) as session:
            async with session.post(url, data=review("CREATE", pod), headers=JSON) as before:
                assert before.status == 200 and before.headers.get("Connection", "").lower() != "close"
            server.drain()
            # the kept-alive connection from before the drain, then new connections: all answered
            for _ in range(3):
                async with session.post(url, data=review("CREATE", pod), headers=JSON) as during:
                    assert during.status == 200
                    assert during.headers.get("Connection", "").lower() == "close"
                    assert orjson.loads(await during.read())["response"]["allowed"] is True
    finally:
        await server.stop()
