"""Where the webhook's CA and serving certificate live.

:class:`SecretStore` keeps them in a Kubernetes Secret (type ``kubernetes.io/tls``, keys
``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``). Unlike kinitiras, a missing Secret is
**created**. Writes are optimistic: an update carries the resourceVersion that was read, and a
409 (or a Secret that appeared or vanished meanwhile) raises :class:`Conflict`; :func:`modify`
then reads again and asks its ``decide`` function again. Annotations (the replicas' serving
reports) are merge-patched without a resourceVersion, so they never clobber a data write and
only ever touch their own keys.

:class:`FileStore` keeps the same data as files in a directory (``ca.crt``, ``ca.key``,
``tls.crt``, ``tls.key`` plus ``annotations.json``), for local use without a cluster; its
version is a digest of the contents, so the same conflict rules hold within one machine.

RBAC for the Secret store: ``secrets`` get, create, update, patch in the namespace, and
``events`` create.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.certs.policy import CA_KEY, KEYS, TLS_KEY
from kinitiras_py.cluster.client import Api, ApiException

log = logging.getLogger(__name__)

__all__ = ["CertStore", "Change", "Conflict", "FileStore", "SecretStore", "Snapshot", "modify"]

TLS_TYPE = "kubernetes.io/tls"
REQUEST_TIMEOUT = 10.0
_SECRET_KEYS = frozenset({CA_KEY, TLS_KEY})


class Conflict(KinitirasError):
    """Someone else wrote first (409, or the object appeared or vanished): read again and re-decide."""


@dataclass(frozen=True)
class Snapshot:
    """The stored data as read, with the version a later update must match."""

    data: dict[str, bytes]
    annotations: dict[str, str] = field(default_factory=dict)
    version: str = ""
    obj: Obj | None = None
    """The raw object (Secret store only)."""


@dataclass(frozen=True)
class Change:
    """What :func:`modify`'s ``decide`` wants written: data keys to set, annotations to set
    (a None value deletes the annotation)."""

    data: Mapping[str, bytes]
    annotations: Mapping[str, str | None] = field(default_factory=dict)


class CertStore(Protocol):
    """Read, create and conditionally update the certificate data; annotate; report Events."""

    description: str

    async def read(self) -> Snapshot | None:
        """The current data, or None when nothing is stored."""

    async def create(self, data: Mapping[str, bytes], annotations: Mapping[str, str | None] | None = None
                     ) -> Snapshot:
        """Store ``data`` where nothing exists yet; Conflict when something does."""

    async def update(self, snapshot: Snapshot, data: Mapping[str, bytes],
                     annotations: Mapping[str, str | None] | None = None) -> Snapshot:
        """Replace the keys of ``data`` if nothing changed since ``snapshot``; Conflict otherwise."""

    async def annotate(self, annotations: Mapping[str, str | None]) -> Snapshot | None:
        """Set (or with None, delete) annotations whatever the version; None when nothing is stored."""

    async def event(self, reason: str, message: str, type_: str = "Warning") -> bool:
        """Report an Event about the stored object; True when recorded."""


async def modify(store: CertStore, decide: Callable[[Snapshot | None], Change | None], attempts: int = 5
                 ) -> Snapshot | None:
    """Read, ``decide``, write; on a Conflict read and decide again (up to ``attempts`` times).
    Returns what was written, or the snapshot ``decide`` declined to change (None: nothing stored)."""
    for attempt in range(1, attempts + 1):
        snapshot = await store.read()
        change = decide(snapshot)
        if change is None:
            return snapshot
        try:
            if snapshot is None:
                return await store.create(change.data, change.annotations)
            return await store.update(snapshot, change.data, change.annotations)
        except Conflict as e:
            log.debug("%s: conflict on attempt %d: %s", store.description, attempt, e)
    raise Conflict(f"{store.description}: still conflicting after {attempts} attempts")


def _merge_annotations(current: Mapping[str, str], changes: Mapping[str, str | None] | None) -> dict[str, str]:
    merged = dict(current)
    for key, value in (changes or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


class SecretStore:
    """The data in Secret ``namespace``/``name``."""

    def __init__(self, client: Any, namespace: str, name: str, *, component: str = "kinitiras-py",
                 timeout: float = REQUEST_TIMEOUT) -> None:
        self._api = Api.of(client)
        self.namespace, self.name, self.component, self.timeout = namespace, name, component, timeout
        self.description = f"Secret {namespace}/{name}"
        self._path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
        self._last: Obj | None = None

    @staticmethod
    def _snapshot(obj: Obj) -> Snapshot:
        data: dict[str, bytes] = {}
        for key, value in (obj.get("data") or {}).items():
            try:
                data[key] = base64.b64decode(value or "", validate=True)
            except ValueError:
                data[key] = b""
        meta = obj.get("metadata") or {}
        return Snapshot(data, dict(meta.get("annotations") or {}), str(meta.get("resourceVersion") or ""), obj)

    def _remember(self, obj: Obj) -> Snapshot:
        self._last = obj
        return self._snapshot(obj)

    async def read(self) -> Snapshot | None:
        """GET the Secret; None when it does not exist."""
        try:
            obj = await self._api.request("GET", self._path, timeout=self.timeout)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return self._remember(obj)

    async def create(self, data: Mapping[str, bytes], annotations: Mapping[str, str | None] | None = None
                     ) -> Snapshot:
        """POST a ``kubernetes.io/tls`` Secret (every key present, empty when not given)."""
        values = {k: b"" for k in KEYS} | dict(data)
        body: Obj = {
            "apiVersion": "v1", "kind": "Secret", "type": TLS_TYPE,
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "annotations": _merge_annotations({}, annotations),
                         "labels": {"app.kubernetes.io/managed-by": self.component}},
            "data": {k: base64.b64encode(v).decode() for k, v in values.items()},
        }
        try:
            obj = await self._api.request("POST", f"/api/v1/namespaces/{self.namespace}/secrets", body=body,
                                          timeout=self.timeout)
        except ApiException as e:
            if e.status == 409:
                raise Conflict(f"{self.description} already exists") from None
            raise
        log.info("created %s", self.description)
        return self._remember(obj)

    async def update(self, snapshot: Snapshot, data: Mapping[str, bytes],
                     annotations: Mapping[str, str | None] | None = None) -> Snapshot:
        """PUT the Secret read as ``snapshot`` with ``data`` merged in, guarded by its resourceVersion."""
        if snapshot.obj is None:
            raise ValueError("a Secret snapshot carries its object")
        body = copy.deepcopy(snapshot.obj)
        body["data"] = dict(body.get("data") or {}) | {k: base64.b64encode(v).decode() for k, v in data.items()}
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = snapshot.version
        meta["annotations"] = _merge_annotations(meta.get("annotations") or {}, annotations)
        try:
            obj = await self._api.request("PUT", self._path, body=body, timeout=self.timeout)
        except ApiException as e:
            if e.status in (404, 409):
                raise Conflict(f"{self.description} changed since version {snapshot.version}") from None
            raise
        return self._remember(obj)

    async def annotate(self, annotations: Mapping[str, str | None]) -> Snapshot | None:
        """Merge-patch annotations (no resourceVersion: only these keys are touched)."""
        body = {"metadata": {"annotations": dict(annotations)}}
        try:
            obj = await self._api.request("PATCH", self._path, body=body, content_type="application/merge-patch+json",
                                          timeout=self.timeout)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return self._remember(obj)

    async def event(self, reason: str, message: str, type_: str = "Warning") -> bool:
        """Create a core/v1 Event about the Secret; False (logged) when that fails."""
        meta = (self._last or {}).get("metadata") or {}
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {"apiVersion": "v1", "kind": "Secret", "namespace": self.namespace, "name": self.name,
                    "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason, "message": message[:1024], "type": type_,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self._api.request("POST", f"/api/v1/namespaces/{self.namespace}/events", body=event,
                                    timeout=self.timeout)
        except Exception as e:  # an Event is best effort
            log.warning("event %s on %s not created: %s", reason, self.description, e)
            return False
        return True


class FileStore:
    """The data as files in ``directory`` (created on first write); Events are logged and kept
    in :attr:`events`."""

    ANNOTATIONS = "annotations.json"

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.description = f"directory {self.directory}"
        self.events: list[tuple[str, str, str]] = []
        """(type, reason, message) of every Event reported."""

    def _read_sync(self) -> Snapshot | None:
        data: dict[str, bytes] = {}
        for key in KEYS:
            try:
                data[key] = (self.directory / key).read_bytes()
            except FileNotFoundError:
                continue
        if not data:
            return None
        try:
            annotations = json.loads((self.directory / self.ANNOTATIONS).read_text())
        except (FileNotFoundError, ValueError):
            annotations = {}
        digest = hashlib.sha256()
        for key in KEYS:
            digest.update(key.encode() + b"\0" + data.get(key, b"") + b"\0")
        digest.update(json.dumps(annotations, sort_keys=True).encode())
        return Snapshot(data, {str(k): str(v) for k, v in annotations.items()}, digest.hexdigest()[:16])

    def _write(self, name: str, content: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        tmp = path.with_name(f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if name in _SECRET_KEYS else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)

    def _write_all(self, current: Snapshot | None, data: Mapping[str, bytes],
                   annotations: Mapping[str, str | None] | None) -> Snapshot:
        values = {k: b"" for k in KEYS} | (current.data if current else {}) | dict(data)
        # Keys first: a reader seeing a new key with an old certificate refuses the pair and retries.
        for key in sorted(values, key=lambda k: k not in _SECRET_KEYS):
            self._write(key, values[key])
        merged = _merge_annotations(current.annotations if current else {}, annotations)
        self._write(self.ANNOTATIONS, json.dumps(merged, sort_keys=True, indent=1).encode())
        written = self._read_sync()
        assert written is not None
        return written

    async def read(self) -> Snapshot | None:
        """The files' contents; None when none of the four exists."""
        return self._read_sync()

    async def create(self, data: Mapping[str, bytes], annotations: Mapping[str, str | None] | None = None
                     ) -> Snapshot:
        """Write the files; Conflict when some already exist."""
        if self._read_sync() is not None:
            raise Conflict(f"{self.description} already holds certificates")
        return self._write_all(None, data, annotations)

    async def update(self, snapshot: Snapshot, data: Mapping[str, bytes],
                     annotations: Mapping[str, str | None] | None = None) -> Snapshot:
        """Rewrite the files when their contents are still those of ``snapshot``."""
        current = self._read_sync()
        if current is None or current.version != snapshot.version:
            raise Conflict(f"{self.description} changed since version {snapshot.version}")
        return self._write_all(current, data, annotations)

    async def annotate(self, annotations: Mapping[str, str | None]) -> Snapshot | None:
        """Merge ``annotations`` into ``annotations.json``."""
        current = self._read_sync()
        if current is None:
            return None
        merged = _merge_annotations(current.annotations, annotations)
        self._write(self.ANNOTATIONS, json.dumps(merged, sort_keys=True, indent=1).encode())
        return self._read_sync()

    async def event(self, reason: str, message: str, type_: str = "Warning") -> bool:
        """Log the Event and keep it in :attr:`events`."""
        self.events.append((type_, reason, message))
        log.log(logging.WARNING if type_ == "Warning" else logging.INFO, "%s %s: %s", self.description, reason,
                message)
        return True
