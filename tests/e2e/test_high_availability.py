"""Two `serve` replicas sharing the certificate Secret and the Lease, behind a TCP proxy.

The webhook configurations point at a small proxy written here (asyncio, 127.0.0.1): each
connection goes to the first replica that accepts it, so when a replica is gone its connects fail
and the next one takes the connection. TLS passes through untouched (the leaf's SAN is
127.0.0.1). The replicas are started with ``POD_NAME`` = ``replica-a`` / ``replica-b``, so the
Lease's holderIdentity (``<POD_NAME>_<random>``) names the process.

The holder is killed with SIGKILL while it takes all the traffic. An admission whose webhook call
is on the wire at that instant cannot succeed (the API server does not retry a webhook POST and
failurePolicy is Fail), so the proxy sends the signal at an instant when none of the holder's
connections has a request waiting for its answer; every other admission must succeed, during the
handover and after it, and the follower must take the Lease over within the lease duration plus
two retry periods and then act as the leader (an operator-requested leaf rotation).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import fcntl
import os
import signal
import struct
import termios
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kinitiras_py.certs.tls import leaf_fingerprint
from kinitiras_py.dev import processes

# The helpers (and the ``rig`` fixture) of the single-replica tests: same process, same cleanup.
from tests.conftest import Cluster
from tests.e2e.test_certificates_live import (
    Rig,
    Stream,
    poll,
    served_fingerprint,
    validate_calls,
)

pytestmark = pytest.mark.cluster

LEASE_DURATION = 15.0
"""The serve default (kinitiras_py.cluster.leader)."""
HANDOVER_LIMIT = LEASE_DURATION + 1.0
"""The lease runs out 15 s after the holder's last renewal, which came before the kill, and the
follower tries to take it right then: within the lease duration of the kill, plus request and scheduling
time (a second at most, on a loaded machine)."""
CONNECT_TIMEOUT = 1.0
WAITING_TOO_LONG = 1.0
"""Client bytes unanswered for this long are no request (a TLS close_notify, say): a webhook call
is answered within milliseconds."""


@dataclass(eq=False)
class _Link:
    backend: int
    client: Any = None
    """The API server's socket: bytes it sent that the proxy has not read yet wait there."""
    waiting: bool = False
    """Client bytes went up and no answer came back yet."""
    last_up: float = 0.0
    last: float = field(default_factory=time.monotonic)


