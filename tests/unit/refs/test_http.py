"""AiohttpClient against local aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.http import AiohttpClient
from kinitiras_py.refs.resolver import HttpClient

PASSWORD = "hunter2-very-secret"
STATIC = "static-token-abc123"

ServerFactory = Callable[..., Awaitable[TestServer]]


class Clock:
    """A settable clock."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class State:
    """Mutable server state: hits per path, tokens the target accepts, token endpoint behaviour."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.valid: set[str] = set()
        self.issued = 0
        self.accept = True
        self.user, self.password = "alice", PASSWORD
        self.delay, self.status = 0.0, 200
        self.lifetime_ms: int | None = 600_000
        self.now: Callable[[], float] = time.time


STATE = web.AppKey("state", State)


def make_app() -> web.Application:
    """Test endpoints over a :class:`State` at ``app[STATE]``."""
    app = web.Application()
    st = app[STATE] = State()

    def hit(request: web.Request) -> int:
        st.hits[request.path] = st.hits.get(request.path, 0) + 1
        return st.hits[request.path]

    async def echo(request: web.Request) -> web.Response:
        hit(request)
        raw = await request.read()
        return web.json_response({
            "method": request.method,
            "query": [[k, v] for k, v in request.query.items()],
            "headers": dict(request.headers),
            "body": raw.decode() if raw else None,
        }, headers={"X-Reply": "yes"})

    async def slow(request: web.Request) -> web.Response:
        hit(request)
        await asyncio.sleep(float(request.query.get("s", "3")))
        return web.json_response({"slow": True})

    async def text(request: web.Request) -> web.Response:
        return web.Response(text="hello, <b>not json</b>")

    async def scalar(request: web.Request) -> web.Response:
        return web.Response(text="42", content_type="application/json")

    async def array(request: web.Request) -> web.Response:
        return web.json_response([1, {"a": 2}])

    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="backend exploded: details here")

    async def flaky(request: web.Request) -> web.Response:
        if hit(request) == 1:
            return web.Response(status=503, text="try later")
        return web.json_response({"ok": True})

    async def big(request: web.Request) -> web.StreamResponse:
        payload = b'{"x": "' + b"a" * 5000 + b'"}'
        if request.query.get("stream"):
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for i in range(0, len(payload), 500):
                await resp.write(payload[i:i + 500])
            await resp.write_eof()
            return resp
        return web.Response(body=payload, content_type="application/json")

    async def multi(request: web.Request) -> web.Response:
        resp = web.json_response({})
        resp.headers.add("X-Multi", "a")
        resp.headers.add("X-Multi", "b")
        return resp

    async def token(request: web.Request) -> web.Response:
        hit(request)
        if st.delay:
            await asyncio.sleep(st.delay)
        header = request.headers.get("Authorization", "")
        expected = "Basic " + base64.b64encode(f"{st.user}:{st.password}".encode()).decode()
        if header != expected or st.status != 200:
            # A careless server echoing the credentials it got.
            return web.Response(status=st.status if header == expected else 403, text=f"denied {header}")
        st.issued += 1
        value = f"tok-{st.issued}"
        st.valid.add(value)
        answer: dict[str, Any] = {"token": value}
        if st.lifetime_ms is not None:
            answer["expireAt"] = st.now() * 1000 + st.lifetime_ms
        return web.json_response(answer)

    async def protected(request: web.Request) -> web.Response:
        hit(request)
        header = request.headers.get("Authorization", "")
        if not st.accept or header.removeprefix("Bearer ") not in st.valid:
            return web.Response(status=401, text=f"bad credentials: {header}")
        return web.json_response({"auth": header})

    async def leaky(request: web.Request) -> web.Response:
        return web.Response(status=500, text=f"error, you sent {request.headers.get('Authorization')}")

    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/slow", slow)
    app.router.add_get("/text", text)
    app.router.add_get("/scalar", scalar)
    app.router.add_get("/array", array)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/flaky", flaky)
    app.router.add_get("/big", big)
    app.router.add_get("/multi", multi)
    app.router.add_post("/token", token)
    app.router.add_get("/protected", protected)
    app.router.add_get("/leaky", leaky)
    return app


@pytest.fixture
async def server(aiohttp_server: ServerFactory) -> TestServer:
    return await aiohttp_server(make_app(), host="127.0.0.1")


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[AiohttpClient]:
    async with AiohttpClient(local(server), cache_ttl=0) as c:
        yield c


def local(server: TestServer) -> Egress:
    """The test server's address allowed by an exact entry (loopback is otherwise never called)."""
    return Egress.parse([f"http://127.0.0.1:{server.port}/"])


