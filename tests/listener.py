"""A plain-HTTP listener that counts every TCP connection it accepts, for the egress tests.

It answers every request with ``{"ok": true, "path": <the request's path>}`` (status 200) and
remembers each request line, so a test can tell whether a URL was requested at all, not only
whether an answer came back.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Counts:
    """What the listener saw."""

    port: int = 0
    connections: int = 0
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> tuple[int, int]:
        """(connections, requests) so far."""
        with self.lock:
            return self.connections, len(self.requests)


def _handler(counts: Counts) -> type[socketserver.BaseRequestHandler]:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with counts.lock:
                counts.connections += 1
            sock: socket.socket = self.request
            sock.settimeout(2)
            data = b""
            try:
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                with counts.lock:
                    counts.requests.append(line)
                parts = line.split(" ")
                body = json.dumps({"ok": True, "path": parts[1] if len(parts) > 1 else ""}).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            except OSError:
                pass

    return Handler


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def counting_listener(host: str = "127.0.0.1") -> Iterator[Counts]:
    """A listener on ``host`` (a free port) for the duration of the ``with`` block."""
    counts = Counts()
    server = _Server((host, 0), _handler(counts))
    counts.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="counting-listener", daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        server.shutdown()
        server.server_close()
