"""Connections of http references: resolved addresses checked (DNS rebinding), redirects held to
the same origin, guarded addresses never connected to. Listeners run on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterator

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from kinitiras_py.refs import outbound
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.http import AiohttpClient
from tests.listener import Counts, counting_listener, local_address

ServerFactory = Callable[..., Awaitable[TestServer]]


class Answers(AbstractResolver):
    """A resolver answering each host with the next of its answers (the last one repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.calls: dict[str, int] = {}

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        calls = self.calls[host] = self.calls.get(host, 0) + 1
        if host not in self.answers:
            raise OSError(f"{host}: no such host")
        ips = self.answers[host][min(calls, len(self.answers[host])) - 1]
        return [{"hostname": host, "host": ip, "port": port, "family": socket.AF_INET6 if ":" in ip else socket.AF_INET,
                 "proto": 0, "flags": 0} for ip in ips]

    async def close(self) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[Counts]:
    with counting_listener() as counts:
        yield counts


# ---- the resolver ------------------------------------------------------------------------------

async def test_the_resolver_keeps_only_addresses_it_may_connect_to() -> None:
    inner = Answers({"mixed.test": [["127.0.0.1", "198.51.100.7", "::ffff:127.0.0.1", "169.254.169.254",
                                     "fe80::1", "2001:db8::5", "10.96.0.1"]]})
    resolver = outbound.GuardedResolver(Egress().with_api_server([ipaddress.ip_address("10.96.0.1")]), inner)
    kept = await resolver.resolve("mixed.test", 80)
    assert [r["host"] for r in kept] == ["198.51.100.7", "2001:db8::5"]


@pytest.mark.parametrize(("answer", "reason"), [
    ("127.0.0.1", "loopback address 127.0.0.1"),
    ("::1", "loopback address ::1"),
    ("::ffff:127.0.0.1", "loopback address 127.0.0.1 (written ::ffff:7f00:1)"),
    ("169.254.169.254", "link-local address 169.254.169.254"),
    ("0.0.0.0", "unspecified address 0.0.0.0"),
    ("10.96.0.1", "API server address 10.96.0.1"),
])
async def test_a_name_resolving_only_to_guarded_addresses_is_refused(answer: str, reason: str) -> None:
    resolver = outbound.GuardedResolver(Egress().with_api_server([ipaddress.ip_address("10.96.0.1")]),
                                        Answers({"inside.test": [[answer]]}))
    with pytest.raises(outbound.GuardedAddress) as err:
        await resolver.resolve("inside.test", 80)
    assert str(err.value).startswith(f"host inside.test resolves only to addresses the webhook never connects to "
                                     f"({reason}); only an allow entry naming the IP address itself opens one")


async def test_an_allowed_name_resolving_to_loopback_is_never_connected_to(listener: Counts) -> None:
    egress = Egress.parse([f"http://inside.test:{listener.port}/"], namespaced=True)
    async with AiohttpClient(egress, resolver=Answers({"inside.test": [["127.0.0.1"]]})) as client:
        with pytest.raises(LookupError, match=rf"GET http://inside\.test:{listener.port}/x: host inside\.test "
                                              "resolves only to addresses the webhook never connects to"):
            await client.fetch({"url": f"http://inside.test:{listener.port}/x"}, True)
    assert listener.snapshot() == (0, 0)


async def test_rebinding_the_second_answer_to_loopback_is_caught(listener: Counts) -> None:
    resolver = Answers({"rebind.test": [["198.51.100.7"], ["127.0.0.1"]]})
    egress = Egress.parse([f"http://rebind.test:{listener.port}/"])
    spec = {"url": f"http://rebind.test:{listener.port}/x", "timeoutSeconds": 0.5}
    # First answer: an outside address, which the guard lets through (nothing answers there).
    async with AiohttpClient(egress, resolver=resolver, cache_ttl=0) as client:
        with pytest.raises(LookupError) as first:
            await client.fetch(spec, False)
    assert "never connects" not in str(first.value)
    # Second answer (a fresh connection pool, so the name is resolved again): loopback, refused.
    async with AiohttpClient(egress, resolver=resolver, cache_ttl=0) as client:
        with pytest.raises(LookupError, match="never connects to \\(loopback address 127\\.0\\.0\\.1\\)"):
            await client.fetch(spec, False)
    assert resolver.calls["rebind.test"] == 2
    assert listener.snapshot() == (0, 0)


async def test_rebinding_from_a_reachable_address_to_loopback() -> None:
    here = local_address()
    if here is None:
        pytest.skip("this machine has no address besides loopback")
    with counting_listener("0.0.0.0") as counts:
        resolver = Answers({"rebind.test": [[here], ["127.0.0.1"]]})
        egress = Egress.parse([f"http://rebind.test:{counts.port}/"])
        spec = {"url": f"http://rebind.test:{counts.port}/x"}
        async with AiohttpClient(egress, resolver=resolver, cache_ttl=0) as client:
            assert (await client.fetch(spec, False))["body"] == {"ok": True, "path": "/x"}
        assert counts.snapshot() == (1, 1)
        async with AiohttpClient(egress, resolver=resolver, cache_ttl=0) as client:
            with pytest.raises(LookupError, match="never connects to"):
                await client.fetch(spec, False)
        assert counts.snapshot() == (1, 1)


# ---- IP literals and the operator's setting ----------------------------------------------------

@pytest.mark.parametrize("host", ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.2", "0x7f.1", "2130706433",
                                  "localhost"])