def url(server: TestServer, path: str) -> str:
    return str(server.make_url(path))


def state(server: TestServer) -> State:
    assert server.app is not None
    return server.app[STATE]


def hits(server: TestServer, path: str) -> int:
    return state(server).hits.get(path, 0)


class FakeStore:
    """The Store protocol over a dict of Secrets keyed by (namespace, name)."""

    def __init__(self, secrets: dict[tuple[str, str], dict[str, str]]) -> None:
        self.secrets = {k: {"apiVersion": "v1", "kind": "Secret",
                            "data": {dk: base64.b64encode(dv.encode()).decode() for dk, dv in v.items()}}
                        for k, v in secrets.items()}
        self.calls: list[tuple[str, str, str | None, str]] = []

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        self.calls.append((api_version, kind, namespace, name))
        return self.secrets.get((namespace or "", name))

    async def list(self, api_version: str, kind: str, namespace: str | None) -> list[Obj]:
        return []


# ---- requests ----------------------------------------------------------------------------------

async def test_satisfies_the_protocol() -> None:
    http: HttpClient = AiohttpClient()
    assert callable(http.fetch)


async def test_get_with_params_and_headers(server: TestServer, client: AiohttpClient) -> None:
    result = await client.fetch({"url": url(server, "/echo"), "params": {"name": "a&b c/d+e", "n": "ü"},
                                 "header": {"X-Team": "blue", "X-Num": 3}}, False)
    body = result["body"]
    assert body["method"] == "GET"
    assert body["query"] == [["name", "a&b c/d+e"], ["n", "ü"]]
    assert body["headers"]["X-Team"] == "blue"
    assert body["headers"]["X-Num"] == "3"
    assert "Content-Type" not in body["headers"]
    assert body["body"] is None
    assert result["header"]["X-Reply"] == "yes"
    assert result["header"]["Content-Type"].startswith("application/json")


async def test_params_join_a_url_that_already_has_a_query(server: TestServer, client: AiohttpClient) -> None:
    result = await client.fetch({"url": url(server, "/echo") + "?a=1&b=x%26y", "params": {"c": "3"}}, False)
    assert result["body"]["query"] == [["a", "1"], ["b", "x&y"], ["c", "3"]]


async def test_post_sends_json_body(server: TestServer, client: AiohttpClient) -> None:
    result = await client.fetch({"url": url(server, "/echo"), "method": "post", "body": {"k": [1, "two"]}}, False)
    body = result["body"]
    assert body["method"] == "POST"
    assert body["headers"]["Content-Type"] == "application/json"
    assert body["body"] == '{"k":[1,"two"]}'


async def test_post_keeps_an_explicit_content_type(server: TestServer, client: AiohttpClient) -> None:
    result = await client.fetch({"url": url(server, "/echo"), "method": "POST", "body": "x",
                                 "header": {"content-type": "application/vnd.x+json"}}, False)
    assert result["body"]["headers"]["Content-Type"] == "application/vnd.x+json"
    assert result["body"]["body"] == '"x"'


async def test_array_body_and_repeated_headers(server: TestServer, client: AiohttpClient) -> None:
    assert (await client.fetch({"url": url(server, "/array")}, False))["body"] == [1, {"a": 2}]
    assert (await client.fetch({"url": url(server, "/multi")}, False))["header"]["X-Multi"] == "a, b"


