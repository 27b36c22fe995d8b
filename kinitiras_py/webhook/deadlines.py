"""One watchdog for the deadlines of every request in flight.

``asyncio.timeout`` arms and cancels a timer in the loop's heap for each request, which at a few
thousand requests a second costs more than the look-up of a remembered mutation. Here a request
only enters its task and deadline in a dict and leaves it; one periodic check, running only
while requests are in flight, cancels the tasks whose deadline has passed. A request may so run
up to one check's interval (at most 50 ms) past its deadline, which stays below the API server's
timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
MAX_TICK = 0.05
"""The longest interval between checks, in seconds."""


class Deadlines:
    """Tasks in flight with their deadlines, checked every tenth of the shortest deadline in
    flight, at most every :data:`MAX_TICK` seconds (how late a deadline may fire)."""

    def __init__(self, tick: float | None = None) -> None:
        self.tick = tick
        """A fixed interval between checks instead (tests)."""
        self._running: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._interval: float | None = None
        """Between the checks while one is scheduled; None while none is."""

    async def run(self, work: Awaitable[T], seconds: float) -> T:
        """``await work`` in the current task; TimeoutError when ``seconds`` pass first. A
        cancellation that is not ours (the server stopping) goes through as it came."""
        task = asyncio.current_task()
        assert task is not None  # a request is always handled in a task
        loop = asyncio.get_running_loop()
        self._running[task] = loop.time() + seconds
        interval = self.tick if self.tick is not None else min(MAX_TICK, seconds / 10)
        if self._interval is None:
            self._interval = interval
            loop.call_later(interval, self._check, loop)
        else:
            self._interval = min(self._interval, interval)  # from the next check on
        try:
            return await work
        except asyncio.CancelledError:
            if task not in self._expired or task.uncancel() > 0:
                raise
            raise TimeoutError from None
        finally:
            del self._running[task]
            self._expired.discard(task)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for task, deadline in self._running.items():
            if deadline <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        if self._running and self._interval is not None:
            loop.call_later(self._interval, self._check, loop)
        else:
            self._interval = None
