"""Informers over the resources the scan watches, started and stopped as policies come and go.

Each informer keeps its objects compact (JSON text, decoded on read): a scan reads each object
once per pass, while a Pod cache of 10,000 dicts would hold several hundred megabytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from kinitiras_py.base import aiotasks
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.informers import Informer

log = logging.getLogger(__name__)

__all__ = ["Feed", "Key", "key_of"]

Key = tuple[Resource, str, str]
"""(resource, namespace, name) of an object."""


def key_of(resource: Resource, obj: Obj) -> Key:
    """The key of ``obj``, an object of ``resource``."""
    meta = obj.get("metadata") or {}
    return resource, str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Feed:
    """One informer per watched resource; ``changed(key)`` and ``deleted(key, obj)`` on every event."""

    def __init__(self, client: Any, changed: Callable[[Key], Awaitable[None]],
                 deleted: Callable[[Key, Obj], Awaitable[None]], *,
                 make: Callable[[Any, Resource], Informer] | None = None) -> None:
        self._client = client
        self._changed = changed
        self._deleted = deleted
        self._make = make or (lambda client, resource: Informer(client, resource, compact=True))
        self.informers: dict[Resource, Informer] = {}
        self._announcing: dict[Resource, asyncio.Task[None]] = {}

    async def watch(self, resources: Iterable[Resource]) -> list[Informer]:
        """Watch exactly ``resources``: start informers for new ones, stop the others; return the
        stopped informers (their caches still hold the objects they knew)."""
        wanted = set(resources)
        for resource in wanted - self.informers.keys():
            informer = self._make(self._client, resource)
            self._subscribe(informer, resource)
            self.informers[resource] = informer
            informer.start()
            self._announcing[resource] = asyncio.get_running_loop().create_task(self._announce(resource, informer))
            log.info("scan: watching %s", informer)
        gone = [self.informers.pop(resource) for resource in list(self.informers) if resource not in wanted]
        for informer in gone:
            await aiotasks.cancel(self._announcing.pop(informer.resource, None))
        await asyncio.gather(*(informer.stop() for informer in gone))
        return gone

    async def _announce(self, resource: Resource, informer: Informer) -> None:
        """Once the first list is in, every object of it as changed (one call each, not one per
        object as the list arrives: a full pass starting then finds them still queued)."""
        await informer.synced.wait()
        slicer = Slicer()
        for namespace, name in informer.names():
            await self._changed((resource, namespace, name))
            await slicer.turn()

    def _subscribe(self, informer: Informer, resource: Resource) -> None:
        async def added(obj: Obj) -> None:
            if informer.synced.is_set():  # the first list is announced whole once it is in
                await self._changed(key_of(resource, obj))

        async def updated(_old: Obj, new: Obj) -> None:
            await self._changed(key_of(resource, new))

        async def deleted(obj: Obj) -> None:
            await self._deleted(key_of(resource, obj), obj)

        informer.on_add(added)
        informer.on_update(updated)
        informer.on_delete(deleted)

    def get(self, key: Key) -> Obj | None:
        """The object as last seen, or None (deleted, or its resource no longer watched)."""
        informer = self.informers.get(key[0])
        return informer.get(key[1], key[2]) if informer is not None else None

    def every_key(self) -> Iterator[Key]:
        """The key of every object watched."""
        for resource, informer in list(self.informers.items()):
            for namespace, name in informer.names():
                yield resource, namespace, name

    @property
    def synced(self) -> bool:
        """Whether every informer has listed its objects once."""
        return all(informer.synced.is_set() for informer in self.informers.values())

    async def stop(self) -> None:
        """Stop every informer."""
        await self.watch(())
