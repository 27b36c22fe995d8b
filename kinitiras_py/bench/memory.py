"""``bench --memory``: ``kinitiras-py serve`` against a real API server holding N policies.

The policies (:mod:`kinitiras_py.bench.scale`: one matching the benchmark Pod, the rest not)
are created in the API server; ``serve`` runs as a child process (no webhook registration, a
throw-away certificate) until ``/readyz``. Measured: the child's resident memory (VmRSS, and
its peak VmHWM) while it answers AdmissionReviews, read once it has served for ``SETTLE`` more
seconds (every policy's status written by then), and how long a policy change takes to reach
the answers: an update of the matching policy and a newly created policy, each timed from the
API server's reply to the first ``/mutate`` answer that shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import scale, webhook, workload
from kinitiras_py.certs.authority import new_ca, new_serving
from kinitiras_py.cluster.client import Api, ApiException, api_client
from kinitiras_py.cluster.policywatch import policy_resources
from kinitiras_py.dev.processes import free_port

TOTAL = 10_000
"""Policies loaded unless told otherwise (the issue's target is set at 10,000)."""
PARALLEL = 16
"""Policy creations in flight at once."""
READY_TIMEOUT = 600.0
EFFECT_TIMEOUT = 30.0
SETTLE = 90.0
"""Seconds of serving after the changes before memory is read (status writes of 10,000 policies)."""


@dataclass(frozen=True)
class MemoryStats:
    """One run; seconds and MiB."""

    policies: int
    create_seconds: float
    ready_seconds: float
    rss_mib: float
    peak_mib: float
    update_seconds: Sequence[float]
    add_seconds: Sequence[float]

    @property
    def update_median(self) -> float:
        """Median seconds from an update's reply to its effect."""
        return statistics.median(self.update_seconds) if self.update_seconds else 0.0

    @property
    def add_median(self) -> float:
        """Median seconds from a creation's reply to its effect."""
        return statistics.median(self.add_seconds) if self.add_seconds else 0.0


def memory_of(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _path(policy: Obj, name: str | None = None) -> str:
    resource = policy_resources()[policy["kind"]]
    return resource.path(policy["metadata"].get("namespace"), name)


async def _clean(api: Api) -> None:
    """Delete every policy of the workload and wait until none is listed."""
    for resource in policy_resources().values():
        namespace = workload.NAMESPACE if resource.namespaced else None
        query = [("labelSelector", scale.LABEL)]
        with contextlib.suppress(ApiException):
            await api.request("DELETE", resource.path(namespace), query=query, timeout=300)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                left = await api.request("GET", resource.path(namespace), query=[*query, ("limit", "1")], timeout=60)
            except ApiException:
                break  # no such namespace yet: nothing to delete
            if not left.get("items"):
                break
            await asyncio.sleep(0.5)


async def _create_all(api: Api, policies: Sequence[Obj]) -> None:
    with contextlib.suppress(ApiException):
        await api.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": workload.NAMESPACE}})
    gate = asyncio.Semaphore(PARALLEL)

    async def create(policy: Obj) -> None:
        async with gate:
            await api.request("POST", _path(policy), body=policy, timeout=60)

    await asyncio.gather(*(create(p) for p in policies))


def _certs(directory: Path) -> ssl.SSLContext:
    ca = new_ca()
    serving = new_serving(ca, ["localhost"], ["127.0.0.1"])
    (directory / "tls.crt").write_bytes(serving.cert)
    (directory / "tls.key").write_bytes(serving.key)
    (directory / "ca.crt").write_bytes(ca.cert)
    return ssl.create_default_context(cadata=ca.cert.decode())


class _Webhook:
    """The ``serve`` child and an HTTPS session to it."""

    def __init__(self, kubeconfig: str, directory: Path) -> None:
        self.port = free_port()
        self.context = _certs(directory)
        self.log = directory / "serve.log"
        argv = [sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={kubeconfig}", "--no-register",
                f"--cert-dir={directory}", "--bind-address=127.0.0.1", f"--port={self.port}",
                f"--metrics-address=127.0.0.1:{free_port()}", "--log-level=warning"]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.context))
        self.review = webhook.review(workload.pod())

    async def ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited ({self.process.returncode}): {self.log.read_text()[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with self.session.get(f"https://127.0.0.1:{self.port}/readyz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"serve was not ready within {READY_TIMEOUT:g} s: {self.log.read_text()[-2000:]}")

    async def patch(self) -> list[Obj]:
        async with self.session.post(f"https://127.0.0.1:{self.port}/mutate", data=self.review,
                                     headers={"Content-Type": "application/json"}) as resp:
            return webhook.patch_of(await resp.read())

    async def until(self, text: str) -> float:
        """Seconds until a /mutate answer's patch mentions ``text``."""
        began = time.perf_counter()
        while time.perf_counter() - began < EFFECT_TIMEOUT:
            if text in str(await self.patch()):
                return time.perf_counter() - began
            await asyncio.sleep(0.005)
        raise RuntimeError(f"no /mutate answer showed {text!r} within {EFFECT_TIMEOUT:g} s")

    async def close(self) -> None:
        await self.session.close()
        self.process.terminate()
        try:
            await asyncio.to_thread(self.process.wait, 30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)


async def _changes(api: Api, hook: _Webhook, trials: int) -> tuple[list[float], list[float]]:
    updates, adds = [], []
    matching = scale.policies(1)[0]
    for trial in range(trials):
        value = f"updated-{trial}-{time.monotonic_ns()}"
        rules = matching["spec"]["overrideRules"]
        rules[1]["overriders"]["template"]["value"]["string"] = value
        await api.request("PATCH", _path(matching, matching["metadata"]["name"]),
                          body={"spec": {"overrideRules": rules}}, content_type="application/merge-patch+json",
                          timeout=30)
        updates.append(await hook.until(value))
        added = workload.matching_policy(10_000 + trial)
        added["metadata"]["labels"] = {scale.LABEL: "added"}
        added["spec"]["overrideRules"] = added["spec"]["overrideRules"][1:]  # the label rule alone
        await api.request("POST", _path(added), body=added, timeout=30)
        adds.append(await hook.until(f"bench.example.com~1policy-{10_000 + trial:04d}"))
    return updates, adds


async def run(kubeconfig: str, total: int, trials: int = 3, requests: int = 200,
              settle: float = SETTLE) -> MemoryStats:
    """Create ``total`` policies, serve them, measure, and delete them again.

    Memory is read after ``settle`` more seconds of answering reviews, by when ``serve`` has
    written the status of every policy (objects with status are what it keeps from then on).
    """
    api = await api_client(kubeconfig)
    try:
        await _clean(api)
        began = time.perf_counter()
        await _create_all(api, scale.policies(total))
        created = time.perf_counter() - began
        with tempfile.TemporaryDirectory(prefix="kinitiras-py-memory-") as tmp:
            hook = _Webhook(kubeconfig, Path(tmp))
            try:
                began = time.perf_counter()
                await hook.ready()
                ready = time.perf_counter() - began
                for _ in range(requests):
                    await hook.patch()
                updates, adds = await _changes(api, hook, trials)
                settled = time.monotonic() + settle
                while time.monotonic() < settled:
                    for _ in range(requests):
                        await hook.patch()
                    await asyncio.sleep(min(1.0, max(0.0, settled - time.monotonic())))
                rss, peak = memory_of(hook.process.pid)
            finally:
                await hook.close()
        return MemoryStats(total, created, ready, rss, peak, updates, adds)
    finally:
        await _clean(api)
        await api.close()


def table(stats: MemoryStats, target_mib: float = 128.0) -> str:
    """The figures as text lines."""
    return "\n".join([
        f"policies loaded        {stats.policies}",
        f"created in             {stats.create_seconds:.1f} s ({stats.policies / stats.create_seconds:.0f}/s)",
        f"serve ready after      {stats.ready_seconds:.1f} s",
        f"RSS while serving      {stats.rss_mib:.1f} MiB (peak {stats.peak_mib:.1f} MiB; "
        f"ratio to {target_mib:g} MiB: {stats.rss_mib / target_mib:.2f})",
        f"update takes effect    {stats.update_median * 1000:.0f} ms median "
        f"({', '.join(f'{s * 1000:.0f}' for s in stats.update_seconds)} ms)",
        f"new policy in force    {stats.add_median * 1000:.0f} ms median "
        f"({', '.join(f'{s * 1000:.0f}' for s in stats.add_seconds)} ms)",
    ])


def main(kubeconfig: str | None, total: int, trials: int, output: str) -> int:
    """``bench --memory``: against ``kubeconfig``, or a control plane brought up for the run."""
    import platform

    import orjson

    from kinitiras_py import __version__

    if output == "table":
        print(f"kinitiras-py {__version__} bench --memory: Python {platform.python_version()}; kinitiras-py serve "
              f"(a child process) with {total} policies in the API server, {trials} updates and additions",
              flush=True)
    if kubeconfig:
        stats = asyncio.run(run(kubeconfig, total, trials))
    else:
        from kinitiras_py.api import crds
        from kinitiras_py.dev import controlplane

        with tempfile.TemporaryDirectory(prefix="kinitiras-bench-memory-") as tmp:
            run_dir = Path(tmp) / "run"
            state = controlplane.up(run_dir, log=lambda _m: None, crds=crds.build_crds())
            try:
                stats = asyncio.run(run(state.kubeconfig, total, trials))
            finally:
                controlplane.down(run_dir)
    if output == "table":
        print(table(stats))
    else:
        doc = {**stats.__dict__, "update_median": stats.update_median, "add_median": stats.add_median}
        sys.stdout.write(orjson.dumps({"memory": doc}, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
