"""A plain-HTTP listener that counts every TCP connection it accepts, for the egress tests.

It answers every request with ``{"ok": true, "path": <the request's path>}`` (status 200) and
remembers each request (the address it arrived on, its Host header, its request line), so a test
can tell whether a URL was requested at all, and where, not only whether an answer came back.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Seen:
    """One request: the listener's address it arrived on, its Host header and its request line."""

    address: str
    host: str
    line: str


@dataclass
class Counts:
    """What the listener saw."""

    port: int = 0
    connections: int = 0
    requests: list[Seen] = field(default_factory=list)
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
                head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
                line = head[0]
                host = next((h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("host:")), "")
                with counts.lock:
                    counts.requests.append(Seen(str(sock.getsockname()[0]), host, line))
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


def local_address() -> str | None:
    """This machine's address on its default route, when it has one besides loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


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
