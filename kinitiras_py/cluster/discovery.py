"""The one discovery client: kinds to REST resources, and the stored resources of each API group.

Every answer comes from one cache of discovery documents: the list of served groups (``/api`` and
``/apis``) and each group version's resources. A document is read again once it is older than
``max_age`` (:data:`MAX_AGE`) and a caller needs what it may have changed: a listing always, a
kind lookup only when the kind is not in it. So a known kind never waits on the API server, and
a CustomResourceDefinition created after start is found within ``max_age``. A failed read is
remembered for ``max_age`` too, so a group version that is down (an aggregated API, say) costs one
request per ``max_age``, not one per lookup. :meth:`Discovery.invalidate` forgets everything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException, Resource

log = logging.getLogger(__name__)

__all__ = ["MAX_AGE", "TIMEOUT", "Discovery"]

MAX_AGE = 5.0
"""Seconds a discovery document (or a failure to read one) is used before it is read again."""
TIMEOUT = 5.0
"""Seconds one discovery request may take."""
_GROUPS = "the API groups"
"""The key of the list of served groups (a group version always holds a ``/`` or is ``v1``-like)."""


@dataclass
class _Document:
    """One discovery answer, as the callers use it."""

    read: float
    """When it was read (the clock's time)."""
    kinds: dict[str, Resource] = field(default_factory=dict)
    """Every top-level resource with a kind, by kind (the first one listed wins)."""
    stored: list[Resource] = field(default_factory=list)
    """The top-level resources that can be read back and written: objects admission sees."""
    versions: dict[str, list[str]] = field(default_factory=dict)
    """For the list of groups: each served group's versions (``""`` is core)."""
    error: LookupError | None = None
    """Why the read failed, raised again until the document is read anew."""


class Discovery:
    """Maps (apiVersion, kind) to a :class:`Resource` and lists each group's stored resources.

    It is both the store's REST mapper and the registration's ``rules.Catalog``. Every method
    raises LookupError: for an unknown kind (``unknown kind ...``) or when discovery cannot be
    read (a message starting with ``discovery of``).
    """

    def __init__(self, client: Any, max_age: float = MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = Api.of(client)
        self.max_age = max_age
        self._clock = clock
        self._documents: dict[str, _Document] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.discoveries = 0
        """How many discovery requests were sent (for tests and metrics)."""

    def invalidate(self) -> None:
        """Forget every document and failure (the next calls read discovery again)."""
        self._documents.clear()

    async def resolve(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version``; raise LookupError when there is none."""
        gv = api_version.strip().strip("/")
        if not gv or not kind or gv.count("/") > 1:
            raise LookupError(f"unknown kind {kind!r} in {api_version!r}: apiVersion and kind are required")
        found = (await self._document(gv, lambda doc: kind in doc.kinds)).kinds.get(kind)
        if found is None:
            raise LookupError(f"unknown kind {kind} in {gv}")
        return found

    async def groups(self) -> list[str]:
        """Every served group, ``""`` (core) first."""
        return sorted((await self._document(_GROUPS, lambda _: False)).versions)

    async def group_resources(self, group: str) -> list[Resource]:
        """Stored top-level resources of every served version of ``group`` (none if it is not served)."""
        found: list[Resource] = []
        for version in (await self._document(_GROUPS, lambda _: False)).versions.get(group, []):
            found += (await self._document(f"{group}/{version}" if group else version, lambda _: False)).stored
        return found

    async def _document(self, key: str, enough: Callable[[_Document], bool]) -> _Document:
        """The document ``key`` (a group version, or :data:`_GROUPS`), read again first when it is
        older than ``max_age`` and failed or lacks what the caller needs (``enough`` says False)."""
        def stale(doc: _Document) -> bool:
            return self._old(doc) and (doc.error is not None or not enough(doc))

        doc = self._documents.get(key)
        if doc is None or stale(doc):
            async with self._locks.setdefault(key, asyncio.Lock()):
                doc = self._documents.get(key)  # another caller may have read it while this one waited
                if doc is None or stale(doc):
                    doc = self._documents[key] = await self._read(key)
        if doc.error is not None:
            raise doc.error
        return doc

    def _old(self, doc: _Document) -> bool:
        return self._clock() - doc.read >= self.max_age

    async def _read(self, key: str) -> _Document:
        doc = _Document(self._clock())
        try:
            if key == _GROUPS:
                core = await self._get("/api")
                doc.versions[""] = [str(v) for v in core.get("versions") or []]
                for group in (await self._get("/apis")).get("groups") or []:
                    doc.versions[str(group.get("name"))] = [str(v.get("version")) for v in group.get("versions") or []]
            else:
                self._index(doc, key, await self._get(f"/apis/{key}" if "/" in key else f"/api/{key}"))
        except ApiException as e:
            if e.status == 404 and key != _GROUPS:
                return doc  # the group version is not served: it has no kinds
            doc.error = LookupError(f"discovery of {key} failed: {e.status} {e.reason}")
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            doc.error = LookupError(f"discovery of {key} failed: {e!r}")
        log.debug("discovered %s: %d kinds%s", key, len(doc.kinds), f" ({doc.error})" if doc.error else "")
        return doc

    async def _get(self, path: str) -> Obj:
        self.discoveries += 1
        return await self._api.request("GET", path, timeout=TIMEOUT)

    @staticmethod
    def _index(doc: _Document, gv: str, answer: Obj) -> None:
        group, _, version = gv.rpartition("/")
        for res in answer.get("resources") or []:
            name, kind, verbs = str(res.get("name") or ""), res.get("kind"), set(res.get("verbs") or [])
            if not name or "/" in name or not kind:
                continue  # subresources such as pods/status
            resource = Resource(group, version, name, bool(res.get("namespaced")), str(kind))
            doc.kinds.setdefault(resource.kind, resource)
            # Virtual resources (nothing to read back, e.g. TokenReview) are not admitted objects.
            if "get" in verbs and verbs & {"create", "update", "patch", "delete"}:
                doc.stored.append(resource)
