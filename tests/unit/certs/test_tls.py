"""ReloadableTLS behind a real aiohttp HTTPS server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kinitiras_py.certs import authority
from kinitiras_py.certs.tls import ReloadableTLS, leaf_fingerprint
from tests.conftest import serve_tls

CA = authority.new_ca()
FIRST = authority.new_serving(CA, ["first.test"], ["127.0.0.1"])
SECOND = authority.new_serving(CA, ["second.test"], ["127.0.0.1"])


def client_context() -> ssl.SSLContext:
    return ssl.create_default_context(cadata=CA.cert.decode())


@pytest.fixture
async def server() -> AsyncIterator[tuple[ReloadableTLS, int]]:
    tls = ReloadableTLS(FIRST.cert, FIRST.key)
    runner, port = await serve_tls(tls)
    try:
        yield tls, port
    finally:
        await runner.cleanup()


class Connection:
    """One HTTPS connection that sends keep-alive requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(),
                                                       server_hostname="127.0.0.1")
        return cls(reader, writer)

    @property
    def fingerprint(self) -> str:
        der = self.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return hashlib.sha256(der).hexdigest()

    async def get(self) -> int:
        self.writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 5)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await self.reader.readexactly(length)
        return int(head.split(b" ")[1])

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await self.writer.wait_closed()


async def handshake_fingerprint(port: int) -> str:
    conn = await Connection.open(port)
    try:
        assert await conn.get() == 200
        return conn.fingerprint
    finally:
        await conn.close()


async def test_new_handshakes_get_the_reloaded_pair(server: tuple[ReloadableTLS, int]) -> None:
    tls, port = server
    assert await handshake_fingerprint(port) == leaf_fingerprint(FIRST.cert) == tls.fingerprint
    assert tls.reload(SECOND.cert, SECOND.key)
    assert tls.fingerprint == leaf_fingerprint(SECOND.cert)
    assert await handshake_fingerprint(port) == leaf_fingerprint(SECOND.cert)
    assert tls.reload(FIRST.cert, FIRST.key)
    assert await handshake_fingerprint(port) == leaf_fingerprint(FIRST.cert)
    assert tls.reloads == 3


async def test_keep_alive_connections_survive_a_reload(server: tuple[ReloadableTLS, int]) -> None:
    tls, port = server
    kept = await Connection.open(port)
    try:
        assert await kept.get() == 200
        assert tls.reload(SECOND.cert, SECOND.key)
        assert await kept.get() == 200
        assert await kept.get() == 200
        assert kept.fingerprint == leaf_fingerprint(FIRST.cert)
        assert await handshake_fingerprint(port) == leaf_fingerprint(SECOND.cert)
    finally:
        await kept.close()


async def test_a_mismatched_pair_is_refused_and_serving_continues(server: tuple[ReloadableTLS, int]) -> None:
    tls, port = server
    assert not tls.reload(SECOND.cert, FIRST.key)  # a half-rotated Secret: new cert, old key
    assert tls.failures == 1
    assert tls.fingerprint == leaf_fingerprint(FIRST.cert)
    for _ in range(3):
        assert await handshake_fingerprint(port) == leaf_fingerprint(FIRST.cert)
    assert tls.reload(SECOND.cert, SECOND.key)  # a later good pair still loads
    assert await handshake_fingerprint(port) == leaf_fingerprint(SECOND.cert)


@pytest.mark.parametrize(("cert", "key"), [(b"", b""), (b"garbage", FIRST.key), (FIRST.cert, b"not a key"),
                                           (FIRST.key, FIRST.cert)])
async def test_unparsable_material_is_refused(server: tuple[ReloadableTLS, int], cert: bytes, key: bytes) -> None:
    tls, port = server
    assert not tls.reload(cert, key)
    assert await handshake_fingerprint(port) == leaf_fingerprint(FIRST.cert)


async def test_empty_context_refuses_handshakes_until_the_first_pair() -> None:
    tls = ReloadableTLS()
    assert not tls.loaded and tls.fingerprint is None
    runner, port = await serve_tls(tls)
    try:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await handshake_fingerprint(port)
        assert tls.reload(SECOND.cert, SECOND.key)
        assert await handshake_fingerprint(port) == leaf_fingerprint(SECOND.cert)
    finally:
        await runner.cleanup()


def test_an_invalid_initial_pair_raises() -> None:
    with pytest.raises(ValueError, match="valid pair"):
        ReloadableTLS(FIRST.cert, SECOND.key)
    with pytest.raises(ValueError, match="valid pair"):
        ReloadableTLS(FIRST.cert, None)


def test_writes_files_only_when_given_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_temp_files(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no temporary files expected")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_temp_files)
    ReloadableTLS(FIRST.cert, FIRST.key)
    assert list(tmp_path.iterdir()) == []
    tls = ReloadableTLS(FIRST.cert, FIRST.key, directory=tmp_path / "certs")
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == FIRST.cert
    assert stat.S_IMODE((tmp_path / "certs" / "tls.key").stat().st_mode) == 0o600
    assert not tls.reload(SECOND.cert, FIRST.key)
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == FIRST.cert  # a refused pair is not written
    assert tls.reload(SECOND.cert, SECOND.key)
    assert (tmp_path / "certs" / "tls.key").read_bytes() == SECOND.key
    assert tls.reload_files(tmp_path / "certs" / "tls.crt", tmp_path / "certs" / "tls.key")
    assert not tls.reload_files(tmp_path / "missing.crt", tmp_path / "missing.key")


def test_not_after_follows_the_served_certificate_only() -> None:
    tls = ReloadableTLS()
    assert tls.not_after is None
    short = authority.new_serving(CA, ["short.test"], days=10)
    assert tls.reload(FIRST.cert, FIRST.key)
    assert tls.not_after == authority.not_after(FIRST.cert).timestamp()
    assert not tls.reload(short.cert, FIRST.key)  # refused: what is served, and its expiry, stay
    assert tls.not_after == authority.not_after(FIRST.cert).timestamp()
    assert tls.reload(short.cert, short.key)
    assert tls.not_after == authority.not_after(short.cert).timestamp() < authority.not_after(FIRST.cert).timestamp()
