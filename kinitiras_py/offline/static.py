"""File-backed implementations of the reference protocols for the offline CLI and tests."""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.refs.egress import Egress


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
    """Canned responses: context documents ``{kind: HTTPResponse, url, method?, params?, body, header?}``.

    A response matches a request with the same method (default GET) and URL; when it gives
    ``params``, the request's query parameters (after placeholder substitution) must equal them,
    so one file can answer differently per object. The first matching document wins.

    The URL is held to ``egress`` as the webhook would hold it, except that host names are not
    resolved here (the webhook refuses a name that resolves only to guarded addresses).
    """

    def __init__(self, objects: Sequence[Obj] = (), egress: Egress | None = None) -> None:
        self._responses = [o for o in objects if o.get("kind") == "HTTPResponse"]
        self.egress = egress if egress is not None else Egress()

    async def fetch(self, spec: Obj, namespaced: bool) -> Obj:
        """The canned response for the request's method, URL and params; LookupError when the egress
        setting refuses the URL or no response is given."""
        self.egress.check(str(spec.get("url")), namespaced)
        method = str(spec.get("method") or "GET").upper()
        params = {str(k): str(v) for k, v in (spec.get("params") or {}).items()}
        for found in self._responses:
            if str(found.get("method") or "GET").upper() != method or str(found.get("url")) != str(spec.get("url")):
                continue
            wanted = found.get("params")
            if wanted is not None and {str(k): str(v) for k, v in wanted.items()} != params:
                continue
            return {"body": found.get("body"), "header": found.get("header") or {}}
        query = "&".join(f"{k}={v}" for k, v in sorted(params.items()))
        raise LookupError(f"no HTTPResponse given in --context for {method} {spec.get('url')}"
                          + (f"?{query}" if query else ""))
