"""File-backed implementations of the reference protocols for the offline CLI and tests."""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.base.typedefs import Obj


class StaticStore:
    """Objects given up front (``--context``); lookups by apiVersion, kind, namespace, name."""

    def __init__(self, objects: Sequence[Obj] = ()) -> None:
        self._objects = [o for o in objects if o.get("kind") != "HTTPResponse"]

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object with that identity, or None."""
        for obj in await self.list(api_version, kind, namespace):
            if obj.get("metadata", {}).get("name") == name:
                return obj
        return None

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        """Objects of that apiVersion and kind, in ``namespace`` when given."""
        return [o for o in self._objects
                if o.get("apiVersion") == api_version and o.get("kind") == kind
                and (not namespace or (o.get("metadata") or {}).get("namespace") == namespace)]


class StaticHttp:
    """Canned responses: context documents ``{kind: HTTPResponse, url, method?, body, header?}``."""

    def __init__(self, objects: Sequence[Obj] = ()) -> None:
        self._responses = {(str(o.get("method", "GET")).upper(), str(o.get("url"))): o
                           for o in objects if o.get("kind") == "HTTPResponse"}

    async def fetch(self, spec: Obj) -> Obj:
        """The canned response for the request's method and URL; LookupError when there is none."""
        method = str(spec.get("method") or "GET").upper()
        found = self._responses.get((method, str(spec.get("url"))))
        if found is None:
            raise LookupError(f"no HTTPResponse given in --context for {method} {spec.get('url')}")
        return {"body": found.get("body"), "header": found.get("header") or {}}
