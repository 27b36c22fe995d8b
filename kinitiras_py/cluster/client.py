"""The API connection: an ApiClient from kubeconfig or in-cluster config, JSON over any REST path,
and a discovery-based REST mapper.

Everything goes through ``ApiClient.call_api`` with ``_preload_content=False`` so that one code
path serves every kind (core ``/api/v1/...`` and groups ``/apis/<g>/<v>/...``), bodies stay plain
dicts parsed by orjson, and no generated model is ever built.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from kinitiras_py.base.typedefs import Obj

log = logging.getLogger(__name__)

__all__ = ["Api", "ApiException", "Resource", "RestMapper", "Transport", "api_client", "is_status"]

Query = Sequence[tuple[str, str]]
DISCOVERY_TIMEOUT = 5.0


async def api_client(kubeconfig: str | None, context: str | None = None) -> Any:
    """A dedicated ``kubernetes_asyncio`` ApiClient.

    From ``kubeconfig`` when given; otherwise from the pod's service account when running in a
    cluster (the token file is re-read as it rotates), else from ``$KUBECONFIG`` or
    ``~/.kube/config``. The caller closes it (``await client.close()``) after stopping every user.
    """
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        return k8s_client.ApiClient(configuration)
    return await k8s_config.new_client_from_config(config_file=kubeconfig, context=context,
                                                   persist_config=False)


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
    """The :class:`Transport` over a ``kubernetes_asyncio`` ApiClient (auth, TLS and token refresh are its)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @staticmethod
    def of(client: Any) -> Transport:
        """``client`` itself when it already is a Transport, else an Api wrapping the ApiClient."""
        return Api(client) if isinstance(client, k8s_client.ApiClient) else client

    async def _open(self, method: str, path: str, query: Query, body: Obj | None, content_type: str,
                    timeout: aiohttp.ClientTimeout | float | None) -> aiohttp.ClientResponse:
        return await self.client.call_api(
            path, method, query_params=list(query), body=body, auth_settings=["BearerToken"],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            _preload_content=False, _request_timeout=timeout)

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
    error = ApiException(status=status, reason=reason)
    error.body = raw.decode(errors="replace")  # type: ignore[assignment]  # str, as call_api leaves it
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
