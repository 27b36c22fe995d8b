"""One watchdog for the deadlines of every request in flight.

``asyncio.timeout`` arms and cancels a timer in the loop's heap for each request, which at a few
thousand requests a second costs more than the look-up of a remembered mutation. Here a request
only enters its task and deadline in a dict and leaves it; one periodic check, running only
while requests are in flight, cancels the tasks whose deadline has passed. A request may so run
up to one :attr:`Deadlines.tick` past its deadline, which stays below the API server's timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Deadlines:
    """Tasks in flight with their deadlines, checked every :attr:`tick` seconds."""

    def __init__(self, seconds: float, tick: float | None = None) -> None:
        self.seconds = seconds
        self.tick = tick if tick is not None else min(0.05, seconds / 10)
        """How often deadlines are checked (at most 1/10 of ``seconds``): how late one may fire."""
        self._running: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._armed = False

    async def run(self, work: Awaitable[T]) -> T:
        """``await work`` in the current task; TimeoutError when its deadline passes first. A
        cancellation that is not ours (the server stopping) goes through as it came."""
        task = asyncio.current_task()
        assert task is not None  # a request is always handled in a task
        loop = asyncio.get_running_loop()
        self._running[task] = loop.time() + self.seconds
        if not self._armed:
            self._armed = True
            loop.call_later(self.tick, self._check, loop)
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
        self._armed = bool(self._running)
        if self._armed:
            loop.call_later(self.tick, self._check, loop)
