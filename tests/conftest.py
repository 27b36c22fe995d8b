"""Shared fixtures: the real local control plane for tests marked ``cluster``.

A session brings one control plane up in its own run directory and tears it down at the end.
When ``KUBECONFIG`` names a running `kinitiras-py dev up` control plane (context
``kinitiras-dev``), that one is reused and left running.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from kinitiras_py.certs.tls import ReloadableTLS
from kinitiras_py.dev import controlplane
from kinitiras_py.dev.rest import Rest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@dataclass(frozen=True)
class Cluster:
    """A running API server: its kubeconfig and a REST client."""

    kubeconfig: str
    rest: Rest

    def kubectl(self, *args: str, input: str | None = None, check: bool = False,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; returns the completed process (text)."""
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        proc = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True,
                              env=env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    async def kubectl_ok(self, *args: str, input: str | None = None) -> str:
        """Run kubectl in a worker thread (the event loop keeps going); its stdout, failing loudly."""
        proc = await asyncio.to_thread(self.kubectl, *args, input=input, check=True)
        return proc.stdout


def _reusable(kubeconfig: str) -> Cluster | None:
    try:
        config = yaml.safe_load(Path(kubeconfig).read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict) or config.get("current-context") != "kinitiras-dev":
        return None
    cluster = config["clusters"][0]["cluster"]
    rest = Rest(cluster["server"], config["users"][0]["user"]["token"], cluster["certificate-authority"])
    try:
        if rest.get("/readyz", timeout=3)[0] != 200:
            return None
    except OSError:
        return None
    return Cluster(kubeconfig, rest)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The control plane for this test session (started once, stopped at the end)."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is needed for cluster tests (make install provides it)")
    given = os.environ.get("KUBECONFIG")
    reused = _reusable(given) if given else None
    if reused is not None:
        yield reused
        return
    from kinitiras_py.api import crds

    run_dir = Path(tempfile.mkdtemp(prefix="kinitiras-test-")) / "run"
    state = controlplane.up(run_dir, log=lambda _m: None, crds=crds.build_crds())
    try:
        yield Cluster(state.kubeconfig, state.rest())
    finally:
        controlplane.down(run_dir)
        shutil.rmtree(run_dir.parent, ignore_errors=True)


async def serve_tls(tls: ReloadableTLS) -> tuple[web.AppRunner, int]:
    """An HTTPS server on 127.0.0.1 answering ``GET /`` with ``ok`` from ``tls``'s live context."""
    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context).start()
    return runner, runner.addresses[0][1]
