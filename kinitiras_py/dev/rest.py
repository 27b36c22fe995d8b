"""A minimal synchronous Kubernetes REST client for dev tooling (stdlib only).

The serving path uses cluster.client (aiohttp); this is for `dev up` and tests, which are
synchronous and must not depend on the package under test being healthy.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rest:
    """Talks to one API server with a bearer token; TLS verified against ``ca_file``."""

    server: str
    token: str
    ca_file: str

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", timeout: float = 10.0) -> tuple[int, Any]:
        """Send one request; return (HTTP status, decoded JSON body or text)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._context(), timeout=timeout) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, _decode(e.read())

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, Any]:
        """GET ``path``."""
        return self.request("GET", path, timeout=timeout)

    def apply(self, collection: str, obj: dict[str, Any]) -> tuple[int, Any]:
        """Server-side apply ``obj`` into ``collection`` (create or update, field manager ours)."""
        name = obj["metadata"]["name"]
        return self.request(
            "PATCH", f"{collection}/{name}?fieldManager=kinitiras-py-dev&force=true", obj,
            content_type="application/apply-patch+yaml",
        )


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
