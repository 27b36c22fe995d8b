"""The real `kinitiras-py serve` process, registered with the session's API server."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kinitiras_py.certs import authority
from kinitiras_py.dev import processes
from tests.conftest import Cluster


@dataclass(frozen=True)
class Webhook:
    """The running webhook: its port and log file."""

    port: int
    log: Path
    http_port: int
    """The one port on 127.0.0.1 that http references may call (``--http-allow``, namespaced
    policies too): tests serving http references listen there."""
    ca: Path | None = None
    """The CA that signed its serving certificate."""

    def log_text(self) -> str:
        """Everything the webhook logged so far."""
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def serving(cluster: Cluster, config: str = "kinitiras-e2e") -> Iterator[Webhook]:
    """Run `kinitiras-py serve` on 127.0.0.1, registered as the webhook configurations ``config``,
    until the block ends; yield once it is ready and registered."""
    work = Path(tempfile.mkdtemp(prefix="kinitiras-e2e-"))
    ca = authority.new_ca("e2e-ca")
    leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
    (work / "ca.crt").write_bytes(ca.cert)
    (work / "tls.crt").write_bytes(leaf.cert)
    (work / "tls.key").write_bytes(leaf.key)
    port = processes.free_port()
    http_port = processes.free_port()
    log = work / "webhook.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={cluster.kubeconfig}",
             "--bind-address=127.0.0.1", f"--port={port}", f"--cert-dir={work}",
             f"--webhook-url=https://127.0.0.1:{port}", "--metrics-address=", "--log-level=info",
             f"--mutating-config={config}", f"--validating-config={config}",
             "--label-excluded-namespaces", "--http-namespaced", f"--http-allow=http://127.0.0.1:{http_port}/"],
            stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    context = ssl.create_default_context(cafile=str(work / "ca.crt"))
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"kinitiras-py serve exited: {log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=2, context=context) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"kinitiras-py serve not ready in 60 s: {log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield Webhook(port, log, http_port, work / "ca.crt")
    finally:
        # Unregister first: with failurePolicy Fail a dead webhook would block the API server.
        cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", config,
                        "--ignore-not-found")
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def webhook(cluster: Cluster) -> Iterator[Webhook]:
    """`kinitiras-py serve` on 127.0.0.1, ready and registered, for the whole session."""
    with serving(cluster) as running:
        yield running


def _fresh_namespace(cluster: Cluster, suffix: str = "") -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}{suffix}"
    cluster.kubectl("create", "namespace", name, check=True)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace, deleted afterwards."""
    yield from _fresh_namespace(cluster)


@pytest.fixture
def other_namespace(cluster: Cluster) -> Iterator[str]:
    """A second fresh namespace, deleted afterwards."""
    yield from _fresh_namespace(cluster, "-b")


def wait_for(check: object, timeout: float = 5.0, interval: float = 0.1) -> object:
    """Poll ``check()`` until it returns a truthy value; return it, or the last value at timeout."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()  # type: ignore[operator]
        if value:
            return value
        time.sleep(interval)
    return value


def kubectl_ok(cluster: Cluster, *args: str, input: str | None = None) -> str:
    """Run kubectl; its stdout, asserting that it succeeded."""
    proc = cluster.kubectl(*args, input=input)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def get_json(cluster: Cluster, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """One object as the API server returns it."""
    where = ["-n", namespace] if namespace else []
    return dict(json.loads(kubectl_ok(cluster, "get", resource, name, *where, "-o", "json")))


def apply_policy(cluster: Cluster, text: str, resource: str, name: str, rules: int,
                 namespace: str | None = None) -> None:
    """Apply a policy and wait until the webhook has this version in force (READY True for the
    policy's current generation, RULES counted): an update must not be raced by the old version."""
    where = ["-n", namespace] if namespace else []
    kubectl_ok(cluster, "apply", *where, "-f", "-", input=text)
    fields = ('{.metadata.generation} {.status.conditions[?(@.type=="Ready")].observedGeneration} '
              '{.status.conditions[?(@.type=="Ready")].status} {.status.ruleCount}')

    def in_force() -> bool:
        got = cluster.kubectl("get", resource, name, *where, "-o", f"jsonpath={fields}").stdout.split()
        return len(got) == 4 and got[0] == got[1] and got[2:] == ["True", str(rules)]

    assert wait_for(in_force, 60), cluster.kubectl("get", resource, name, *where, "-o", "yaml").stdout
