"""Time the webhook over HTTPS, as the API server calls it: AdmissionReviews in, responses out.

The server (the real aiohttp app and TLS listener over a compiled policy set) runs in a child
process pinned to one CPU; the load comes from this process, pinned to another when there is
one. Each rate is offered open-loop: requests start on a fixed schedule whether or not earlier
ones have been answered, and latency counts from the scheduled start, so a server that falls
behind shows it in its percentiles instead of slowing the load down.
"""

from __future__ import annotations

import asyncio
import base64
import multiprocessing
import os
import ssl
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
import orjson

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench.runner import percentile

CONNECTIONS = 16
"""Keep-alive connections the load uses (the API server also reuses its connections)."""


@dataclass(frozen=True)
class RateStats:
    """One offered rate: what was achieved and how long the answers took (seconds)."""

    offered: float
    achieved: float
    sent: int
    errors: int
    median: float
    p90: float
    p99: float
    max: float


def review(pod: Obj) -> bytes:
    """An AdmissionReview v1 CREATE of ``pod``, as the API server sends it."""
    meta = pod["metadata"]
    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "name": meta["name"], "namespace": meta["namespace"], "operation": "CREATE",
                    "userInfo": {"username": "bench"}, "object": pod, "dryRun": False},
    })


def _pin(cpu: int) -> set[int]:
    """Run this process on one core (best effort: server and load apart); the cores it had before."""
    before = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    if len(before) > 1:
        os.sched_setaffinity(0, {sorted(before)[cpu % len(before)]})
    return before


def _serve(policies: Sequence[Obj], cert_dir: str, conn: Connection) -> None:
    """Child process: serve the webhook over ``policies`` until told to stop."""
    from kinitiras_py.offline.apply import build_pipeline, compile_all
    from kinitiras_py.webhook.app import make_app
    from kinitiras_py.webhook.handlers import Handlers
    from kinitiras_py.webhook.metrics import Metrics
    from kinitiras_py.webhook.server import Server, server_context

    _pin(0)

    async def main() -> None:
        handlers = Handlers(build_pipeline(compile_all(policies)), Metrics())
        context = server_context(Path(cert_dir, "tls.crt"), Path(cert_dir, "tls.key"))
        server = Server(make_app(handlers), "127.0.0.1", 0, context)
        await server.start()
        conn.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # the stop signal
        await server.stop()

    asyncio.run(main())


async def _offer(url: str, body: bytes, context: ssl.SSLContext, rate: float, seconds: float) -> RateStats:
    connector = aiohttp.TCPConnector(ssl=context, limit=CONNECTIONS)
    latencies: list[float] = []
    errors = 0
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(due: float) -> None:
            nonlocal errors
            try:
                status, answer = await _post(session, url, body)
                ok = status == 200 and orjson.loads(answer)["response"]["allowed"] is True
            except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError):
                ok = False
            latencies.append(time.perf_counter() - due)
            errors += not ok

        count = max(1, round(rate * seconds))
        start = time.perf_counter() + 0.05
        tasks = []
        for i in range(count):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    ordered = sorted(latencies)
    return RateStats(offered=rate, achieved=count / elapsed, sent=count, errors=errors,
                     median=statistics.median(ordered), p90=percentile(ordered, 0.90),
                     p99=percentile(ordered, 0.99), max=ordered[-1])


def run(policies: Sequence[Obj], pod: Obj, rates: Sequence[float], seconds: float,
        warmup: float = 1.0) -> list[RateStats]:
    """Serve ``policies`` in a child process and offer each rate for ``seconds`` (after a warm-up)."""
    from kinitiras_py.certs.authority import new_ca, new_serving

    with tempfile.TemporaryDirectory(prefix="kinitiras-bench-") as cert_dir:
        ca = new_ca("kinitiras-py bench")
        leaf = new_serving(ca, ["localhost"], ["127.0.0.1"])
        Path(cert_dir, "tls.crt").write_bytes(leaf.cert)
        Path(cert_dir, "tls.key").write_bytes(leaf.key)
        parent, child = multiprocessing.get_context("spawn").Pipe()
        process = multiprocessing.get_context("spawn").Process(target=_serve, args=(list(policies), cert_dir, child),
                                                               daemon=True)
        process.start()
        try:
            if not parent.poll(60):
                raise RuntimeError("the benchmark webhook did not start within 60 s")
            url = f"https://127.0.0.1:{parent.recv()}/mutate"
            context = ssl.create_default_context(cadata=ca.cert.decode())
            body = review(pod)
            if not patch_of(asyncio.run(_once(url, body, context))):
                raise RuntimeError("benchmark setup is wrong: the webhook answered without a patch")
            cores = _pin(1)
            try:
                results = []
                for rate in rates:
                    asyncio.run(_offer(url, body, context, rate, warmup))
                    results.append(asyncio.run(_offer(url, body, context, rate, seconds)))
            finally:
                if cores:
                    os.sched_setaffinity(0, cores)
            return results
        finally:
            parent.send("stop")
            process.join(15)
            if process.is_alive():
                process.kill()


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, bytes]:
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.read()


async def _once(url: str, body: bytes, context: ssl.SSLContext) -> bytes:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        return (await _post(session, url, body))[1]


def patch_of(answer: bytes) -> list[Obj]:
    """The JSON patch in an allowed AdmissionReview response (empty when there is none)."""
    response = orjson.loads(answer)["response"]
    if response.get("allowed") is not True:
        raise RuntimeError(f"benchmark setup is wrong: the webhook refused the Pod: {response.get('status')}")
    patch = response.get("patch")
    return list(orjson.loads(base64.b64decode(patch))) if patch else []
