"""Start, watch and stop the control plane's processes by pid."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from kinitiras_py.base.errors import DevError


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_port_free(port: int, what: str) -> None:
    """Raise DevError naming ``what`` when ``port`` on 127.0.0.1 is already taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise DevError(f"port {port} for {what} is already in use on 127.0.0.1") from e
            raise


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` detached from our session, output to ``log``; return its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        # A new session so the processes outlive `dev up` and a Ctrl-C in its terminal.
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env,
        )
    return proc.pid


def alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # A zombie still answers kill(0); read its state to tell.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


def cmdline(pid: int) -> str:
    """The command line of ``pid``, or "" when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def stop(pid: int, expect: str, timeout: float = 10.0) -> bool:
    """Stop ``pid`` (SIGTERM, then SIGKILL) if it still runs ``expect``; True if we stopped it.

    Checking the command line guards against killing an unrelated process that reused the pid.
    """
    if not alive(pid) or expect not in cmdline(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
