"""A list+watch cache of one resource, kept as plain dicts, for any kind.

The loop: a paginated LIST fills the cache and gives a resourceVersion; a WATCH from there (with
bookmarks and a server timeout) applies ADDED/MODIFIED/DELETED and is reopened from the last
resourceVersion whenever the server ends it. When the server answers 410 Gone (the version was
compacted) the informer lists again and diffs against its cache, synthesising the DELETED,
MODIFIED and ADDED events it missed. Other errors are retried with capped exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from kinitiras_py.base import aiotasks, collector
from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException, Resource

log = logging.getLogger(__name__)

__all__ = ["AddHandler", "DeleteHandler", "Gone", "Informer", "UpdateHandler", "slim"]

AddHandler = Callable[[Obj], Awaitable[None]]
UpdateHandler = Callable[[Obj, Obj], Awaitable[None]]
"""Called with (old, new)."""
DeleteHandler = Callable[[Obj], Awaitable[None]]
"""Called with the last state of the object."""
QueryParams = list[tuple[str, str]]

RETRYABLE = (ApiException, aiohttp.ClientError, TimeoutError, OSError, ValueError)
"""Errors the loop survives by backing off (ValueError covers a malformed JSON line)."""


class Gone(KinitirasError):
    """The watch's resourceVersion is too old (HTTP 410 or an ERROR event with code 410): list again."""


