"""A webhook served over TLS from a child process pinned to one core: ours, the floor or the hand-written one.

The server logs at info level, as deployed. The load runs in this process, pinned to another
core (:func:`pin`), so the two do not compete for one CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import multiprocessing
import os
import signal
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from kinitiras_py.base.typedefs import Obj

SERVER_CPU = 0
LOAD_CPU = 1


@dataclass(frozen=True)
class Served:
    """A running benchmark server: where it listens and what it has cost so far."""

    url: str
    """Base URL, e.g. https://127.0.0.1:40123."""
    pid: int
    context: ssl.SSLContext
    """Trusts the server's certificate."""
    ca_pem: bytes

    def sched(self) -> Sched:
        """The server's time on and waiting for a CPU so far."""
        return sched(self.pid)

    def rss_bytes(self) -> int:
        """The server process's resident memory now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


@dataclass(frozen=True)
class Sched:
    """A task's scheduler accounting (Linux ``/proc/<pid>/schedstat``), seconds."""

    running: float
    """On a CPU."""
    waiting: float
    """Ready to run, waiting for a CPU (another process had it)."""

    def __sub__(self, other: Sched) -> Sched:
        return Sched(self.running - other.running, self.waiting - other.waiting)


def sched(pid: int | str = "self") -> Sched:
    """The scheduler accounting of ``pid``'s main thread (this process by default)."""
    running, waiting, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return Sched(int(running) / 1e9, int(waiting) / 1e9)


def pin(cpu: int) -> set[int]:
    """Run this process on one core (best effort: server and load apart); the cores it had before."""
    before = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    if len(before) > 1:
        os.sched_setaffinity(0, {sorted(before)[cpu % len(before)]})
    return before


@contextlib.contextmanager
def pinned(cpu: int) -> Iterator[None]:
    """This process on core ``cpu`` for the duration; the previous affinity afterwards."""
    before = pin(cpu)
    try:
        yield
    finally:
        if before:
            os.sched_setaffinity(0, before)


def _serve(policies: Sequence[Obj] | None, cert_dir: str, conn: Connection, cpu: int | None,
           profile: str | None, cel_results: bool, hand: int | None) -> None:
    """Child process: serve ours over ``policies`` (when None: the floor, or with ``hand`` the
    hand-written webhook for that many matching policies) until told to stop;
    with ``profile``, under cProfile, the statistics written to that file at the end; without
    ``cel_results``, with the CEL result cache and the mutation memory off."""
    from kinitiras_py.base import logs
    from kinitiras_py.webhook.server import Server, server_context

    # A Ctrl-C reaches the whole process group; the parent, interrupted too, stops us through the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cpu is not None:
        pin(cpu)
    logs.configure("info", "json")

    async def main() -> None:
        if policies is None:
            from kinitiras_py.bench import floor, handwritten

            app = floor.make_app() if hand is None else handwritten.make_app(hand)
        else:
            from kinitiras_py.admission.engine import Engine
            from kinitiras_py.webhook.app import make_app
            from kinitiras_py.webhook.handlers import Handlers
            from kinitiras_py.webhook.metrics import Metrics

            engine = Engine(policies) if cel_results else Engine(policies, cel_results_bytes=0,
                                                                  mutation_results_bytes=0)
            app = make_app(Handlers(engine, Metrics()))
        context = server_context(Path(cert_dir, "tls.crt"), Path(cert_dir, "tls.key"))
        server = Server(app, "127.0.0.1", 0, context)
        await server.start()
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        conn.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # the stop signal
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile))
        await server.stop()

    asyncio.run(main())


@contextlib.contextmanager
def serving(policies: Sequence[Obj] | None, cpu: int | None = SERVER_CPU, start_timeout: float = 120.0,
            profile: str | None = None, cel_results: bool = True, hand: int | None = None) -> Iterator[Served]:
    """Serve ours over ``policies`` (when None: the floor, or the hand-written webhook for ``hand``
    matching policies) in a child process until the block ends,
    on core ``cpu`` (None: wherever the scheduler puts it), profiled into the file ``profile``,
    with the CEL result cache off unless ``cel_results``."""
    from kinitiras_py.certs.authority import new_ca, new_serving

    with tempfile.TemporaryDirectory(prefix="kinitiras-bench-") as cert_dir:
        ca = new_ca("kinitiras-py bench")
        leaf = new_serving(ca, ["localhost"], ["127.0.0.1"])
        Path(cert_dir, "tls.crt").write_bytes(leaf.cert)
        Path(cert_dir, "tls.key").write_bytes(leaf.key)
        spawn = multiprocessing.get_context("spawn")
        parent, child = spawn.Pipe()
        args = (None if policies is None else list(policies), cert_dir, child, cpu, profile, cel_results, hand)
        process = spawn.Process(target=_serve, args=args, daemon=True)
        process.start()
        try:
            if not parent.poll(start_timeout):
                raise RuntimeError(f"the benchmark webhook did not start within {start_timeout:.0f} s")
            port = parent.recv()
            assert process.pid is not None
            yield Served(f"https://127.0.0.1:{port}", process.pid,
                         ssl.create_default_context(cadata=ca.cert.decode()), ca.cert)
        finally:
            with contextlib.suppress(OSError):
                parent.send("stop")
            process.join(15)
            if process.is_alive():
                process.kill()
                process.join(5)
