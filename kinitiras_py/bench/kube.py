"""The few API server calls the end-to-end benchmark makes to set itself up (aiohttp, no kubectl)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from kinitiras_py.base.errors import BenchError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster import kubeconfig

POLICY_API = "/apis/policy.kcloudlabs.io/v1alpha1"
PLURALS = {"OverridePolicy": "overridepolicies", "ClusterOverridePolicy": "clusteroverridepolicies",
           "ClusterValidatePolicy": "clustervalidatepolicies", "ValidatePolicy": "validatepolicies"}


@dataclass(frozen=True)
class Access:
    """How to reach the API server: its URL, the TLS context trusting it and the Authorization header."""

    server: str
    tls: ssl.SSLContext
    authorization: str
    kubeconfig: str

    @classmethod
    def from_kubeconfig(cls, path: str) -> Access:
        """The current context of ``path``, read as ``serve`` reads it; the benchmark needs HTTPS and a
        header credential (a token, as ``dev up`` writes)."""

        async def read() -> tuple[kubeconfig.Connection, str | None]:
            connection = await kubeconfig.load(path)
            return connection, await connection.credentials.header()

        connection, authorization = asyncio.run(read())
        if connection.ssl is None or not authorization:
            raise kubeconfig.ConfigError(f"{path}: the benchmark needs an HTTPS server and a user with a token")
        return cls(connection.server, connection.ssl, authorization, path)

    def context(self) -> ssl.SSLContext:
        """A client TLS context trusting the API server."""
        return self.tls

    def headers(self) -> dict[str, str]:
        """The Authorization header."""
        return {"Authorization": self.authorization}


_BUSY = frozenset({429, 500, 503, 504})
"""What an API server answers when it is overloaded ("please try again"): an idempotent call is retried."""
_IDEMPOTENT = frozenset({"GET", "DELETE"})


class Kube:
    """An aiohttp session on the API server; every call raises :class:`BenchError` on an unexpected status.

    GETs and DELETEs the server answers as overloaded are retried (``tries`` in all, backing off),
    since on a loaded machine the benchmark's own load makes the API server time out its clean-up."""

    def __init__(self, access: Access, tries: int = 5, backoff: float = 1.0) -> None:
        self.access = access
        self.tries, self.backoff = tries, backoff
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=access.context(), limit=16),
                                              headers=access.headers())

    async def close(self) -> None:
        """Close the session."""
        await self._session.close()

    async def call(self, method: str, path: str, body: Any = None, ok: Iterable[int] = (200, 201),
                   content_type: str = "application/json") -> Any:
        """One request; the decoded answer."""
        data = None if body is None else orjson.dumps(body)
        tries = self.tries if method in _IDEMPOTENT else 1
        attempt = 0
        while True:
            attempt += 1
            async with self._session.request(method, self.access.server + path, data=data,
                                             headers={"Content-Type": content_type}) as resp:
                raw = await resp.read()
                if resp.status in set(ok):
                    return orjson.loads(raw) if raw else None
                if resp.status not in _BUSY or attempt == tries:
                    raise BenchError(f"{method} {path}: HTTP {resp.status}"
                                     f"{f' after {attempt} tries' if attempt > 1 else ''}: {raw[:500]!r}")
            await asyncio.sleep(self.backoff * attempt)

    async def ensure(self, path: str, obj: Obj) -> None:
        """Create ``obj`` in the collection ``path`` unless it exists."""
        await self.call("POST", path, obj, ok=(200, 201, 409))

    async def delete(self, path: str) -> None:
        """Delete ``path`` (gone already is fine)."""
        await self.call("DELETE", path, ok=(200, 202, 404))

    async def many(self, calls: Iterable[Any], parallel: int = 8) -> None:
        """Await the coroutines ``calls``, ``parallel`` at a time."""
        gate = asyncio.Semaphore(parallel)

        async def one(call: Any) -> None:
            async with gate:
                await call

        await asyncio.gather(*(one(c) for c in calls))

    async def namespace(self, name: str, labels: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        """Create namespace ``name`` (if missing) and wait for its default ServiceAccount, which Pods need."""
        await self.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": name, "labels": labels or {}}})
        deadline = time.monotonic() + timeout
        path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
        while (await self.call("GET", path, ok=(200, 404))).get("kind") != "ServiceAccount":
            if time.monotonic() > deadline:
                raise BenchError(f"namespace {name} got no default ServiceAccount within {timeout:.0f} s")
            await asyncio.sleep(0.2)

    def policy_path(self, policy: Obj) -> str:
        """The collection ``policy`` is created in."""
        namespace = policy["metadata"].get("namespace")
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{POLICY_API}{where}/{PLURALS[policy['kind']]}"

    async def ready_policies(self, selector: str) -> int:
        """How many policies with the label ``selector`` carry ``Ready=True`` (the webhook has loaded
        them and written their status)."""
        count = 0
        for plural in PLURALS.values():
            listing = await self.call("GET", f"{POLICY_API}/{plural}?labelSelector={selector}")
            for item in listing.get("items") or []:
                conditions = (item.get("status") or {}).get("conditions") or []
                count += any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return count
