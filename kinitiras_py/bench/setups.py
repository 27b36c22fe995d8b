"""The webhook set-ups of the end-to-end benchmark, each an async context manager.

* the floor (``floor``), registered by hand as a mutating webhook for Pods in the benchmark
  namespace;
* the hand-written webhook (``handwritten``), registered likewise for its own namespace;
* ours (``ours``): ``kinitiras-py serve`` as a user runs it (info log level, registering itself),
  with the benchmark's policies created through the API server (and so admitted by it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import aiohttp

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import child
from kinitiras_py.bench.kube import Kube

NAMESPACE_LABEL = {"kinitiras-bench": "e2e"}
"""On the benchmark namespace (the floor's namespaceSelector) and on every policy created."""
CONFIG = "kinitiras-bench"
"""Name of ours' webhook configurations."""
FLOOR_CONFIG = "kinitiras-bench-floor"
"""Name of the floor's webhook configuration (it lives beside ours')."""
HAND_LABEL = {"kinitiras-bench": "hand-written"}
"""On the hand-written webhook's namespace (its namespaceSelector)."""
HAND_CONFIG = "kinitiras-bench-hand-written"
"""Name of the hand-written webhook's configuration."""
_WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
_VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@contextlib.asynccontextmanager
async def floor(kube: Kube) -> AsyncIterator[None]:
    """The floor in a child process, registered for Pod CREATEs in the namespaces labelled
    :data:`NAMESPACE_LABEL`."""
    async with _registered(kube, FLOOR_CONFIG, NAMESPACE_LABEL, None):
        yield


@contextlib.asynccontextmanager
async def handwritten(kube: Kube, policies: int) -> AsyncIterator[None]:
    """The hand-written webhook doing what ``policies`` matching policies do, in a child process,
    registered for Pod CREATEs in the namespaces labelled :data:`HAND_LABEL`."""
    async with _registered(kube, HAND_CONFIG, HAND_LABEL, policies):
        yield


@contextlib.asynccontextmanager
async def _registered(kube: Kube, config: str, labels: dict[str, str], hand: int | None) -> AsyncIterator[None]:
    with child.serving(None, cpu=None, hand=hand) as served:
        hook = {"name": f"{config}.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 3, "matchPolicy": "Equivalent",
                "clientConfig": {"url": served.url + "/mutate", "caBundle": base64.b64encode(served.ca_pem).decode()},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                           "operations": ["CREATE"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": labels}}
        await kube.call("POST", _WEBHOOKS, {"apiVersion": "admissionregistration.k8s.io/v1",
                                            "kind": "MutatingWebhookConfiguration",
                                            "metadata": {"name": config}, "webhooks": [hook]})
        try:
            yield
        finally:
            await kube.delete(f"{_WEBHOOKS}/{config}")


def _labelled(policy: Obj) -> Obj:
    policy = copy.deepcopy(policy)
    policy["metadata"].setdefault("labels", {}).update(NAMESPACE_LABEL)
    return policy


def _path(kube: Kube, policy: Obj) -> str:
    return f"{kube.policy_path(policy)}/{policy['metadata']['name']}"


class Ours:
    """``kinitiras-py serve`` against the cluster, and the policies it serves."""

    def __init__(self, kube: Kube, log: Callable[[str], None], url: str = "", ca_pem: bytes = b"") -> None:
        self.kube = kube
        self.log = log
        self.url, self.ca_pem = url, ca_pem
        """Where the webhook serves (its /metrics too), and the CA its certificate is from."""
        self.present: dict[str, Obj] = {}
        """The benchmark policies in the cluster, by path."""

    async def become(self, policies: Sequence[Obj], timeout: float = 300.0) -> None:
        """Make the cluster hold exactly ``policies`` (of the benchmark) and wait until the webhook
        has every one in force (its status written ``Ready``)."""
        wanted = {_path(self.kube, p): _labelled(p) for p in policies}
        gone = [path for path in self.present if path not in wanted]
        new = [p for path, p in wanted.items() if path not in self.present]
        namespaces = sorted({p["metadata"]["namespace"] for p in new if p["metadata"].get("namespace")})
        started = time.monotonic()
        await self.kube.many(self.kube.ensure("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}) for n in namespaces)
        await self.kube.many(self.kube.delete(path) for path in gone)
        await self.kube.many(self.kube.call("POST", self.kube.policy_path(p), p) for p in new)
        self.present = wanted
        selector = ",".join(f"{k}={v}" for k, v in NAMESPACE_LABEL.items())
        while (ready := await self.kube.ready_policies(selector)) < len(wanted):
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"only {ready} of {len(wanted)} policies became Ready within {timeout:.0f} s")
            await asyncio.sleep(0.5)
        took = time.monotonic() - started
        waited = await self.quiet() if self.url else 0.0
        self.log(f"  {len(new)} policies created, {len(gone)} deleted, all {len(wanted)} Ready in {took:.1f} s, "
                 f"the webhook quiet {waited:.1f} s later")

    async def quiet(self, seconds: float = 2.0, timeout: float = 180.0) -> float:
        """Wait until the webhook has answered no request for ``seconds`` (at most ``timeout``);
        the seconds waited. The control plane goes on reacting to a set-up after its policies are
        Ready: each new namespace (of the namespaced policies) gets a ServiceAccount token Secret
        and a CA ConfigMap from the controller manager, at its own pace, each admitted by the
        webhook. Timed Pods must not share the machine with that."""
        started = time.monotonic()
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        last, since = -1.0, started
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
            while (now := time.monotonic()) - since < seconds and now - started < timeout:
                async with session.get(self.url + "/metrics") as resp:
                    answered = sum(float(line.rsplit(" ", 1)[1]) for line in (await resp.text()).splitlines()
                                   if line.startswith("kinitiras_webhook_requests_total{"))
                if answered != last:
                    last, since = answered, time.monotonic()
                await asyncio.sleep(0.25)
        return time.monotonic() - started

    async def clear(self) -> None:
        """Delete the benchmark policies."""
        await self.kube.many(self.kube.delete(path) for path in self.present)
        self.present = {}


@contextlib.asynccontextmanager
async def ours(kube: Kube, log: Callable[[str], None], start_timeout: float = 90.0,
               cel_results: bool = True) -> AsyncIterator[Ours]:
    """``kinitiras-py serve`` at info level, registered as ``kinitiras-bench`` (its CEL result cache
    and mutation memory off unless ``cel_results``); on exit its policies, configurations and process are removed."""
    from kinitiras_py.certs import authority
    from kinitiras_py.dev import processes

    with tempfile.TemporaryDirectory(prefix="kinitiras-bench-serve-") as work:
        ca = authority.new_ca("kinitiras-py bench")
        leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
        Path(work, "ca.crt").write_bytes(ca.cert)
        Path(work, "tls.crt").write_bytes(leaf.cert)
        Path(work, "tls.key").write_bytes(leaf.key)
        port = processes.free_port()
        log_file = Path(work, "webhook.log")
        pid = processes.spawn([
            sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={kube.access.kubeconfig}",
            "--bind-address=127.0.0.1", f"--port={port}", f"--cert-dir={work}", "--log-level=info",
            f"--webhook-url=https://127.0.0.1:{port}", "--metrics-address=",
            f"--mutating-config={CONFIG}", f"--validating-config={CONFIG}",
            *(() if cel_results else ("--cel-results-mib=0", "--mutation-results-mib=0"))], log_file)
        state = Ours(kube, log, f"https://127.0.0.1:{port}", ca.cert)
        try:
            await _wait_ready(f"https://127.0.0.1:{port}/readyz", ca.cert, pid, log_file, start_timeout)
            yield state
        finally:
            await state.clear()
            await kube.delete(f"{_WEBHOOKS}/{CONFIG}")
            await kube.delete(f"{_VALIDATING}/{CONFIG}")
            processes.stop(pid, expect="kinitiras_py")


async def _wait_ready(url: str, ca_pem: bytes, pid: int, log_file: Path, timeout: float) -> None:
    from kinitiras_py.dev import processes

    context = ssl.create_default_context(cadata=ca_pem.decode())
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        while time.monotonic() < deadline:
            if not processes.alive(pid):
                raise RuntimeError(f"kinitiras-py serve exited during start-up:\n{processes.tail(log_file)}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.25)
    raise RuntimeError(f"kinitiras-py serve was not ready within {timeout:.0f} s:\n{processes.tail(log_file)}")

