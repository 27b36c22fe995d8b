"""SIGTERM stops a command the way Ctrl-C does, so what it started is stopped and removed too.

Without a handler SIGTERM ends the process on the spot: no ``finally`` runs, so a benchmark's
control plane (started in its own session to outlive a terminal's Ctrl-C), its ``serve`` child and
its temporary directory were left behind. Raised as KeyboardInterrupt in the main thread instead,
every ``finally`` and context manager on the way out runs (``asyncio.run`` cancels its tasks and
lets theirs run as well), and the command exits with the shell's code for the signal.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType


class _Terms:
    """The SIGTERM handler: the first SIGTERM raises KeyboardInterrupt, later ones are noted only.

    A second ``pkill`` while the first one's clean-up runs must not cut that clean-up short (each
    child gets its grace period and is then killed, so it ends); Ctrl-C still interrupts it.
    """

    def __init__(self) -> None:
        self.received = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self.received:
            return
        self.received = True
        raise KeyboardInterrupt


def stoppable(command: Callable[[], int], name: str) -> int:
    """Run ``command``; on SIGTERM or Ctrl-C let its clean-ups run, say so on stderr in one line
    (no traceback) and return 143 or 130 (128 + the signal's number, as a shell reports it)."""
    if threading.current_thread() is not threading.main_thread():
        return command()  # only the main thread may set handlers, and only it receives signals
    terms = _Terms()
    previous = signal.signal(signal.SIGTERM, terms)
    try:
        return command()
    except KeyboardInterrupt:
        stopped_by = signal.SIGTERM if terms.received else signal.SIGINT
        print(f"{name}: stopped by {stopped_by.name}", file=sys.stderr)
        return 128 + stopped_by
    finally:
        if previous is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, previous)
