"""A CLI command run as its own process, stopped with a signal once it has started children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kinitiras_py.dev import processes

ROOT = Path(__file__).resolve().parent.parent


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` (children in their own session included), by pid: its command line."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The command name in (...) may hold spaces; the parent pid is the second field after it.
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # it ended while we read
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = processes.cmdline(child)
                frontier.append(child)
    return found


@dataclass
class Stopped:
    """What a command stopped by a signal left: its exit code, output, and the children it had."""

    code: int
    out: str
    err: str
    children: dict[int, str]

    def left_running(self, grace: float = 10.0) -> dict[int, str]:
        """The children still running ``grace`` seconds after the command ended (none: at once).

        multiprocessing's resource tracker ignores SIGTERM and SIGINT and ends only when the
        last holder of its pipe has exited, a moment after the command itself on a loaded
        machine: a child is left running only if it outlives that grace."""
        deadline = time.monotonic() + grace
        while True:
            running = {pid: line for pid, line in self.children.items() if processes.alive(pid)}
            if not running or time.monotonic() >= deadline:
                return running
            time.sleep(0.1)


def stop_when(args: list[str], tmp: Path, ready: Callable[[dict[int, str], str], bool], sig: signal.Signals,
              timeout: float, group: bool = False) -> Stopped:
    """Run ``kinitiras-py args`` (temporary files under ``tmp``), send it ``sig`` once ``ready(children,
    stdout and stderr so far)`` holds, and wait for it to end (each within ``timeout`` seconds).

    The command runs in a process group of its own; with ``group`` the signal goes to all of it,
    as a terminal sends Ctrl-C."""
    out_file, err_file = tmp / "stdout", tmp / "stderr"
    temp = tmp / "temp"
    temp.mkdir()
    with out_file.open("wb") as out, err_file.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kinitiras_py", *args], cwd=ROOT, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(temp)},
                                start_new_session=True)
    children: dict[int, str] = {}
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"ended before it was ready ({proc.returncode}): {err_file.read_text()}"
            children = descendants(proc.pid)
            if ready(children, out_file.read_text() + err_file.read_text()):
                break
            assert time.monotonic() < deadline, f"not ready within {timeout:g} s: {err_file.read_text()}"
            time.sleep(0.2)
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        code = proc.wait(timeout)
    finally:
        if proc.poll() is None:  # the test failed: leave nothing behind
            proc.kill()
            proc.wait()
        for pid, line in children.items():
            if line:  # what the command left running when it failed (the command line guards a reused pid)
                processes.stop(pid, expect=line)
    return Stopped(code, out_file.read_text(), err_file.read_text(), children)