class Proxy:
    """Forwards each connection to 127.0.0.1:<the first of ``backends`` that accepts>, in a thread."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = list(backends)
        self.port = 0
        self.connections: Counter[int] = Counter()
        """Connections forwarded, by backend port."""
        self.connect_failures: Counter[int] = Counter()
        """Connects refused (or timed out), by backend port."""
        self.dropped = 0
        """Client connections closed because no backend accepted."""
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tcp-proxy", daemon=True)

    def start(self) -> Proxy:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def kill_when_quiet(self, backend: int, pid: int, timeout: float = 10.0) -> tuple[float, float, bool]:
        """SIGKILL ``pid`` at an instant when no connection to ``backend`` waits for an answer (or at
        ``timeout``); returns time.monotonic() and time.time() of the kill, and whether it was quiet."""
        future = asyncio.run_coroutine_threadsafe(self._kill_when_quiet(backend, pid, timeout), self._loop)
        return future.result(timeout + 5)

    async def _kill_when_quiet(self, backend: int, pid: int, timeout: float) -> tuple[float, float, bool]:
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            # A request on its way: forwarded and unanswered, or still in the API server's socket
            # (sent, not yet read by this loop); the kill must fall between requests.
            busy = any(link.backend == backend and ((link.waiting and now - link.last_up < WAITING_TOO_LONG)
                                                    or _unread(link.client))
                       for link in self._links)
            if not busy or now > deadline:
                os.kill(pid, signal.SIGKILL)  # within this loop step: no byte moves meanwhile
                return now, time.time(), not busy
            await asyncio.sleep(0.0005)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0.1))
            self._loop.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        for backend in list(self.backends):
            try:
                upstream_r, upstream_w = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", backend), CONNECT_TIMEOUT)
            except (OSError, TimeoutError):
                self.connect_failures[backend] += 1
                continue
            break
        else:
            self.dropped += 1
            client_w.close()
            return
        self.connections[backend] += 1
        link = _Link(backend, client_w.get_extra_info("socket"))
        self._links.add(link)
        try:
            await asyncio.gather(self._pipe(client_r, upstream_w, link, up=True),
                                 self._pipe(upstream_r, client_w, link, up=False))
        finally:
            self._links.discard(link)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link, up: bool) -> None:
        try:
            while data := await src.read(65536):
                link.last = time.monotonic()
                if up:
                    link.waiting, link.last_up = True, link.last
                else:
                    link.waiting = False
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side gone: close both, so the API server drops the connection from its pool.
            dst.close()
            link.waiting = False


def _unread(sock: Any) -> int:
    """Bytes received on ``sock`` and not read yet (0 when it is gone)."""
    if sock is None:
        return 0
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return 0


@pytest.fixture
def rig(cluster: Cluster) -> Iterator[Rig]:
    """Namespaces and names of this test; processes and webhook configurations removed afterwards."""
    owned = Rig(cluster)
    try:
        yield owned
    finally:
        owned.cleanup()


def lease_holder(rig: Rig) -> str:
    return rig.cluster.kubectl("get", "lease", rig.lease, "-n", rig.namespace, "-o",
                               "jsonpath={.spec.holderIdentity}").stdout.strip()


def lease_acquired(rig: Rig) -> float:
    """spec.acquireTime of the Lease (written by the new holder as it takes over), as a time.time()."""
    stamp = rig.cluster.kubectl("get", "lease", rig.lease, "-n", rig.namespace, "-o",
                                "jsonpath={.spec.acquireTime}").stdout.strip()
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_the_follower_takes_over_when_the_holder_is_killed(rig: Rig) -> None:
    a_port, b_port = _two_ports()
    proxy = Proxy([a_port, b_port]).start()
    rig.after.append(proxy.stop)  # after the webhook configurations are gone
    stream: Stream | None = None
    try:
        url = f"https://127.0.0.1:{proxy.port}"
        a = rig.start("replica-a", webhook_url=url, port=a_port)
        rig.wait_ready(a)  # the first replica takes the Lease, creates the Secret and registers
        b = rig.start("replica-b", webhook_url=url, port=b_port)
        rig.wait_ready(b)
        holder_id = poll(lambda: lease_holder(rig), 20, "a Lease holder")
        replicas = {"replica-a": a, "replica-b": b}
        holder = replicas[holder_id.split("_")[0]]
        follower = b if holder is a else a
        proxy.backends = [holder.port, follower.port]  # the holder takes every connection while it lives
        rig.deny_bad_configmaps()
        fp0 = leaf_fingerprint(rig.data()["tls.crt"])
        poll(lambda: served_fingerprint(a.port) == served_fingerprint(b.port) == fp0, 10, "both serving the leaf")
        before = {r.name: validate_calls(r.port) for r in (a, b)}

        stream = Stream(rig.cluster.rest, rig.objects, rate=30, duration=40, prefix=f"ha-{rig.suffix}").start()
        poll(lambda: stream is not None and stream.elapsed() >= 5, 10, "5 s of stream")
        holder_calls = validate_calls(holder.port) - before[holder.name]
        killed_at, killed_wall, quiet = proxy.kill_when_quiet(holder.port, holder.proc.pid)
        killed_in_stream = stream.elapsed() - (time.monotonic() - killed_at)
        holder.proc.wait(10)
        poll(lambda: lease_holder(rig).startswith(f"{follower.name}_"), HANDOVER_LIMIT + 5,
             f"{follower.name} to take the Lease over", interval=0.1)
        seen = time.monotonic() - killed_at
        handover = lease_acquired(rig) - killed_wall  # same host: the clocks agree
        failures_during_handover = stream.failures_so_far()
        # the new holder leads: it honours a rotation request, and the proxy serves its new leaf
        rig.annotate("leaf")
        fp1 = poll(lambda: (fp := served_fingerprint(proxy.port)) != fp0 and fp, 15, "the new leader's leaf")
        assert fp1 == leaf_fingerprint(rig.data()["tls.crt"])
        rotated_in_stream = stream.elapsed()
        assert stream.elapsed() < stream.duration - 3, "the stream ended before the checks after the handover"
    finally:
        report = stream.join() if stream is not None else None
    assert report is not None
    print(f"\nhigh availability: {report.describe()}; {holder.name} killed at t={killed_in_stream:.1f} s "
          f"(quiet instant: {quiet}), {follower.name} took the Lease {handover:.1f} s later (seen after {seen:.1f} s), "
          f"failures during the handover {failures_during_handover}; new leaf served by t={rotated_in_stream:.1f} s; "
          f"proxy connections {dict(proxy.connections)}, connect failures {dict(proxy.connect_failures)}")
    assert report.error is None and report.failures == [], \
        f"{report.error}; {len(report.failures)} failed admissions: {report.failures[:10]}"
    assert report.rate >= 20, report.describe()
    assert handover <= HANDOVER_LIMIT, f"handover took {handover:.1f} s"
    assert holder_calls > 0, "the holder took no traffic before it was killed"
    assert proxy.connect_failures[holder.port] > 0, "no connection was sent to the killed replica's port"
    assert proxy.dropped == 0
    assert validate_calls(follower.port) - before[follower.name] > 0
    assert follower.proc.poll() is None and "leading certificate rotation" in follower.log.read_text()


def _two_ports() -> tuple[int, int]:
    first = processes.free_port()
    while (second := processes.free_port()) == first:
        pass
    return first, second
