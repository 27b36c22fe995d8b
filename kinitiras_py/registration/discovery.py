"""Discovery for webhook rules: :class:`DiscoveryCatalog`, the API server as a ``rules.Catalog``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException, Resource, RestMapper
from kinitiras_py.registration import applying

__all__ = ["DiscoveryCatalog"]


class DiscoveryCatalog:
    """:class:`rules.Catalog` over the API server: kinds through the RestMapper, group listings
    through discovery, cached for ``max_age`` seconds."""

    def __init__(self, client: Any, mapper: RestMapper, max_age: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._api = Api.of(client)
        self._mapper = mapper
        self.max_age = max_age
        self._clock = clock
        self._groups: tuple[float, dict[str, list[str]]] | None = None
        self._resources: dict[str, tuple[float, list[Resource]]] = {}

    def invalidate(self) -> None:
        """Forget the cached listings (the next calls read discovery again)."""
        self._groups = None
        self._resources.clear()

    async def resolve(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version`` (RestMapper, with its own refresh)."""
        return await self._mapper.resolve(api_version, kind)

    async def _get(self, path: str) -> Obj:
        try:
            return await self._api.request("GET", path, timeout=applying.TIMEOUT)
        except ApiException as e:
            raise LookupError(f"discovery of {path} failed: {e.status} {e.reason}") from None
        except (OSError, TimeoutError) as e:
            raise LookupError(f"discovery of {path} failed: {e!r}") from None

    async def _versions(self) -> dict[str, list[str]]:
        if self._groups is None or self._clock() - self._groups[0] > self.max_age:
            core = await self._get("/api")
            found: dict[str, list[str]] = {"": [str(v) for v in core.get("versions") or []]}
            for group in (await self._get("/apis")).get("groups") or []:
                found[str(group.get("name"))] = [str(v.get("version")) for v in group.get("versions") or []]
            self._groups = (self._clock(), found)
        return self._groups[1]

    async def groups(self) -> list[str]:
        """Every served group, ``""`` (core) first."""
        return sorted(await self._versions())

    async def group_resources(self, group: str) -> list[Resource]:
        """Stored top-level resources of every served version of ``group`` (none if it is not served)."""
        cached = self._resources.get(group)
        if cached is not None and self._clock() - cached[0] <= self.max_age:
            return cached[1]
        found: list[Resource] = []
        for version in (await self._versions()).get(group, []):
            doc = await self._get(f"/apis/{group}/{version}" if group else f"/api/{version}")
            for res in doc.get("resources") or []:
                name, verbs = str(res.get("name") or ""), set(res.get("verbs") or [])
                # Subresources and virtual resources (nothing to read back) are not admitted objects.
                if name and "/" not in name and "get" in verbs and verbs & {"create", "update", "patch", "delete"}:
                    found.append(Resource(group, version, name, bool(res.get("namespaced")), str(res.get("kind"))))
        self._resources[group] = (self._clock(), found)
        return found