def slim(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields`` (often most of an object, never read by policies) in place."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _same(obj: Any) -> Any:
    return obj


def _packed(obj: Obj) -> bytes:
    # A copy: orjson's own bytes object keeps its whole write buffer (8 KiB for a small object).
    return bytes(memoryview(orjson.dumps(obj)))


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """Keeps ``{namespace: {name: obj}}`` of one resource in step with the API server.

    Register handlers with ``on_add``/``on_update``/``on_delete`` before ``start()``. Handlers run
    one at a time, in event order, after the cache reflects the event; an exception in a handler is
    logged and does not stop the informer. ``synced`` is set once the first list has been applied
    (handlers included). Objects in the cache are shared: treat them as read-only; their
    ``metadata.managedFields`` are dropped unless ``keep_managed_fields`` is set.

    ``compact`` keeps each cached object as its JSON text (about a fifth of the memory of the
    dicts) and decodes it on every ``get``/``list``: for caches read rarely, such as the policies,
    which the request path reads compiled. Objects read from a compact cache are fresh copies.
    """

    def __init__(self, client: Any, resource: Resource, namespace: str | None = None, *,
                 label_selector: str | None = None, page_size: int = 500, watch_timeout: int = 300,
                 backoff_initial: float = 0.5, backoff_max: float = 30.0, keep_managed_fields: bool = False,
                 compact: bool = False) -> None:
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._slim: Callable[[Obj], Obj] = (lambda obj: obj) if keep_managed_fields else slim
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        """How many times the informer listed (1 after the first sync; more after 410s)."""
        self.errors = 0
        """How many failures were retried with backoff."""
        self._api = Api.of(client)
        self._pack: Callable[[Obj], Any] = _packed if compact else _same
        self._unpack: Callable[[Any], Obj] = orjson.loads if compact else _same
        self._cache: dict[str, dict[str, Any]] = {}
        """{namespace: {name: the object, packed}}."""
        self._adds: list[AddHandler] = []
        self._updates: list[UpdateHandler] = []
        self._deletes: list[DeleteHandler] = []
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"<Informer {self.resource.plural}.{self.resource.group or 'core'}/{self.resource.version}{where}>"

    # -- handlers -------------------------------------------------------------------------------

    def on_add(self, handler: AddHandler) -> AddHandler:
        """Call ``handler(obj)`` for each new object (and each object of the first list)."""
        self._check_not_started()
        self._adds.append(handler)
        return handler

    def on_update(self, handler: UpdateHandler) -> UpdateHandler:
        """Call ``handler(old, new)`` for each changed object."""
        self._check_not_started()
        self._updates.append(handler)
        return handler

    def on_delete(self, handler: DeleteHandler) -> DeleteHandler:
        """Call ``handler(obj)`` for each deleted object (seen, or inferred by a relist)."""
        self._check_not_started()
        self._deletes.append(handler)
        return handler

    def _check_not_started(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"{self!r}: register handlers before start()")

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the list+watch loop as a task of the running event loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the loop and wait for it; the open watch connection is closed."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Obj | None:
        """The cached object, or None. ``namespace`` is ignored for cluster-scoped resources."""
        found = self._cache.get((namespace or "") if self.resource.namespaced else "", {}).get(name)
        return None if found is None else self._unpack(found)

    def list(self, namespace: str | None = None) -> list[Obj]:
        """Cached objects, in one namespace or (None) in all."""
        if namespace is not None and self.resource.namespaced:
            return [self._unpack(obj) for obj in self._cache.get(namespace, {}).values()]
        return [self._unpack(obj) for bucket in self._cache.values() for obj in bucket.values()]

    def names(self) -> tuple[tuple[str, str], ...]:
        """(namespace, name) of every cached object ("" for cluster-scoped ones), without decoding any."""
        return tuple((ns, name) for ns, bucket in self._cache.items() for name in bucket)

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._cache.values())

    # -- the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        delay = self.backoff_initial
        need_list = True
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                    self.synced.set()
                if await self._watch_once():
                    delay = self.backoff_initial
                    continue
                problem = "the watch ended at once without events"
            except asyncio.CancelledError:
                raise
            except (Gone, *RETRYABLE) as e:
                gone = isinstance(e, Gone) or (isinstance(e, ApiException) and e.status == 410)
                if gone and not need_list:
                    # Straight to a relist; a 410 right after a list falls through to backoff.
                    log.info("%r: resourceVersion %s is gone, listing again", self, self.resource_version)
                    need_list = True
                    continue
                problem = f"{type(e).__name__}: {e}"
            self.errors += 1
            pause = delay * random.uniform(0.8, 1.2)
            log.warning("%r: %s; retrying in %.1f s", self, problem.strip(), pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, self.backoff_max)

    def _query(self) -> QueryParams:
        return [("labelSelector", self.label_selector)] if self.label_selector else []

    async def _list(self) -> tuple[dict[str, dict[str, Any]], str]:
        items: dict[str, dict[str, Any]] = {}
        kind = self.resource.kind
        path = self.resource.path(self.namespace)
        token = ""
        while True:
            query = [*self._query(), ("limit", str(self.page_size))]
            if token:
                query.append(("continue", token))
            doc = await self._api.request("GET", path, query=query, timeout=60)
            kind = kind or str(doc.get("kind") or "").removesuffix("List")
            for obj in doc.get("items") or []:
                # List items carry no apiVersion and kind; watch events and GETs do.
                obj.setdefault("apiVersion", self.resource.api_version)
                obj.setdefault("kind", kind)
                ns, name = _key(self._slim(obj))
                items.setdefault(ns, {})[name] = self._pack(obj)
            meta = doc.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    async def relist(self) -> None:
        """List everything, replace the cache and run the handlers for the differences, then settle
        the garbage collector (:func:`~kinitiras_py.base.collector.settle`).

        The differences are dispatched in time slices (:class:`~kinitiras_py.base.pacing.Slicer`):
        a list of 10,000 objects would otherwise hold the event loop, and every admission request
        behind it, for as long as their handlers take."""
        fresh, version = await self._list()
        old, self._cache = self._cache, fresh
        self.resource_version = version
        self.relists += 1
        unpack, slicer = self._unpack, Slicer()
        for ns, bucket in old.items():  # no longer the cache: nothing changes it while handlers run
            for name, packed in bucket.items():
                if name not in fresh.get(ns, {}):
                    await self._dispatch("DELETED", unpack(packed))
                    await slicer.turn()
        # The cache, which a watch event applied between slices may change: iterate over a copy.
        for ns, bucket in list(fresh.items()):
            for name, packed in list(bucket.items()):
                before = old.get(ns, {}).get(name)
                if before is None:
                    await self._dispatch("ADDED", unpack(packed))
                else:
                    previous, obj = unpack(before), unpack(packed)
                    if _version(previous) != _version(obj):
                        await self._dispatch("MODIFIED", obj, previous)
                await slicer.turn()
        # The new cache lives until the next relist: out of the full collections' walk (a no-op
        # unless the process manages the collector, as serve does).
        collector.settle(f"list {self.relists} of {self.resource.plural}")

    async def _watch_once(self) -> bool:
        """Watch from the current resourceVersion until the server ends the stream.

        Returns False when the stream ended quickly without a single event (a suspicious server).
        """
        query = [*self._query(), ("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(self.watch_timeout)), ("resourceVersion", self.resource_version)]
        began, seen = time.monotonic(), 0
        events = self._api.watch(self.resource.path(self.namespace), query, timeout=self.watch_timeout + 30)
        async with contextlib.aclosing(events):
            async for event in events:
                seen += 1
                await self.apply(event)
        return seen > 0 or time.monotonic() - began > 1.0

    async def apply(self, event: Obj) -> None:
        """Apply one watch event to the cache and run its handlers; raise Gone on a 410 ERROR."""
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without an object: {str(event)[:200]}")
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(obj.get("message") or "resourceVersion too old")
            raise ApiException(status=code, reason=f"watch error: {obj.get('message')}")
        version = _version(obj)
        if kind == "BOOKMARK":
            self.resource_version = version or self.resource_version
            return
        ns, name = _key(self._slim(obj))
        bucket = self._cache.setdefault(ns, {})
        before = bucket.get(name)
        if kind == "DELETED":
            bucket.pop(name, None)
            if not bucket:
                del self._cache[ns]
            await self._dispatch("DELETED", obj)
        elif kind in ("ADDED", "MODIFIED"):
            bucket[name] = self._pack(obj)
            await self._dispatch("MODIFIED" if before is not None else "ADDED", obj,
                                 None if before is None else self._unpack(before))
        else:
            log.debug("%r: ignoring watch event %s", self, kind)
        if version:
            self.resource_version = version

    async def _dispatch(self, kind: str, obj: Obj, before: Obj | None = None) -> None:
        if kind == "MODIFIED":
            for update in self._updates:
                await self._guarded(kind, update, before or {}, obj)
        else:
            for handler in self._adds if kind == "ADDED" else self._deletes:
                await self._guarded(kind, handler, obj)

    async def _guarded(self, kind: str, handler: Callable[..., Awaitable[None]], *args: Obj) -> None:
        try:
            await handler(*args)
        except asyncio.CancelledError:
            raise
        except Exception:
            ns, name = _key(args[-1])
            log.exception("%r: %s handler failed for %s/%s", self, kind, ns, name)
