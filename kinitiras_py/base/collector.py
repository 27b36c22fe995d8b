"""Python's garbage collector and the long-lived state of a webhook with informers and a scan.

A full (generation 2) collection walks every object the collector tracks and holds the event loop,
and every admission request waiting on it, for as long as that takes: 25-80 ms with a scan's state
of 10,000 Pods. Most of that state lives as long as the process (modules, compiled policies, the
informers' caches, what the scan published), so :func:`settle` moves it out of the collector's
reach (``gc.freeze``) once it is built: when the informers have synced and the policies are
loaded, after every list of an informer (its first, and a relist after a 410), a second after
policy changes (:class:`Later`), with or without the scan, and after every full scan pass. Full
collections then walk only what was made since.

A frozen object is still freed when its last reference goes; only reference cycles among frozen
objects are never collected, which is why :func:`settle` first collects the young generations.
Freezing is the process's decision: :func:`settle` does nothing until the process that serves (or
benchmarks) calls :func:`manage`, so the scan used as a library, or in tests, leaves it alone.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["FULL", "Later", "Pauses", "manage", "managed", "settle"]


class _State:
    managed = False


def manage(on: bool) -> None:
    """Whether :func:`settle` freezes; switching it off unfreezes everything (the next full
    collection walks it all again, and collects what it can)."""
    _State.managed = on
    if not on:
        gc.unfreeze()


def managed() -> bool:
    """Whether :func:`settle` freezes."""
    return _State.managed


def settle(reason: str) -> int:
    """Collect the young generations, then freeze every object tracked now (see the module
    docstring); the number of frozen objects (0, doing nothing, unless :func:`manage` was called).
    ``reason`` is logged."""
    if not _State.managed:
        return 0
    began = time.perf_counter()
    gc.collect(1)
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("gc: %s: %d objects frozen in %.1f ms", reason, frozen, (time.perf_counter() - began) * 1000)
    return frozen


FULL = 2
"""The generation a full collection collects."""
SETTLE_AFTER = 1.0
"""Seconds :class:`Later` waits after the first of a burst of changes before it settles."""


class Later:
    """Settles (:func:`settle`) once, ``delay`` seconds after the first change of a burst
    (:meth:`soon`): a policy added or changed while serving lives as long as the process, but a
    watch's list of thousands of policies settles once a second, not once per policy."""

    def __init__(self, delay: float = SETTLE_AFTER) -> None:
        self.delay = delay
        self._due: asyncio.TimerHandle | None = None

    def soon(self, reason: str) -> None:
        """Settle ``delay`` seconds from now, unless a settle is due already."""
        if self._due is None:
            self._due = asyncio.get_running_loop().call_later(self.delay, self._settle, reason)

    def _settle(self, reason: str) -> None:
        self._due = None
        settle(reason)

    def cancel(self) -> None:
        """Settle no more."""
        if self._due is not None:
            self._due.cancel()
            self._due = None


class Pauses:
    """Times the collector's collections (seconds each) while installed (``gc.callbacks``).

    Each pause is given to ``on_pause`` as it ends, with the generation collected (0 and 1 are
    young collections, :data:`FULL` a full one). It runs inside the collection, on whatever
    thread triggered it: it must not block or take a lock."""

    def __init__(self, on_pause: Callable[[int, float], None]) -> None:
        self._on_pause = on_pause
        self._began: float | None = None

    def start(self) -> Pauses:
        """Time collections from now on."""
        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        """Time no more collections."""
        gc.callbacks.remove(self._callback)

    def __enter__(self) -> Pauses:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self._began is not None:
            took, self._began = time.perf_counter() - self._began, None
            self._on_pause(info.get("generation", FULL), took)