async def test_header_names_are_plain_strings(server: TestServer, client: AiohttpClient) -> None:
    # aiohttp hands out multidict.istr keys, which CEL cannot carry (every live http ref failed).
    headers = (await client.fetch({"url": url(server, "/multi")}, False))["header"]
    assert headers and all(type(name) is str for name in headers)


# ---- failures ----------------------------------------------------------------------------------

async def test_timeout(server: TestServer) -> None:
    async with AiohttpClient(local(server), default_timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(LookupError, match=r"GET http://127\.0\.0\.1:\d+/slow\?s=3: no answer within 0\.3 s"):
            await client.fetch({"url": url(server, "/slow"), "params": {"s": "3"}}, False)
        assert time.monotonic() - started < 2.0  # the server answers after 3 s


async def test_per_reference_timeout_overrides_the_default(server: TestServer) -> None:
    async with AiohttpClient(local(server), default_timeout=0.1) as client:
        assert (await client.fetch({"url": url(server, "/slow?s=0.3"), "timeoutSeconds": 2}, False))["body"] == {
            "slow": True}
    async with AiohttpClient(local(server), default_timeout=5) as client:
        started = time.monotonic()
        with pytest.raises(LookupError, match=r"no answer within 0\.2 s"):
            await client.fetch({"url": url(server, "/slow?s=3"), "timeoutSeconds": 0.2}, False)
        assert time.monotonic() - started < 2.0  # the server answers after 3 s


@pytest.mark.parametrize("value", [0, -1, "1", True, 31, float("nan")])
async def test_bad_timeout_seconds(value: Any) -> None:
    client = AiohttpClient()
    with pytest.raises(LookupError, match="timeoutSeconds must be a number"):
        await client.fetch({"url": "http://127.0.0.1:1/", "timeoutSeconds": value}, False)


@pytest.mark.parametrize(("spec", "message"), [
    ({}, "url is required"),
    ({"url": "/relative"}, "is not an absolute http or https URL"),
    ({"url": "ftp://h/x"}, "is not an absolute http or https URL"),
    ({"url": "http://h/", "method": "PUT"}, "method PUT is not supported"),
    ({"url": "http://h/", "params": {"a": {"b": 1}}}, "params.a must be a string, not a map"),
    ({"url": "http://h/", "header": ["x"]}, "header must be a map"),
    ({"url": "http://h/", "auth": {}}, None),
])
async def test_malformed_specs(spec: Obj, message: str | None, client: AiohttpClient) -> None:
    if message is None:  # an empty auth block means no auth; nothing listens on port 1
        spec = {**spec, "url": "http://127.0.0.1:1/"}
        message = "Cannot connect"
        client = AiohttpClient(Egress.parse(["http://127.0.0.1:1/"]))
    async with client:
        with pytest.raises(LookupError, match=message):
            await client.fetch(spec, False)


async def test_body_that_is_not_json(server: TestServer, client: AiohttpClient) -> None:
    with pytest.raises(LookupError, match=r"^response of http://127\.0\.0\.1:\d+/text is not JSON: "
                                          r"hello, <b>not json</b>$"):
        await client.fetch({"url": url(server, "/text")}, False)


async def test_body_that_is_a_scalar(server: TestServer, client: AiohttpClient) -> None:
    with pytest.raises(LookupError, match="is not a JSON object or array: 42"):
        await client.fetch({"url": url(server, "/scalar")}, False)


async def test_non_2xx_status(server: TestServer, client: AiohttpClient) -> None:
    with pytest.raises(LookupError, match=r"GET http://127\.0\.0\.1:\d+/status/503 answered 503 Service "
                                          r"Unavailable: backend exploded: details here"):
        await client.fetch({"url": url(server, "/status/503")}, False)


async def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with AiohttpClient(Egress.parse([f"http://127.0.0.1:{port}/"])) as client:
        with pytest.raises(LookupError,
                           match=rf"GET http://127\.0\.0\.1:{port}/x: ClientConnectorError: Cannot connect"):
            await client.fetch({"url": f"http://127.0.0.1:{port}/x"}, False)


@pytest.mark.parametrize("stream", [False, True])
async def test_oversized_body_is_refused(server: TestServer, stream: bool) -> None:
    async with AiohttpClient(local(server), max_body_bytes=1000) as client:
        with pytest.raises(LookupError, match=r"response of .*/big.* is larger than 1000 bytes"):
            await client.fetch({"url": url(server, "/big"), "params": {"stream": "1"} if stream else {}}, False)
        assert len((await client.fetch({"url": url(server, "/echo")}, False))["body"]) == 4


async def test_user_info_is_not_shown(client: AiohttpClient, server: TestServer) -> None:
    target = str(server.make_url("/text").with_user("bob").with_password("pw-in-url"))
    with pytest.raises(LookupError) as err:
        await client.fetch({"url": target}, False)
    assert "pw-in-url" not in str(err.value)
    assert "bob" not in str(err.value)


# ---- auth --------------------------------------------------------------------------------------

async def test_static_token(server: TestServer, client: AiohttpClient) -> None:
    result = await client.fetch({"url": url(server, "/echo"), "header": {"authorization": "Basic x"},
                                 "auth": {"staticToken": STATIC, "authUrl": url(server, "/token")}}, False)
    assert result["body"]["headers"]["Authorization"] == f"Bearer {STATIC}"
    assert hits(server, "/token") == 0


def auth_spec(server: TestServer, **extra: Any) -> Obj:
    return {"url": url(server, "/protected"),
            "auth": {"authUrl": url(server, "/token"), "username": "alice", "password": PASSWORD, **extra}}


async def test_token_fetched_reused_and_refreshed_after_expiry(server: TestServer) -> None:
    clock = Clock(1_700_000_000.0)
    state(server).now = clock
    async with AiohttpClient(local(server), cache_ttl=0, token_clock=clock) as client:
        assert (await client.fetch(auth_spec(server), False))["body"] == {"auth": "Bearer tok-1"}
        clock.now += 569  # 600 s token: kept until 30 s before expiry
        assert (await client.fetch(auth_spec(server), False))["body"] == {"auth": "Bearer tok-1"}
        assert hits(server, "/token") == 1
        clock.now += 2
        assert (await client.fetch(auth_spec(server), False))["body"] == {"auth": "Bearer tok-2"}
        assert hits(server, "/token") == 2


async def test_expire_duration_used_without_expire_at(server: TestServer) -> None:
    clock = Clock(1_700_000_000.0)
    state(server).now, state(server).lifetime_ms = clock, None
    async with AiohttpClient(local(server), cache_ttl=0, token_clock=clock) as client:
        await client.fetch(auth_spec(server, expireDuration="2m"), False)
        clock.now += 89
        await client.fetch(auth_spec(server, expireDuration="2m"), False)
        assert hits(server, "/token") == 1
        clock.now += 2
        assert (await client.fetch(auth_spec(server, expireDuration="2m"), False))["body"] == {"auth": "Bearer tok-2"}
        with pytest.raises(LookupError, match=r"auth\.expireDuration: invalid duration 'soon'"):
            await client.fetch(auth_spec(server, expireDuration="soon", username="carol"), False)


async def test_401_refreshes_the_token_once_and_retries(server: TestServer) -> None:
    async with AiohttpClient(local(server), cache_ttl=0) as client:
        await client.fetch(auth_spec(server), False)
        state(server).valid.clear()  # the target revokes tok-1 early
        assert (await client.fetch(auth_spec(server), False))["body"] == {"auth": "Bearer tok-2"}
        assert (hits(server, "/token"), hits(server, "/protected")) == (2, 3)


async def test_401_after_refresh_is_an_error(server: TestServer) -> None:
    async with AiohttpClient(local(server), cache_ttl=0) as client:
        state(server).accept = False  # the target accepts nothing
        with pytest.raises(LookupError, match=r"/protected answered 401 Unauthorized: bad credentials: Bearer \*\*\*"):
            await client.fetch(auth_spec(server), False)
        assert (hits(server, "/token"), hits(server, "/protected")) == (2, 2)


async def test_concurrent_fetches_share_one_token_request(server: TestServer) -> None:
    state(server).delay = 0.2
    async with AiohttpClient(local(server), cache_ttl=0) as client:
        results = await asyncio.gather(*(client.fetch(auth_spec(server), False) for _ in range(10)))
    assert {r["body"]["auth"] for r in results} == {"Bearer tok-1"}
    assert hits(server, "/token") == 1


async def test_token_endpoint_failure_is_reported_without_secrets(server: TestServer) -> None:
    state(server).status = 500
    async with AiohttpClient(local(server), cache_ttl=0) as client:
        for _ in range(2):
            with pytest.raises(LookupError, match=r"token endpoint for alice@127\.0\.0\.1 answered 500 ") as err:
                await client.fetch(auth_spec(server), False)
            assert PASSWORD not in str(err.value)
            assert base64.b64encode(f"alice:{PASSWORD}".encode()).decode() not in str(err.value)
            assert "denied Basic ***" in str(err.value)
    assert hits(server, "/token") == 2  # failures are not cached


async def test_token_endpoint_timeout_counts_against_the_reference(server: TestServer) -> None:
    state(server).delay = 3
    async with AiohttpClient(local(server), cache_ttl=0, default_timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(LookupError, match=r"/protected: no answer within 0\.3 s while getting its bearer token"):
            await client.fetch(auth_spec(server), False)
        assert time.monotonic() - started < 2.0  # the token endpoint answers after 3 s


async def test_wrong_password_and_missing_username(server: TestServer, client: AiohttpClient) -> None:
    with pytest.raises(LookupError, match="answered 403 Forbidden") as err:
        await client.fetch(auth_spec(server, password="wrong-password-123"), False)
    assert "wrong-password-123" not in str(err.value)
    with pytest.raises(LookupError, match="authUrl is set but there is no username"):
        await client.fetch({"url": url(server, "/echo"), "auth": {"authUrl": url(server, "/token")}}, False)
    with pytest.raises(LookupError, match="auth has no usable token"):
        await client.fetch({"url": url(server, "/echo"), "auth": {"username": "alice"}}, False)


async def test_token_written_in_the_policy_is_used_until_it_expires(server: TestServer,
                                                                    client: AiohttpClient) -> None:
    spec: Obj = {"url": url(server, "/echo"), "auth": {"token": "old-tok-xyz", "expireAt": "2999-01-01T00:00:00Z"}}
    assert (await client.fetch(spec, False))["body"]["headers"]["Authorization"] == "Bearer old-tok-xyz"
    spec["auth"]["expireAt"] = "2000-01-01T00:00:00Z"
    with pytest.raises(LookupError, match=r"auth\.token expired at 2000-01-01T00:00:00Z"):
        await client.fetch(spec, False)


@pytest.mark.parametrize("auth", [
    {"staticToken": STATIC},
    {"token": STATIC},
    {"secretRef": {"name": "creds", "namespace": "ns1"}},
])
async def test_tokens_never_appear_in_messages(server: TestServer, auth: Obj) -> None:
    store = FakeStore({("ns1", "creds"): {"token": STATIC}})
    async with AiohttpClient(local(server), store=store, cache_ttl=0) as client:
        with pytest.raises(LookupError, match=r"answered 500 Internal Server Error: error, you sent Bearer \*\*\*$"):
            await client.fetch({"url": url(server, "/leaky"), "auth": auth}, False)


async def test_managed_token_never_appears_in_messages(server: TestServer) -> None:
    async with AiohttpClient(local(server), cache_ttl=0) as client:
        spec = auth_spec(server)
        spec["url"] = url(server, "/leaky")
        with pytest.raises(LookupError) as err:
            await client.fetch(spec, False)
    assert "tok-1" not in str(err.value)
    assert "Bearer ***" in str(err.value)


# ---- secretRef ---------------------------------------------------------------------------------

async def test_secret_ref_token(server: TestServer) -> None:
    store = FakeStore({("ns1", "creds"): {"token": "from-secret-tok\n"}})
    async with AiohttpClient(local(server), store=store, cache_ttl=0) as client:
        result = await client.fetch({"url": url(server, "/echo"),
                                     "auth": {"secretRef": {"name": "creds", "namespace": "ns1"}}}, False)
    assert result["body"]["headers"]["Authorization"] == "Bearer from-secret-tok"
    assert store.calls == [("v1", "Secret", "ns1", "creds")]


async def test_secret_ref_username_and_password(server: TestServer) -> None:
    store = FakeStore({("ns1", "creds"): {"username": "alice", "password": PASSWORD}})
    async with AiohttpClient(local(server), store=store, cache_ttl=0) as client:
        result = await client.fetch({"url": url(server, "/protected"),
                                     "auth": {"authUrl": url(server, "/token"), "username": "ignored",
                                              "secretRef": {"name": "creds", "namespace": "ns1"}}}, False)
    assert result["body"] == {"auth": "Bearer tok-1"}


@pytest.mark.parametrize(("store", "ref", "message"), [
    (FakeStore({}), {"name": "creds", "namespace": "ns1"}, "Secret ns1/creds not found"),
    (FakeStore({}), {"name": "creds"}, "secretRef creds has no namespace"),
    (FakeStore({}), {"namespace": "ns1"}, "secretRef needs a name"),
    (None, {"name": "creds", "namespace": "ns1"}, "Secrets cannot be read here"),
])
async def test_secret_ref_failures(server: TestServer, store: FakeStore | None, ref: Obj, message: str) -> None:
    async with AiohttpClient(local(server), store=store, cache_ttl=0) as client:
        with pytest.raises(LookupError, match=message):
            await client.fetch({"url": url(server, "/echo"), "auth": {"secretRef": ref}}, False)


async def test_secret_with_bad_base64(server: TestServer) -> None:
    store = FakeStore({})
    store.secrets[("ns1", "creds")] = {"data": {"token": "!!!not-base64"}}
    async with AiohttpClient(local(server), store=store) as client:
        with pytest.raises(LookupError, match="key token is not base64-encoded UTF-8"):
            await client.fetch({"url": url(server, "/echo"), "auth": {"secretRef": {"name": "creds",
                                                                                    "namespace": "ns1"}}}, False)


# ---- response cache ----------------------------------------------------------------------------

async def test_identical_requests_are_cached_for_the_ttl(server: TestServer) -> None:
    clock = Clock(100.0)
    async with AiohttpClient(local(server), cache_ttl=2.0, clock=clock) as client:
        spec = {"url": url(server, "/echo"), "params": {"a": "1"}, "header": {"X": "1"}}
        first = await client.fetch(spec, False)
        first["body"]["method"] = "mutated by a caller"
        clock.now += 1.9
        assert (await client.fetch(spec, False))["body"]["method"] == "GET"
        assert hits(server, "/echo") == 1
        for variant in ({"params": {"a": "2"}}, {"header": {"X": "2"}}, {"method": "POST"},
                        {"method": "POST", "body": {"b": 1}}, {"auth": {"staticToken": STATIC}}):
            await client.fetch({**spec, **variant}, False)
        assert hits(server, "/echo") == 6
        clock.now += 0.2
        await client.fetch(spec, False)
        assert hits(server, "/echo") == 7


async def test_errors_are_not_cached(server: TestServer) -> None:
    async with AiohttpClient(local(server), cache_ttl=60) as client:
        with pytest.raises(LookupError, match="answered 503"):
            await client.fetch({"url": url(server, "/flaky")}, False)
        assert (await client.fetch({"url": url(server, "/flaky")}, False))["body"] == {"ok": True}
        assert (await client.fetch({"url": url(server, "/flaky")}, False))["body"] == {"ok": True}
        assert hits(server, "/flaky") == 2


# ---- sessions ----------------------------------------------------------------------------------

async def test_the_session_is_made_on_first_use_and_closed_with_the_client(server: TestServer) -> None:
    async with AiohttpClient(local(server)) as client:
        await client.fetch({"url": url(server, "/echo")}, False)
        session = client._http()
        assert not session.closed
    assert session.closed
