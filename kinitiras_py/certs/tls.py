"""The serving TLS context (given to the webhook's listener), with certificates swapped in while serving.

Approach (verified, see the reference notes on aiohttp TLS hot reload): the listener gets one
``ssl.SSLContext`` for its whole life. Its ``sni_callback`` runs at the start of every handshake
(also for clients that send no SNI) and points the connection at the *current* context. A reload
builds a **fresh** context, loads the new pair into it (``load_cert_chain`` checks that the key
matches the certificate) and only then replaces the reference. A bad pair therefore never
touches anything that serves: calling ``load_cert_chain`` on a live context with a mismatched
pair would leave it broken (every later handshake reset). New handshakes get the new pair;
established (keep-alive) connections keep the session they negotiated.

The PEM bytes are handed to OpenSSL through anonymous in-memory files (``memfd_create``), so
nothing is written to disk unless a ``directory`` is given; there ``tls.crt`` and ``tls.key``
are replaced atomically after each successful reload (for tools that read the files). Where
``memfd_create`` is missing (not Linux) a private temporary directory is used and removed at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509

from kinitiras_py.certs import policy

log = logging.getLogger("kinitiras_py.certs.tls")

__all__ = ["ReloadableTLS", "leaf_fingerprint"]


def leaf_fingerprint(cert_pem: bytes) -> str:
    """SHA-256 (hex) of the DER form of the first certificate in ``cert_pem``; raises ValueError."""
    return policy.fingerprint(x509.load_pem_x509_certificate(cert_pem))


@contextlib.contextmanager
def _pem_files(cert_pem: bytes, key_pem: bytes) -> Iterator[tuple[str, str]]:
    """Paths OpenSSL can open that hold the two PEMs, valid inside the ``with`` block."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fds: list[int] = []
        try:
            for name, data in (("tls.crt", cert_pem), ("tls.key", key_pem)):
                fd = memfd(name, getattr(os, "MFD_CLOEXEC", 0))
                fds.append(fd)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="kinitiras-tls-") as tmp:
        cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_file.write_bytes(cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        yield str(cert_file), str(key_file)


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class ReloadableTLS:
    """Owns the listener's ``ssl.SSLContext`` (:attr:`context`) and the pair it serves.

    Pass :attr:`context` to the HTTPS server once; call :meth:`reload` whenever a new pair
    arrives. Built without a pair, the context fails every handshake until the first good reload.
    """

    def __init__(self, cert_pem: bytes | None = None, key_pem: bytes | None = None, *,
                 directory: Path | None = None,
                 minimum_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2) -> None:
        self.minimum_version = minimum_version
        self.directory = directory
        self.context = self._new_context()
        """The listener's context: give it to the server; it is never reloaded in place."""
        self.context.sni_callback = self._select
        self._current: ssl.SSLContext | None = None
        self._cert_pem: bytes | None = None
        self._fingerprint: str | None = None
        self._not_after: float | None = None
        self._key_digest = b""
        self.reloads = 0
        """Successful loads (the first one included)."""
        self.failures = 0
        """Refused pairs."""
        if (cert_pem is not None or key_pem is not None) and (
                cert_pem is None or key_pem is None or not self.reload(cert_pem, key_pem)):
            raise ValueError("the initial certificate and key are not a valid pair")

    def _new_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = self.minimum_version
        return ctx

    def _select(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                listener: ssl.SSLContext) -> None:
        current = self._current
        if current is not None and current is not listener:
            connection.context = current

    @property
    def fingerprint(self) -> str | None:
        """SHA-256 (hex) of the served leaf certificate, or None before the first load."""
        return self._fingerprint

    @property
    def not_after(self) -> float | None:
        """When the served leaf certificate expires (Unix seconds), or None before the first load."""
        return self._not_after

    @property
    def cert_pem(self) -> bytes | None:
        """The served certificate (chain) PEM, or None before the first load."""
        return self._cert_pem

    @property
    def loaded(self) -> bool:
        """True once a pair is being served."""
        return self._current is not None

    def reload(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve ``cert_pem``/``key_pem`` to new handshakes; False (logged, nothing changed) when
        the pair is unusable: unparsable PEM, or a key that does not match the certificate."""
        if cert_pem == self._cert_pem and self._current is not None and self._same_key(key_pem):
            return True
        try:
            fingerprint = leaf_fingerprint(cert_pem)
            not_after = x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()
            fresh = self._new_context()
            with _pem_files(cert_pem, key_pem) as (cert_file, key_file):
                fresh.load_cert_chain(cert_file, key_file)
        except (ValueError, ssl.SSLError, OSError) as e:
            self.failures += 1
            log.warning("refused a certificate/key pair; still serving %s: %s", self._fingerprint or "nothing", e)
            return False
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                _write_atomically(self.directory / "tls.key", key_pem, 0o600)
                _write_atomically(self.directory / "tls.crt", cert_pem, 0o644)
            except OSError as e:
                log.warning("could not write the pair to %s: %s", self.directory, e)
        if self._current is None:
            # A fallback for the listener itself, used only if the callback could not swap.
            with _pem_files(cert_pem, key_pem) as (cert_file, key_file):
                self.context.load_cert_chain(cert_file, key_file)
        self._current, self._cert_pem, self._key_digest = fresh, cert_pem, hashlib.sha256(key_pem).digest()
        previous, self._fingerprint, self._not_after = self._fingerprint, fingerprint, not_after
        self.reloads += 1
        log.info("serving certificate %s", fingerprint, extra={"previous": previous})
        return True

    def _same_key(self, key_pem: bytes) -> bool:
        return self._key_digest == hashlib.sha256(key_pem).digest()

    def reload_files(self, cert_file: Path, key_file: Path) -> bool:
        """:meth:`reload` from two files (for example a mounted Secret); False when unreadable."""
        try:
            cert_pem, key_pem = cert_file.read_bytes(), key_file.read_bytes()
        except OSError as e:
            log.warning("could not read %s / %s: %s", cert_file, key_file, e)
            self.failures += 1
            return False
        return self.reload(cert_pem, key_pem)
