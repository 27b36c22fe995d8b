"""A steady stream of admissions through the API server, each one recorded with its start, end and result.

Dry-run ConfigMap creations in a namespace whose ConfigMaps a validate policy selects: each one
makes the API server call the webhook, and anything but 201 is a failed admission. The tests that
stop or kill replicas judge every request by when it ran, so each record keeps its own times
(``time.monotonic()``, the clock the tests stamp their kills with).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import threading
import time
from dataclasses import dataclass

import aiohttp

from kinitiras_py.dev.rest import Rest


@dataclass(frozen=True)
class Admission:
    """One request of the stream."""

    index: int
    start: float
    end: float
    status: int
    """The HTTP status, 0 when the request itself failed (connection reset...)."""
    detail: str
    """Empty for a 201; otherwise the start within the stream, status and the start of the body."""

    @property
    def ok(self) -> bool:
        return self.status == 201

    def overlaps(self, since: float, until: float) -> bool:
        """Whether the request was open at some moment between ``since`` and ``until``."""
        return self.start <= until and self.end >= since


@dataclass
class StreamReport:
    """What the stream saw, once it ended."""

    admissions: list[Admission]
    send_span: float
    total_span: float
    error: str | None = None
    """Why the stream itself broke (None when it ran to the end)."""

    @property
    def sent(self) -> int:
        return len(self.admissions)

    @property
    def statuses(self) -> collections.Counter[int]:
        return collections.Counter(a.status for a in self.admissions)

    @property
    def failures(self) -> list[str]:
        return [a.detail for a in self.admissions if not a.ok]

    @property
    def rate(self) -> float:
        """Requests sent per second."""
        return self.sent / self.send_span if self.send_span else 0.0

    def describe(self) -> str:
        lat = sorted(a.end - a.start for a in self.admissions) or [0.0]
        return (f"{self.sent} sent in {self.send_span:.1f} s ({self.rate:.1f} req/s), statuses {dict(self.statuses)}, "
                f"failures {len(self.failures)}, latency p50 {lat[len(lat) // 2] * 1000:.0f} ms "
                f"p99 {lat[int(len(lat) * 0.99)] * 1000:.0f} ms max {lat[-1] * 1000:.0f} ms")


class Stream:
    """Dry-run ConfigMap creations at a steady ``rate`` for ``duration`` seconds (or until
    :meth:`finish`), in a thread of its own (asyncio + aiohttp, the admin token), at most
    ``concurrency`` open at once."""

    def __init__(self, rest: Rest, namespace: str, *, rate: float, duration: float, prefix: str,
                 concurrency: int = 200) -> None:
        self.rest, self.namespace, self.rate, self.duration = rest, namespace, rate, duration
        self.prefix, self.concurrency = prefix, concurrency
        self.t0 = 0.0
        self.admissions: list[Admission] = []
        """Completed requests, in the order they ended."""
        self.send_span = 0.0
        self.total_span = 0.0
        self._started = threading.Event()
        self._finish = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="admission-stream", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> Stream:
        self._thread.start()
        assert self._started.wait(10), "the stream did not start"
        return self

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def finish(self) -> None:
        """Send no more requests (those sent still complete); :meth:`join` waits for them."""
        self._finish.set()

    def join(self) -> StreamReport:
        """Wait for the end; never raises (it runs in ``finally`` blocks): see ``StreamReport.error``."""
        self._thread.join(self.duration + 60)
        error = "the stream did not finish" if self._thread.is_alive() else None
        if self._error is not None:
            error = f"the stream broke: {self._error!r}"
        return StreamReport(list(self.admissions), self.send_span, self.total_span, error)

    async def _run(self) -> None:
        try:
            ctx = ssl.create_default_context(cafile=self.rest.ca_file)
            connector = aiohttp.TCPConnector(ssl=ctx, limit=self.concurrency)
            headers = {"Authorization": f"Bearer {self.rest.token}", "Accept": "application/json"}
            async with aiohttp.ClientSession(connector=connector, headers=headers,
                                             timeout=aiohttp.ClientTimeout(total=30)) as session:
                url = f"{self.rest.server}/api/v1/namespaces/{self.namespace}/configmaps?dryRun=All"
                slots = asyncio.Semaphore(self.concurrency)
                tasks = []
                total = int(self.rate * self.duration)
                self.t0 = time.monotonic()
                self._started.set()
                for i in range(total):
                    delay = self.t0 + i / self.rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if self._finish.is_set():
                        break
                    await slots.acquire()
                    tasks.append(asyncio.create_task(self._one(session, url, i, slots)))
                self.send_span = time.monotonic() - self.t0
                await asyncio.gather(*tasks)
                self.total_span = time.monotonic() - self.t0
        except BaseException as e:  # reported by join()
            self._error = e
            self._started.set()

    async def _one(self, session: aiohttp.ClientSession, url: str, i: int, slots: asyncio.Semaphore) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{self.prefix}-{i}"},
                "data": {"i": str(i)}}
        start = time.monotonic()
        try:
            async with session.post(url, json=body) as resp:
                text = await resp.text()
                status = resp.status
        except Exception as e:
            status, text = 0, repr(e)
        finally:
            slots.release()
        detail = "" if status == 201 else f"t={start - self.t0:.2f}s #{i}: {status} {text[:300]}"
        self.admissions.append(Admission(i, start, time.monotonic(), status, detail))
