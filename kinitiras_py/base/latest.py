"""A value that changes over time, which tasks can wait for (the latest certificate, bundle...)."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Latest(Generic[T]):
    """A box holding the latest value: ``get()`` now, ``await box`` for the first value,
    ``await box.next(version)`` for a value newer than ``version``."""

    def __init__(self) -> None:
        self._value: T | None = None
        self.version = 0
        """Bumped by every :meth:`set`."""
        self._changed = asyncio.Event()

    def get(self) -> T | None:
        """The latest value, or None before the first."""
        return self._value

    def set(self, value: T) -> None:
        """Store ``value`` (when it differs) and wake the waiters."""
        if self.version and value == self._value:
            return
        self._value = value
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def next(self, version: int = 0) -> T:
        """The value once ``self.version > version``."""
        while self.version <= version or self._value is None:
            await self._changed.wait()
        return self._value

    async def wait(self) -> T:
        """The first value (at once when there is one)."""
        return await self.next(0)

    def __await__(self) -> Generator[Any, None, T]:
        return self.wait().__await__()
