"""Two `serve` replicas sharing the certificate Secret and the Lease, behind a TCP proxy.

The webhook configurations point at a small proxy written here (asyncio, 127.0.0.1) that plays
the Service: each new connection goes to the first of its ``backends`` (the endpoints), and an
existing connection stays with the replica it reached, as conntrack keeps it. TLS passes through
untouched (the leaf's SAN is 127.0.0.1). The replicas are started with ``POD_NAME`` =
``replica-a`` / ``replica-b``, so the Lease's holderIdentity (``<POD_NAME>_<random>``) names the
process. The holder takes all the traffic, a stream of admissions each recorded with its start,
end and result, and then:

* **stops gracefully**, as Kubernetes stops a pod: SIGTERM, and a moment later the pod leaves the
  endpoints (the proxy stops sending new connections to it). Nothing may fail: the replica keeps
  answering old connections and new ones through its drain window, hands the Lease over at once,
  and exits on its own; since each answer in the drain closes its connection, no request reaches
  it soon after it has left the endpoints.
* **is killed** with SIGKILL at an arbitrary instant. An admission whose webhook call is on the
  wire then cannot succeed (the API server does not retry a webhook POST, failurePolicy is Fail),
  so those in flight at the kill may fail, and are counted; every request that started after the
  kill must succeed, the follower must take the Lease within the lease duration and then lead.
  The "kill" lasts from the signal until the proxy has closed every connection into the dead
  process (its sockets close a few milliseconds after the signal; until then the API server can
  still send a request into one of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kinitiras_py.certs.tls import leaf_fingerprint
from kinitiras_py.dev import processes

# The helpers of the single-replica tests: same process, same cleanup.
from tests.conftest import Cluster
from tests.e2e.stream import Admission, Stream, StreamReport
from tests.e2e.test_certificates_live import Replica, Rig, poll, served_fingerprint, validate_calls

pytestmark = pytest.mark.cluster

LEASE_DURATION = 15.0
"""The serve default (kinitiras_py.cluster.leader)."""
HANDOVER_LIMIT = LEASE_DURATION + 1.0
"""After a kill the lease runs out 15 s after the holder's last renewal, which came before the kill,
and the follower tries to take it right then: within the lease duration of the kill, plus request
and scheduling time (a second at most, on a loaded machine)."""
RELEASED_HANDOVER_LIMIT = 10.0
"""After SIGTERM the holder releases the Lease and the follower takes it at its next try (every 2 to
2.4 s). Waiting for the lease to run out instead would take 13 s at least (15 s after a renewal that
is at most 2 s old); 10 s leaves a loaded machine room and still tells the two apart."""
DRAIN_SECONDS = 5.0
ENDPOINTS_DELAY = 1.5
"""How long after SIGTERM the proxy stops sending new connections to the stopping replica (the
endpoints controller and kube-proxy take about that long); shorter than the drain window."""
AFTER_HANDOVER = 5.0
"""Seconds of traffic through the new leader before the stream ends."""
CONNECT_TIMEOUT = 1.0


@dataclass(eq=False)
class _Link:
    backend: int


class Proxy:
    """Forwards each connection to 127.0.0.1:<the first of ``backends``>, in a thread.

    With ``fallback`` a connection whose connect is refused goes to the next backend (a Service whose
    endpoints drop a dead pod at once); without it, the client's connection is closed (a Service still
    listing a pod that no longer listens)."""

    def __init__(self, backends: list[int], fallback: bool) -> None:
        self.backends = list(backends)
        self.fallback = fallback
        self.port = 0
        self.connections: Counter[int] = Counter()
        """Connections forwarded, by backend port."""
        self.connect_failures: Counter[int] = Counter()
        """Connects refused (or timed out), by backend port."""
        self.dropped = 0
        """Client connections closed because no backend accepted."""
        self.sent: list[tuple[float, int]] = []
        """(time.monotonic(), backend) of every chunk of client bytes forwarded."""
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
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

    def open_links(self, backend: int) -> int:
        """Connections currently forwarded to ``backend``."""
        return sum(1 for link in list(self._links) if link.backend == backend)

    def sent_to(self, backend: int, since: float, until: float) -> int:
        """Chunks of client bytes forwarded to ``backend`` between ``since`` and ``until``."""
        return sum(1 for at, port in list(self.sent) if port == backend and since <= at <= until)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0.1))
            self._loop.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        backends = list(self.backends)
        for backend in backends if self.fallback else backends[:1]:
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
        link = _Link(backend)
        self._links.add(link)
        try:
            await asyncio.gather(self._pipe(client_r, upstream_w, backend, up=True),
                                 self._pipe(upstream_r, client_w, backend, up=False))
        finally:
            self._links.discard(link)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, backend: int, up: bool) -> None:
        try:
            while data := await src.read(65536):
                if up:
                    self.sent.append((time.monotonic(), backend))
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side gone: close both, so the API server drops the connection from its pool.
            dst.close()


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


@dataclass
class Pair:
    proxy: Proxy
    holder: Replica
    follower: Replica


def start_pair(rig: Rig, *, fallback: bool, extra: tuple[str, ...] = ()) -> Pair:
    """Two replicas behind a proxy, the Lease holder first in its backends; ready, serving one leaf,
    the policy refusing ConfigMaps named bad in force."""
    a_port, b_port = _two_ports()
    proxy = Proxy([a_port, b_port], fallback).start()
    rig.after.append(proxy.stop)  # after the webhook configurations are gone
    url = f"https://127.0.0.1:{proxy.port}"
    a = rig.start("replica-a", webhook_url=url, port=a_port, extra=extra)
    rig.wait_ready(a)  # the first replica takes the Lease, creates the Secret and registers
    b = rig.start("replica-b", webhook_url=url, port=b_port, extra=extra)
    rig.wait_ready(b)
    holder_id = poll(lambda: lease_holder(rig), 30, "a Lease holder")
    holder = {"replica-a": a, "replica-b": b}[holder_id.split("_")[0]]
    follower = b if holder is a else a
    proxy.backends = [holder.port, follower.port]  # the holder takes every new connection while listed
    rig.deny_bad_configmaps()
    fp0 = leaf_fingerprint(rig.data()["tls.crt"])
    poll(lambda: served_fingerprint(a.port) == served_fingerprint(b.port) == fp0, 30, "both serving the leaf")
    return Pair(proxy, holder, follower)


def run_stream(rig: Rig, prefix: str) -> Stream:
    """30 admissions/s until finished (at most 3 minutes), and wait for the first 5 s of them."""
    stream = Stream(rig.cluster.rest, rig.objects, rate=30, duration=180, prefix=f"{prefix}-{rig.suffix}").start()
    poll(lambda: stream.elapsed() >= 5, 30, "5 s of stream")
    return stream


def wait_for_takeover(rig: Rig, follower: Replica, limit: float) -> None:
    poll(lambda: lease_holder(rig).startswith(f"{follower.name}_"), limit + 30,
         f"{follower.name} to take the Lease over", interval=0.1)


def assert_stream_ran(report: StreamReport) -> None:
    assert report.error is None, report.error
    assert report.rate >= 15, report.describe()  # 30 asked; the sender may lag on a loaded machine


def test_a_graceful_stop_loses_no_admission(rig: Rig) -> None:
    pair = start_pair(rig, fallback=False, extra=(f"--drain-seconds={DRAIN_SECONDS}",))
    proxy, holder, follower = pair.proxy, pair.holder, pair.follower
    stream: Stream | None = None
    try:
        stream = run_stream(rig, "stop")
        termed_at, termed_wall = time.monotonic(), time.time()
        holder.proc.send_signal(signal.SIGTERM)
        time.sleep(ENDPOINTS_DELAY)
        proxy.backends = [follower.port]  # the pod left the endpoints
        left_at = time.monotonic()
        assert holder.proc.wait(DRAIN_SECONDS + 60) == 0, holder.log_tail()
        exited_at = time.monotonic()
        wait_for_takeover(rig, follower, RELEASED_HANDOVER_LIMIT)
        handover = lease_acquired(rig) - termed_wall  # same host: the clocks agree
        taken_at = time.monotonic()
        poll(lambda: stream is not None and time.monotonic() - max(exited_at, taken_at) >= AFTER_HANDOVER,
             AFTER_HANDOVER + 30, "traffic after the handover")
    finally:
        if stream is not None:
            stream.finish()
        report = stream.join() if stream is not None else None
    assert report is not None
    draining = proxy.sent_to(holder.port, termed_at, left_at)
    last = max(at for at, port in proxy.sent if port == holder.port)
    print(f"\ngraceful stop: {report.describe()}; SIGTERM to {holder.name} at t={termed_at - stream.t0:.1f} s, "
          f"out of the endpoints {left_at - termed_at:.1f} s later ({draining} chunks sent to it meanwhile, the last "
          f"{last - left_at:.2f} s after it left), "
          f"exited {exited_at - termed_at:.1f} s after SIGTERM, {follower.name} took the Lease "
          f"{handover:.1f} s after it; proxy connections {dict(proxy.connections)}, "
          f"connect failures {dict(proxy.connect_failures)}, dropped {proxy.dropped}")
    assert_stream_ran(report)
    assert report.failures == [], f"{len(report.failures)} failed admissions: {report.failures[:10]}"
    assert draining > 0, "no request reached the stopping replica after SIGTERM"
    # Each answer in the drain closed its connection, so once out of the endpoints the replica got
    # no more requests: the API server was not still using kept-alive connections into it when
    # it closed them at the end of the drain (a race an idle close would lose now and then).
    assert last - left_at < (DRAIN_SECONDS - ENDPOINTS_DELAY) / 2, \
        f"requests reached the stopping replica {last - left_at:.1f} s after it left the endpoints"
    assert proxy.connect_failures[holder.port] == 0 and proxy.dropped == 0  # it listened while listed
    assert any(a.start > exited_at for a in report.admissions), "no admission after the holder exited"
    assert handover <= RELEASED_HANDOVER_LIMIT, f"handover took {handover:.1f} s: the Lease was not released"
    assert "released the lease" in holder.log.read_text()
    assert follower.proc.poll() is None and "leading certificate rotation" in follower.log.read_text()


def test_the_follower_takes_over_when_the_holder_is_killed(rig: Rig) -> None:
    pair = start_pair(rig, fallback=True)
    proxy, holder, follower = pair.proxy, pair.holder, pair.follower
    before = {r.name: validate_calls(r.port) for r in (holder, follower)}
    fp0 = leaf_fingerprint(rig.data()["tls.crt"])
    stream: Stream | None = None
    try:
        stream = run_stream(rig, "ha")
        holder_calls = validate_calls(holder.port) - before[holder.name]
        killed_at, killed_wall = time.monotonic(), time.time()
        os.kill(holder.proc.pid, signal.SIGKILL)
        holder.proc.wait(30)
        reaped_at = time.monotonic()
        poll(lambda: proxy.open_links(holder.port) == 0, 30, "the proxy to close the connections into the dead replica",
             interval=0.005)
        gone_at = time.monotonic()
        wait_for_takeover(rig, follower, HANDOVER_LIMIT)
        handover = lease_acquired(rig) - killed_wall  # same host: the clocks agree
        # the new holder leads: it honours a rotation request, and the proxy serves its new leaf
        rig.annotate("leaf")
        fp1 = poll(lambda: (fp := served_fingerprint(proxy.port)) != fp0 and fp, 60, "the new leader's leaf")
        assert fp1 == leaf_fingerprint(rig.data()["tls.crt"])
        rotated_at = time.monotonic()
        poll(lambda: time.monotonic() - rotated_at >= AFTER_HANDOVER, AFTER_HANDOVER + 30, "traffic after the handover")
    finally:
        if stream is not None:
            stream.finish()
        report = stream.join() if stream is not None else None
    assert report is not None
    in_flight = [a for a in report.admissions if a.overlaps(killed_at, gone_at)]
    open_at_kill = [a for a in in_flight if a.start <= killed_at]
    failed = [a for a in report.admissions if not a.ok]
    after = [a for a in report.admissions if a.start > gone_at]
    print(f"\nhigh availability: {report.describe()}; {holder.name} killed at t={killed_at - stream.t0:.2f} s "
          f"with {len(open_at_kill)} admissions open, dead (reaped) {1000 * (reaped_at - killed_at):.0f} ms and its "
          f"connections closed {1000 * (gone_at - killed_at):.0f} ms later; in flight {len(in_flight)}, "
          f"failed {len(failed)} ({_summary(failed)}); {len(after)} started after, all to succeed; "
          f"{follower.name} took the Lease {handover:.1f} s after the kill; "
          f"proxy connections {dict(proxy.connections)}, connect failures {dict(proxy.connect_failures)}")
    assert_stream_ran(report)
    unexplained = [a.detail for a in failed if not a.overlaps(killed_at, gone_at)]
    assert unexplained == [], f"{len(unexplained)} failed admissions not in flight at the kill: {unexplained[:10]}"
    assert len(failed) <= len(in_flight) <= stream.concurrency
    assert after and all(a.ok for a in after)
    assert gone_at - killed_at < 5, f"the dead replica's connections stayed open {gone_at - killed_at:.1f} s"
    assert handover <= HANDOVER_LIMIT, f"handover took {handover:.1f} s"
    assert holder_calls > 0 and proxy.sent_to(holder.port, killed_at - 1, killed_at) > 0, \
        "the holder took no traffic right before it was killed"
    assert proxy.connect_failures[holder.port] > 0, "no connection was sent to the killed replica's port"
    assert proxy.dropped == 0
    assert validate_calls(follower.port) - before[follower.name] > 0
    assert follower.proc.poll() is None and "leading certificate rotation" in follower.log.read_text()


def _summary(failed: list[Admission]) -> str:
    return "; ".join(a.detail[:160] for a in failed[:3]) or "none"


def _two_ports() -> tuple[int, int]:
    first = processes.free_port()
    while (second := processes.free_port()) == first:
        pass
    return first, second
