"""Time the webhook over HTTPS, as the API server calls it: AdmissionReviews in, responses out.

The server (the real aiohttp app and TLS listener over a compiled policy set) runs in a child
process pinned to one CPU (``child``); the load comes from this process, pinned to another when
there is one. Each rate is offered open-loop: requests start on a fixed schedule whether or not earlier
ones have been answered, and latency counts from the scheduled start, so a server that falls
behind shows it in its percentiles instead of slowing the load down.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
import orjson

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import child
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
    """An AdmissionReview v1 CREATE of ``pod``, as the API server sends it: its members in the
    order it writes them (the name left out when the Pod has none yet, as with generateName)."""
    meta = pod["metadata"]
    kind, resource = {"group": "", "version": "v1", "kind": "Pod"}, {"group": "", "version": "v1", "resource": "pods"}
    named = {"name": meta["name"]} if meta.get("name") else {}
    return orjson.dumps({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {"uid": str(uuid.uuid4()), "kind": kind, "resource": resource, "requestKind": kind,
                    "requestResource": resource, **named, "namespace": meta["namespace"], "operation": "CREATE",
                    "userInfo": {"username": "bench"}, "object": pod, "oldObject": None, "dryRun": False,
                    "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}},
    })


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


def run(policies: Sequence[Obj] | None, pod: Obj, rates: Sequence[float], seconds: float,
        warmup: float = 1.0) -> list[RateStats]:
    """Serve ``policies`` (the floor when None) in a child process and offer each rate for
    ``seconds`` (after a warm-up)."""
    with child.serving(policies) as served:
        url = f"{served.url}/mutate"
        body = review(pod)
        if not patch_of(asyncio.run(_once(url, body, served.context))):
            raise RuntimeError("benchmark setup is wrong: the webhook answered without a patch")
        results = []
        with child.pinned(child.LOAD_CPU):
            for rate in rates:
                asyncio.run(_offer(url, body, served.context, rate, warmup))
                results.append(asyncio.run(_offer(url, body, served.context, rate, seconds)))
        return results


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
