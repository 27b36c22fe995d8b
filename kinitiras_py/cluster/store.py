"""The informer-backed object store that value references (``k8s``, ``owner``) read.

It implements ``refs.store.Store`` structurally (this package does not import ``refs``).
The first lookup of a kind starts a cluster-wide informer for it; until that informer has
synced, lookups of the kind go straight to the API server under a short timeout, so the first
request is not held up by a full LIST. Later lookups are answered from memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import aiohttp

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException, Resource
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.cluster.informers import Informer, slim

log = logging.getLogger(__name__)

__all__ = ["InformerStore"]

Objs = list[Obj]


class InformerStore:
    """Objects of any kind by (apiVersion, kind), from informers started on demand.

    Objects returned are the informer's own dicts: callers must not change them.
    """

    def __init__(self, client: Any, discovery: Discovery | None = None, *, direct_timeout: float = 1.0,
                 watch_timeout: int = 300) -> None:
        self._client = client
        self._api = Api.of(client)
        self.discovery = discovery or Discovery(client)
        self.direct_timeout = direct_timeout
        self.watch_timeout = watch_timeout
        self._informers: dict[Resource, Informer] = {}
        self.direct_lookups = 0
        """How many lookups were answered by the API server because the informer had not synced."""

    @property
    def informers(self) -> dict[Resource, Informer]:
        """The informers started so far, by resource (a copy)."""
        return dict(self._informers)

    def _informer(self, resource: Resource) -> Informer:
        informer = self._informers.get(resource)
        if informer is None:
            informer = Informer(self._client, resource, watch_timeout=self.watch_timeout)
            self._informers[resource] = informer
            informer.start()
            log.info("started an informer for %s", informer)
        return informer

    async def resource(self, api_version: str, kind: str) -> Resource:
        """The REST resource of a kind; raise LookupError for an unknown kind."""
        return await self.discovery.resolve(api_version, kind)

    async def namespaced(self, api_version: str, kind: str) -> bool:
        """Whether the kind is namespaced, from discovery; LookupError for an unknown kind. (A
        namespaced policy's reads are bounded by it: a cluster-scoped kind ignores namespaces.)"""
        return (await self.resource(api_version, kind)).namespaced

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object, or None when it does not exist. Raises LookupError for an unknown kind, a
        namespaced kind without a namespace, or an API failure of the direct lookup."""
        resource = await self.resource(api_version, kind)
        if resource.namespaced and not namespace:
            raise LookupError(f"{kind} is namespaced: a namespace is needed to get {name!r}")
        informer = self._informer(resource)
        if informer.synced.is_set():
            return informer.get(namespace, name)
        self.direct_lookups += 1
        try:
            return _typed(await self._api.request("GET", resource.path(namespace, name),
                                                  timeout=self.direct_timeout), resource)
        except ApiException as e:
            if e.status == 404:
                return None
            raise LookupError(f"get {kind} {namespace or ''}/{name}: {e.status} {e.reason}") from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise LookupError(f"get {kind} {namespace or ''}/{name}: {_describe(e)}") from None

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        """Every object of that kind, in ``namespace`` when given (and the kind is namespaced)."""
        resource = await self.resource(api_version, kind)
        informer = self._informer(resource)
        if informer.synced.is_set():
            return informer.list(namespace)
        self.direct_lookups += 1
        try:
            async with asyncio.timeout(self.direct_timeout):
                return await self._list(resource, namespace)
        except ApiException as e:
            raise LookupError(f"list {kind} in {namespace or 'all namespaces'}: {e.status} {e.reason}") from None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise LookupError(f"list {kind} in {namespace or 'all namespaces'}: {_describe(e)}") from None

    async def _list(self, resource: Resource, namespace: str | None) -> Sequence[Obj]:
        items: Objs = []
        token = ""
        while True:
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            doc = await self._api.request("GET", resource.path(namespace), query=query)
            items.extend(_typed(obj, resource) for obj in doc.get("items") or [])
            token = str((doc.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    async def close(self) -> None:
        """Stop every informer (the API connection stays open: its owner closes it)."""
        informers, self._informers = list(self._informers.values()), {}
        await asyncio.gather(*(informer.stop() for informer in informers))


def _typed(obj: Obj, resource: Resource) -> Obj:
    slim(obj)  # as the informer keeps them
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    return obj


def _describe(error: BaseException) -> str:
    return "timed out" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}"
