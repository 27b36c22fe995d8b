"""A lean closed-loop HTTPS load: keep-alive connections, each sending the next request as soon as
the previous answer is in.

It writes prepared HTTP/1.1 requests (bytes built before the run: one sent over and over, or
one for each request, e.g. Pods unlike each other) and reads the answer by its
Content-Length, with no HTTP client library in between, so that the load costs far less CPU
than the servers it measures. Its own CPU time is recorded so that the report can show it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Load:
    """What one closed-loop run did; durations in seconds."""

    answered: int
    errors: int
    elapsed: float
    latencies: list[float]
    cpu: float
    """CPU time this process (the load) used during the run."""
    first_error: str = ""
    """The status and start of the first answer counted as an error."""
    sent: list[int] = field(default_factory=list)
    """For each latency, the number of its request in the run (from 0, in the order sent)."""

    @property
    def rate(self) -> float:
        """Answers per second."""
        return self.answered / self.elapsed if self.elapsed else 0.0


def http_request(url: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """The bytes of ``POST url`` carrying ``body`` on a keep-alive connection."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` and read one answer (by Content-Length, or chunked): (HTTP status, body)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            return status, await reader.readexactly(int(value))
        if name == b"transfer-encoding" and b"chunked" in value.lower():
            return status, await _chunks(reader)
    raise ValueError("the answer has neither a Content-Length nor chunks")


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")  # no trailers: the empty line ending the body
    return b"".join(parts)


async def closed_loop(url: str, request: bytes | Sequence[bytes], context: ssl.SSLContext, connections: int,
                      seconds: float, ok: bytes, limit: int | None = None) -> Load:
    """Send ``request`` over ``connections`` keep-alive connections for ``seconds`` (or until
    ``limit`` answers); an answer counts as an error unless its status is 2xx and it contains ``ok``.
    A sequence of requests is sent in its order, the n-th request sent being ``request[n % len]``."""
    requests = [request] if isinstance(request, bytes) else list(request)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    streams = [await asyncio.open_connection(host, port, ssl=context) for _ in range(connections)]
    latencies: list[float] = []
    sent_numbers: list[int] = []
    errors = 0
    clock = time.perf_counter
    cpu_start, start = time.process_time(), clock()
    deadline = start + seconds

    started = 0
    first_error: list[str] = []

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal errors, started
        while clock() < deadline and (limit is None or started < limit):
            number = started
            started += 1
            sent = clock()
            status, body = await exchange(reader, writer, requests[number % len(requests)])
            latencies.append(clock() - sent)
            sent_numbers.append(number)
            if not (200 <= status < 300 and ok in body):
                errors += 1
                first_error.append(f"HTTP {status}: {body[:300].decode(errors='replace')}")

    try:
        await asyncio.gather(*(one(r, w) for r, w in streams))
        elapsed, cpu = clock() - start, time.process_time() - cpu_start
    finally:
        for _, writer in streams:
            writer.close()
    return Load(answered=len(latencies), errors=errors, elapsed=elapsed, latencies=latencies, cpu=cpu,
                first_error=first_error[0] if first_error else "", sent=sent_numbers)


async def once(url: str, body: bytes, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> bytes:
    """The body of one answer to ``POST url`` on a fresh connection; RuntimeError unless HTTP 2xx."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port, ssl=context)
    try:
        status, answer = await exchange(reader, writer, http_request(url, body, headers))
    finally:
        writer.close()
    if not 200 <= status < 300:
        raise RuntimeError(f"benchmark setup is wrong: {url} answered HTTP {status}: {answer[:300]!r}")
    return answer
