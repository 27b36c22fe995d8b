"""Sockets, TLS and lifetime of the webhook (and optional plain-HTTP metrics) listeners."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

from aiohttp import web

log = logging.getLogger("kinitiras_py.webhook")


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS 1.2+ server context loaded with the pair; raises ssl.SSLError for a bad pair."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


class Server:
    """The webhook's HTTPS listener and, when configured, a separate HTTP metrics listener."""

    def __init__(self, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None,
                 metrics_app: web.Application | None = None, metrics_host: str = "127.0.0.1",
                 metrics_port: int = 0, shutdown_timeout: float = 10.0) -> None:
        app.on_response_prepare.append(self._close_when_draining)
        self._runner = web.AppRunner(app, shutdown_timeout=shutdown_timeout, access_log=None)
        self._metrics_runner = web.AppRunner(metrics_app, access_log=None) if metrics_app is not None else None
        self.host, self.port, self.ssl_context = host, port, ssl_context
        self.metrics_host, self.metrics_port = metrics_host, metrics_port
        self.draining = False
        """Set by :meth:`drain`: still serving, but every answer closes its connection."""

    async def start(self) -> None:
        """Bind and serve; ``port`` 0 picks a free port, readable afterwards from ``self.port``."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self.port = _bound_port(self._runner, self.port)
        if self._metrics_runner is not None:
            await self._metrics_runner.setup()
            await web.TCPSite(self._metrics_runner, self.metrics_host, self.metrics_port).start()
            self.metrics_port = _bound_port(self._metrics_runner, self.metrics_port)
        log.info("serving", extra={"address": f"{self.host}:{self.port}", "metrics_port": self.metrics_port})

    def drain(self) -> None:
        """Keep answering every request, old connections and new, but close each connection after
        its answer: the client then connects anew, and once this replica has left the Service's
        endpoints the new connection reaches another replica. Closing idle keep-alive connections
        instead would race with a request the client is sending on one of them."""
        if not self.draining:
            self.draining = True
            log.info("draining: answering with Connection: close")

    async def _close_when_draining(self, _request: web.BaseRequest, response: web.StreamResponse) -> None:
        if self.draining:  # the headers are already prepared here: the header for the client, the flag for us
            response.headers["Connection"] = "close"
            response.force_close()

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (up to the shutdown timeout), close."""
        await self._runner.cleanup()
        if self._metrics_runner is not None:
            await self._metrics_runner.cleanup()


def _bound_port(runner: web.AppRunner, fallback: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return fallback
