"""Time slices: long loops give the event loop a turn every ``SLICE`` seconds.

A loop over every watched object (an informer's relist, queueing a scan pass, announcing a first
list) is cheap per object but long at 10,000 objects; held in one stretch it delays every admission
request behind it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["SLICE", "Slicer"]

SLICE = 0.001
"""Seconds a long loop may hold the event loop before it yields."""


class Slicer:
    """Call :meth:`turn` between items of a long loop: it yields once ``budget`` seconds (default
    :data:`SLICE`) have gone since the last yield (or since it was made)."""

    def __init__(self, budget: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = SLICE if budget is None else budget
        self._clock = clock
        self._since = clock()
        self.yields = 0
        """Turns given to the event loop so far."""

    async def turn(self) -> None:
        """Yield to the event loop if the slice is used up."""
        if self._clock() - self._since >= self.budget:
            await asyncio.sleep(0)
            self.yields += 1
            self._since = self._clock()