async def test_other_spellings_of_an_allowed_loopback_address_are_never_connected_to(listener: Counts,
                                                                                     host: str) -> None:
    egress = Egress.parse([f"http://127.0.0.1:{listener.port}/"])
    async with AiohttpClient(egress) as client:
        assert (await client.fetch({"url": f"http://127.0.0.1:{listener.port}/ok"}, False))["body"]["ok"]
        with pytest.raises(LookupError, match="is refused"):
            await client.fetch({"url": f"http://{host}:{listener.port}/x"}, False)
    assert listener.snapshot() == (1, 1)


async def test_without_an_entry_loopback_is_never_connected_to(listener: Counts) -> None:
    async with AiohttpClient(Egress()) as client:
        with pytest.raises(LookupError, match=rf"url http://127\.0\.0\.1:{listener.port}/x is refused: the webhook "
                                              "never connects to the loopback address 127.0.0.1 unless"):
            await client.fetch({"url": f"http://127.0.0.1:{listener.port}/x"}, False)
    assert listener.snapshot() == (0, 0)


async def test_namespaced_policies_make_no_request_by_default(listener: Counts) -> None:
    # Not even with the loopback listener allowed for cluster policies.
    async with AiohttpClient(Egress.parse([f"http://127.0.0.1:{listener.port}/"])) as client:
        with pytest.raises(LookupError, match="http references are off for namespaced policies; the operator "
                                              "allows them with --http-namespaced and --http-allow PREFIX"):
            await client.fetch({"url": f"http://127.0.0.1:{listener.port}/x"}, True)
        assert (await client.fetch({"url": f"http://127.0.0.1:{listener.port}/x"}, False))["body"]["ok"]
    assert listener.snapshot() == (1, 1)


async def test_a_cached_answer_is_not_given_to_a_namespaced_policy(listener: Counts) -> None:
    async with AiohttpClient(Egress.parse([f"http://127.0.0.1:{listener.port}/"]), cache_ttl=60) as client:
        await client.fetch({"url": f"http://127.0.0.1:{listener.port}/x"}, False)
        with pytest.raises(LookupError, match="off for namespaced policies"):
            await client.fetch({"url": f"http://127.0.0.1:{listener.port}/x"}, True)


# ---- redirects ---------------------------------------------------------------------------------

