"""Rate limits for the controller's background writers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """At most ``rate`` takes per second, in bursts of up to ``rate`` (at least one)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError("the rate must be positive")
        self.rate, self._clock = rate, clock
        self.capacity = max(1.0, rate)
        self._tokens, self._at = self.capacity, clock()

    async def take(self) -> None:
        """Wait for a token and take it."""
        while True:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            await asyncio.sleep((1 - self._tokens) / self.rate)
