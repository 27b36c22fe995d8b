"""The API connection: JSON over any REST path with aiohttp (discovery is :mod:`.discovery`).

One code path serves every kind (core ``/api/v1/...`` and groups ``/apis/<g>/<v>/...``); bodies
stay plain dicts parsed by orjson. Where the server is and how to authenticate comes from
:mod:`kinitiras_py.cluster.kubeconfig`; ``kubernetes_asyncio`` is not imported here, as importing
it loads every generated API and model class.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
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

__all__ = ["Api", "ApiException", "Resource", "Transport", "api_client", "is_status"]

Query = Sequence[tuple[str, str]]
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