def redirecting_app(hits: dict[str, int]) -> web.Application:
    app = web.Application()

    async def to(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": request.query["to"]})

    async def echo(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        raw = await request.read()
        return web.json_response({"method": request.method, "path": request.path, "body": raw.decode() or None,
                                  "type": request.headers.get("Content-Type")})

    async def loop(request: web.Request) -> web.Response:
        hits[request.path] = hits.get(request.path, 0) + 1
        return web.Response(status=301, headers={"Location": "/loop"})

    app.router.add_route("*", "/to", to)
    app.router.add_route("*", "/pub/to", to)
    app.router.add_route("*", "/echo", echo)
    app.router.add_route("*", "/pub/echo", echo)
    app.router.add_get("/loop", loop)
    app.router.add_post("/token", echo)
    return app


@pytest.fixture
async def redirects(aiohttp_server: ServerFactory) -> tuple[TestServer, dict[str, int]]:
    hits: dict[str, int] = {}
    return await aiohttp_server(redirecting_app(hits), host="127.0.0.1"), hits


async def test_a_redirect_on_the_same_host_is_followed(redirects: tuple[TestServer, dict[str, int]]) -> None:
    server, hits = redirects
    base = f"http://127.0.0.1:{server.port}"
    async with AiohttpClient(Egress.parse([f"{base}/"])) as client:
        got = await client.fetch({"url": f"{base}/to", "params": {"to": "/echo?a=1"}}, False)
        assert got["body"] == {"method": "GET", "path": "/echo", "body": None, "type": None}
        posted = await client.fetch({"url": f"{base}/to", "method": "POST", "body": {"k": 1},
                                     "params": {"to": "/echo", "status": "307"}}, False)
        assert posted["body"] == {"method": "POST", "path": "/echo", "body": '{"k":1}', "type": "application/json"}
        seen = await client.fetch({"url": f"{base}/to", "method": "POST", "body": {"k": 1},
                                   "params": {"to": "/echo", "status": "303"}}, False)
        assert seen["body"] == {"method": "GET", "path": "/echo", "body": None, "type": None}
        with pytest.raises(LookupError, match="more than 3 redirects"):
            await client.fetch({"url": f"{base}/loop"}, False)
    assert hits["/loop"] == 4


@pytest.mark.parametrize("where", ["http://127.0.0.1:{other}/x", "http://localhost:{port}/echo",
                                   "https://127.0.0.1:{port}/echo", "//evil.test/x", "http://evil.test/x"])
async def test_a_redirect_to_another_host_is_refused(redirects: tuple[TestServer, dict[str, int]], listener: Counts,
                                                     where: str) -> None:
    server, hits = redirects
    base = f"http://127.0.0.1:{server.port}"
    location = where.format(other=listener.port, port=server.port)
    egress = Egress.parse([f"{base}/", f"http://127.0.0.1:{listener.port}/"])
    async with AiohttpClient(egress, resolver=Answers({})) as client:
        with pytest.raises(LookupError, match="another scheme, host or port: redirects are followed only on the "
                                              "same scheme, host and port"):
            await client.fetch({"url": f"{base}/to", "params": {"to": location}}, False)
    assert listener.snapshot() == (0, 0)
    assert hits == {"/to": 1}


async def test_every_hop_is_held_to_the_prefixes(redirects: tuple[TestServer, dict[str, int]]) -> None:
    server, hits = redirects
    base = f"http://127.0.0.1:{server.port}"
    async with AiohttpClient(Egress.parse([f"{base}/pub/"], namespaced=True)) as client:
        assert (await client.fetch({"url": f"{base}/pub/to", "params": {"to": "/pub/echo"}}, True))["body"]["path"] \
            == "/pub/echo"
        with pytest.raises(LookupError, match=rf"url {base}/echo is refused: it is under no allowed prefix"):
            await client.fetch({"url": f"{base}/pub/to", "params": {"to": "/echo"}}, True)
    assert "/echo" not in hits


# ---- auth endpoints ----------------------------------------------------------------------------

async def test_an_auth_url_outside_the_prefixes_is_never_called(redirects: tuple[TestServer, dict[str, int]]) -> None:
    server, hits = redirects
    base = f"http://127.0.0.1:{server.port}"
    async with AiohttpClient(Egress.parse([f"{base}/pub/"], namespaced=True)) as client:
        with pytest.raises(LookupError, match=rf"url {base}/token is refused: it is under no allowed prefix"):
            await client.fetch({"url": f"{base}/pub/echo", "auth": {"authUrl": f"{base}/token", "username": "u",
                                                                   "password": "pw-0123456789"}}, True)
    assert hits == {}


async def test_the_token_endpoint_redirect_is_not_followed(redirects: tuple[TestServer, dict[str, int]]) -> None:
    server, hits = redirects
    base = f"http://127.0.0.1:{server.port}"
    async with AiohttpClient(Egress.parse([f"{base}/"])) as client:
        with pytest.raises(LookupError, match=r"token endpoint for u@127\.0\.0\.1 answered 302"):
            await client.fetch({"url": f"{base}/echo", "auth": {"authUrl": f"{base}/to?to=/token", "username": "u",
                                                               "password": "pw-0123456789"}}, False)
    assert hits == {"/to": 1}


# ---- the API server's addresses ----------------------------------------------------------------

async def test_addresses_of_the_api_server() -> None:
    assert await outbound.addresses("https://10.96.0.1:443") == [ipaddress.ip_address("10.96.0.1")]
    assert await outbound.addresses("https://[fd00::1]:6443") == [ipaddress.ip_address("fd00::1")]
    assert ipaddress.ip_address("127.0.0.1") in await outbound.addresses("https://localhost:6443")
    assert await outbound.addresses("https://no-such-host.invalid:6443") == []
