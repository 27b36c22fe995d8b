"""The real `kinitiras-py serve` process, registered with the session's API server."""

from __future__ import annotations

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

import pytest

from kinitiras_py.certs import authority
from kinitiras_py.dev import processes
from tests.conftest import Cluster


@dataclass(frozen=True)
class Webhook:
    """The running webhook: its port and log file."""

    port: int
    log: Path

    def log_text(self) -> str:
        """Everything the webhook logged so far."""
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="session")
def webhook(cluster: Cluster) -> Iterator[Webhook]:
    """Start `kinitiras-py serve` on 127.0.0.1 and wait until it is ready and registered."""
    work = Path(tempfile.mkdtemp(prefix="kinitiras-e2e-"))
    ca = authority.new_ca("e2e-ca")
    leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
    (work / "ca.crt").write_bytes(ca.cert)
    (work / "tls.crt").write_bytes(leaf.cert)
    (work / "tls.key").write_bytes(leaf.key)
    port = processes.free_port()
    log = work / "webhook.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={cluster.kubeconfig}",
             "--bind-address=127.0.0.1", f"--port={port}", f"--cert-dir={work}",
             f"--webhook-url=https://127.0.0.1:{port}", "--metrics-address=", "--log-level=debug",
             "--mutating-config=kinitiras-e2e", "--validating-config=kinitiras-e2e",
             "--label-excluded-namespaces"],
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
        yield Webhook(port, log)
    finally:
        # Unregister first: with failurePolicy Fail a dead webhook would block the API server.
        cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "kinitiras-e2e",
                        "--ignore-not-found")
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace, deleted afterwards."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name, check=True)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


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
