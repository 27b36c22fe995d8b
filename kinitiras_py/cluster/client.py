"""The API connection: JSON over any REST path with aiohttp, and a discovery-based REST mapper.

One code path serves every kind (core ``/api/v1/...`` and groups ``/apis/<g>/<v>/...``); bodies
stay plain dicts parsed by orjson. Where the server is and how to authenticate comes from
:mod:`kinitiras_py.cluster.kubeconfig`; ``kubernetes_asyncio`` is not imported here, as importing
it loads every generated API and model class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import aiohttp
import orjson
import yarl

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster import kubeconfig
from kinitiras_py.cluster.kubeconfig import Connection

log = logging.getLogger(__name__)

__all__ = ["Api", "ApiException", "Resource", "RestMapper", "Transport", "api_client", "is_status"]

Query = Sequence[tuple[str, str]]
DISCOVERY_TIMEOUT = 5.0
CONNECTIONS = 100
"""Most connections open to the API server at once (each watch holds one)."""
READ_BUFFER = 2**21
"""Bytes aiohttp reads at a time: watch events of large objects arrive in fewer pieces."""


class ApiException(KinitirasError):
    """The API server answered with a non-2xx status (``status`` 0: no answer could be sent)."""

    def __init__(self, status: int | None = None, reason: str | None = None, body: str | None = None) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.body = body

    def __str__(self) -> str:
        return f"({self.status})\nReason: {self.reason}\n"


async def api_client(kubeconfig_path: str | None, context: str | None = None) -> Api:
    """A dedicated connection to the API server.

    From ``kubeconfig_path`` when given; otherwise from the pod's service account when running in
    a cluster (the token file is re-read as it rotates), else from ``$KUBECONFIG`` or
    ``~/.kube/config``. The caller closes it (``await client.close()``) after stopping every user.
    """
    return Api(await kubeconfig.load(kubeconfig_path, context))


def is_status(error: BaseException, code: int) -> bool:
    """True when ``error`` is an ApiException with HTTP status ``code``."""
    return isinstance(error, ApiException) and error.status == code


@dataclass(frozen=True)
class Resource:
    """One REST resource: where its objects live and whether they are namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``<group>/<version>`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection (all namespaces when ``namespace`` is None), an object,
        or an object's subresource. ``namespace`` is ignored for cluster-scoped resources."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


class Transport(Protocol):
    """JSON requests and watch streams on REST paths; :class:`Api` is the real one, tests pass fakes."""

    async def request(self, method: str, path: str, *, query: Query = (), body: Obj | None = None,
                      content_type: str = "application/json", timeout: float | None = None) -> Obj:
        """Send one request and return the decoded JSON body; raise ApiException on a non-2xx status."""

    def watch(self, path: str, query: Query = (), timeout: float | None = None) -> AsyncGenerator[Obj, None]:
        """Yield each watch event (``{"type", "object"}``) until the server ends the stream.
        ``timeout`` bounds the wait for the next bytes."""


class Api:
    """The :class:`Transport` over aiohttp, to the server of a :class:`Connection`."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._session: aiohttp.ClientSession | None = None

    @staticmethod
    def of(client: Any) -> Transport:
        """``client`` as a Transport: an Api, or a test's fake with the same methods."""
        return client

    def _client_session(self) -> aiohttp.ClientSession:
        # Created on first use, inside the event loop that will use it.
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=self.connection.ssl or False)
            # trust_env: HTTPS_PROXY/NO_PROXY apply, as they did with kubernetes_asyncio.
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True, read_bufsize=READ_BUFFER)
        return self._session

    async def close(self) -> None:
        """Close the connections (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _open(self, method: str, path: str, query: Query, body: Obj | None, content_type: str,
                    timeout: aiohttp.ClientTimeout | float | None) -> aiohttp.ClientResponse:
        conn = self.connection
        headers = {"Accept": "application/json"}
        auth = await conn.credentials.header()
        if auth:
            headers["Authorization"] = auth
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        # Paths arrive quoted (Resource.path); encoded=True keeps yarl from quoting them again.
        url = yarl.URL(conn.server + path + (f"?{urlencode(list(query))}" if query else ""), encoded=True)
        if not isinstance(timeout, aiohttp.ClientTimeout):
            timeout = aiohttp.ClientTimeout(total=timeout)
        extra: dict[str, Any] = {"server_hostname": conn.tls_server_name} if conn.tls_server_name else {}
        resp = await self._client_session().request(method, url, data=data, headers=headers, timeout=timeout,
                                                    proxy=conn.proxy, **extra)
        if resp.status == 401:
            conn.credentials.invalidate()  # a rotated token or an expired exec credential
        return resp

    async def request(self, method: str, path: str, *, query: Query = (), body: Obj | None = None,
                      content_type: str = "application/json", timeout: float | None = None) -> Obj:
        """Send one request and return the decoded JSON body; raise ApiException on a non-2xx status."""
        resp = await self._open(method, path, query, body, content_type, timeout)
        try:
            raw = await resp.read()
        finally:
            resp.release()
        if not 200 <= resp.status < 300:
            raise _api_error(resp.status, resp.reason, raw)
        decoded = orjson.loads(raw) if raw else {}
        return decoded if isinstance(decoded, dict) else {"value": decoded}

    async def watch(self, path: str, query: Query = (), timeout: float | None = None) -> AsyncGenerator[Obj, None]:
        """Yield each watch event until the server ends the stream; lines of any size are handled."""
        resp = await self._open("GET", path, query, None, "application/json",
                                aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout))
        try:
            if not 200 <= resp.status < 300:
                raise _api_error(resp.status, resp.reason, await resp.read())
            buf = bytearray()
            async for chunk in resp.content.iter_any():
                start = len(buf)
                buf += chunk
                while (end := buf.find(b"\n", start)) >= 0:
                    line = bytes(buf[:end])
                    del buf[:end + 1]
                    start = 0
                    if line.strip():
                        yield orjson.loads(line)
            if bytes(buf).strip():
                yield orjson.loads(bytes(buf))
        finally:
            resp.close()


def _api_error(status: int, reason: str | None, raw: bytes) -> ApiException:
    error = ApiException(status=status, reason=reason, body=raw.decode(errors="replace"))
    with contextlib.suppress(ValueError):
        message = orjson.loads(raw).get("message")
        if message:
            error.reason = f"{reason}: {message}"
    return error


class RestMapper:
    """Maps (apiVersion, kind) to a :class:`Resource` through discovery, one group version at a time.

    Results are cached. An unknown kind triggers a new discovery of its group version, at most
    once per ``refresh_interval`` seconds, so CustomResourceDefinitions created after start are
    found; if the kind is still unknown, ``resolve`` raises LookupError.
    """

    def __init__(self, client: Any, refresh_interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._api = Api.of(client)
        self.refresh_interval = refresh_interval
        self._clock = clock
        self._kinds: dict[str, dict[str, Resource]] = {}
        self._fetched: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.discoveries = 0
        """How many discovery requests were sent (for tests and metrics)."""

    async def resolve(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version``; raise LookupError when there is none."""
        gv = api_version.strip().strip("/")
        if not gv or not kind or gv.count("/") > 1:
            raise LookupError(f"unknown kind {kind!r} in {api_version!r}: apiVersion and kind are required")
        found = self._kinds.get(gv, {}).get(kind)
        if found is not None:
            return found
        lock = self._locks.setdefault(gv, asyncio.Lock())
        async with lock:
            found = self._kinds.get(gv, {}).get(kind)
            last = self._fetched.get(gv)
            if found is None and (last is None or self._clock() - last >= self.refresh_interval):
                await self._discover(gv)
                found = self._kinds.get(gv, {}).get(kind)
        if found is None:
            raise LookupError(f"unknown kind {kind} in {gv}")
        return found

    async def _discover(self, gv: str) -> None:
        self._fetched[gv] = self._clock()
        self.discoveries += 1
        group, _, version = gv.rpartition("/")
        path = f"/apis/{gv}" if group else f"/api/{gv}"
        try:
            doc = await self._api.request("GET", path, timeout=DISCOVERY_TIMEOUT)
        except ApiException as e:
            if e.status == 404:
                self._kinds[gv] = {}
                return
            raise LookupError(f"discovery of {gv} failed: {e.status} {e.reason}") from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise LookupError(f"discovery of {gv} failed: {e!r}") from None
        kinds: dict[str, Resource] = {}
        for res in doc.get("resources") or []:
            name = str(res.get("name") or "")
            if not name or "/" in name or not res.get("kind"):
                continue  # subresources such as pods/status
            kinds.setdefault(str(res["kind"]), Resource(group, version, name, bool(res.get("namespaced")),
                                                        str(res["kind"])))
        self._kinds[gv] = kinds
        log.debug("discovered %s: %d kinds", gv, len(kinds))
