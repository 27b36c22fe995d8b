"""The file-backed store and the read/decide/write retry loop."""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path

import pytest

from kinitiras_py.certs import storage
from kinitiras_py.certs.policy import KEYS
from kinitiras_py.certs.storage import Change, Conflict, FileStore, Snapshot


async def test_file_store_create_read_update(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "certs")
    assert await store.read() is None
    created = await store.create({"ca.crt": b"A", "ca.key": b"K"}, {"note": "1"})
    assert created.data == {"ca.crt": b"A", "ca.key": b"K", "tls.crt": b"", "tls.key": b""}
    assert created.annotations == {"note": "1"}
    assert stat.S_IMODE((tmp_path / "certs" / "ca.key").stat().st_mode) == 0o600
    with pytest.raises(Conflict):
        await store.create({"ca.crt": b"B"})
    updated = await store.update(created, {"tls.crt": b"C"}, {"note": None, "other": "2"})
    assert updated.data["tls.crt"] == b"C" and updated.data["ca.crt"] == b"A"
    assert updated.annotations == {"other": "2"}
    assert updated.version != created.version
    with pytest.raises(Conflict):
        await store.update(created, {"tls.crt": b"D"})  # stale version
    annotated = await store.annotate({"x": "y"})
    assert annotated is not None and annotated.annotations == {"other": "2", "x": "y"}
    assert await store.event("CertificateInvalid", "bad") and store.events == [("Warning", "CertificateInvalid", "bad")]
    assert await FileStore(tmp_path / "none").annotate({"x": "y"}) is None


async def test_modify_rereads_and_redecides_after_a_conflict(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    await store.create({k: b"" for k in KEYS}, {"counter": "0"})
    seen: list[str] = []

    class Racing(FileStore):
        """Another writer slips in between the first read and the first write."""

        raced = False

        async def update(self, snapshot: Snapshot, data: Mapping[str, bytes],
                         annotations: Mapping[str, str | None] | None = None) -> Snapshot:
            if not self.raced:
                self.raced = True
                await FileStore(self.directory).annotate({"counter": "5"})
            return await super().update(snapshot, data, annotations)

    def bump(snapshot: Snapshot | None) -> Change:
        assert snapshot is not None
        seen.append(snapshot.annotations["counter"])
        return Change({}, {"counter": str(int(snapshot.annotations["counter"]) + 1)})

    result = await storage.modify(Racing(tmp_path), bump)
    assert seen == ["0", "5"]  # decided again on the re-read data
    assert result is not None and result.annotations["counter"] == "6"


async def test_modify_creates_when_missing_and_gives_up_eventually(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "new")
    made = await storage.modify(store, lambda s: Change({"ca.crt": b"A"}) if s is None else None)
    assert made is not None and made.data["ca.crt"] == b"A"
    unchanged = await storage.modify(store, lambda s: None)
    assert unchanged == made

    class Always(FileStore):
        async def update(self, *_args: object, **_kwargs: object) -> Snapshot:
            raise Conflict("always")

    with pytest.raises(Conflict, match="after 3 attempts"):
        await storage.modify(Always(tmp_path / "new"), lambda s: Change({"x": b""}), attempts=3)
