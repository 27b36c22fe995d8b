"""`kinitiras-py bench --e2e` stopped with SIGTERM (as `pkill` does) while its own control plane
and `serve` run: etcd, kube-apiserver, kube-controller-manager, `serve` and the other servers are
stopped, the temporary directory is removed, one line says so (no traceback), and it exits 143.

Before, SIGTERM ended the bench on the spot and left all of them running (they run in their own
session, so that a Ctrl-C in the terminal reaches only the bench, which stops them itself)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.stopping import stop_when

pytestmark = pytest.mark.cluster

_COMPONENTS = ("/etcd ", "kube-apiserver", "kube-controller-manager", "kinitiras_py serve")


def test_a_terminated_e2e_bench_stops_its_control_plane_and_removes_its_directory(tmp_path: Path) -> None:
    temp = tmp_path / "temp"

    def all_running(children: dict[int, str], _output: str) -> bool:
        return (all(any(name in line for line in children.values()) for name in _COMPONENTS)
                and any(temp.glob("kinitiras-bench-e2e-*")))

    stopped = stop_when(["bench", "--e2e", "--total", "4", "--matching", "1", "--pods", "5", "--concurrency", "1",
                         "--runs", "1"], tmp_path, all_running, signal.SIGTERM, timeout=300)
    assert stopped.code == 143, stopped.err
    assert stopped.err.strip().endswith("kinitiras-py bench: stopped by SIGTERM"), stopped.err
    assert "Traceback" not in stopped.err
    assert stopped.left_running() == {}
    assert list(temp.iterdir()) == []
