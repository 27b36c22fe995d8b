"""`kinitiras-py dev up|status|down` as a user runs them, in a run directory of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kinitiras_py.dev import processes

pytestmark = pytest.mark.cluster


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kinitiras_py", "dev", *args], capture_output=True, text=True,
                          timeout=300)


def test_up_status_second_up_and_down(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = time.monotonic()
    up = _cli("up", "--run-dir", str(run_dir))
    assert up.returncode == 0, up.stderr
    assert time.monotonic() - started < 60, "a warm dev up must take under 60 s"
    assert up.stdout.strip() == f"export KUBECONFIG={run_dir / 'kubeconfig'}"
    pids = json.loads((run_dir / "state.json").read_text())["pids"]
    try:
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "webhook"}
        status = _cli("status", "--run-dir", str(run_dir))
        assert status.returncode == 0
        assert status.stdout.count("running") == 4, status.stdout

        again = _cli("up", "--run-dir", str(run_dir))
        assert again.returncode == 1
        assert "already runs" in again.stderr
    finally:
        down = _cli("down", "--run-dir", str(run_dir))
    assert down.returncode == 0
    assert all(not processes.alive(pid) for pid in pids.values())
    assert not run_dir.exists()
    assert _cli("status", "--run-dir", str(run_dir)).returncode == 1


def test_no_webhook_is_a_baseline(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    up = _cli("up", "--run-dir", str(run_dir), "--no-webhook")
    try:
        assert up.returncode == 0, up.stderr
        pids = json.loads((run_dir / "state.json").read_text())["pids"]
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    finally:
        _cli("down", "--run-dir", str(run_dir))


def test_fixed_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = _cli("up", "--run-dir", str(tmp_path / "run"), "--apiserver-port", str(port))
    assert proc.returncode == 1
    assert f"port {port} for kube-apiserver is already in use" in proc.stderr
