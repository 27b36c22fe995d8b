"""SIGTERM stops a command as Ctrl-C does: what it started is stopped, its temporary files are
removed, it says so in one line (no traceback) and exits 143 (130 for Ctrl-C)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kinitiras_py.cli import interrupts
from tests.stopping import stop_when


@pytest.mark.parametrize(("sig", "group", "code"), [
    (signal.SIGTERM, False, 143),  # kill, pkill
    (signal.SIGTERM, True, 143),  # timeout(1): its children are signalled too
    (signal.SIGINT, False, 130),
    (signal.SIGINT, True, 130),  # Ctrl-C in a terminal: the whole process group
])
def test_a_stopped_benchmark_stops_its_server_and_removes_its_files(sig: signal.Signals, group: bool, code: int,
                                                                     tmp_path: Path) -> None:
    # bench --webhook: the cheapest command that starts a child (its server, a multiprocessing
    # child) and a temporary directory (the server's certificate), no cluster needed. Stopped
    # while the load runs, once the server says it serves.
    temp = tmp_path / "temp"

    def serving(children: dict[int, str], output: str) -> bool:
        return (any("multiprocessing" in line for line in children.values()) and any(temp.glob("kinitiras-bench-*"))
                and '"msg":"serving"' in output)

    stopped = stop_when(["bench", "--webhook", "--policies", "1", "--rates", "20", "--seconds", "120"], tmp_path,
                        serving, sig, timeout=90, group=group)
    assert stopped.code == code, stopped.err
    assert stopped.err.strip().endswith(f"kinitiras-py bench: stopped by {sig.name}"), stopped.err
    assert "Traceback" not in stopped.err
    assert stopped.left_running() == {}
    assert list(temp.iterdir()) == []


def test_a_second_sigterm_does_not_cut_the_clean_up_short() -> None:
    cleaned: list[str] = []

    def command() -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            cleaned.append("not reached: the first SIGTERM raises")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second `pkill` while the clean-up runs
            cleaned.append("cleaned")
        return 0

    before = signal.getsignal(signal.SIGTERM)
    assert interrupts.stoppable(command, "kinitiras-py test") == 143
    assert cleaned == ["cleaned"]
    assert signal.getsignal(signal.SIGTERM) is before  # put back for whatever runs next in this process
