"""A map bounded by the bytes its entries are said to cost: the oldest leave first.

Shared by the caches of results (``celmemo``, ``mutationmemo``): each says what an entry costs
(its JSON, its key, a fixed overhead), this keeps the sum within ``max_bytes``. "Oldest" is by
insertion, or by last use for look-ups made with ``refresh``. Not thread-safe: a caller shared
between threads holds its own lock around :meth:`Bounded.put`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """Entries with their costs, at most ``max_bytes`` of them in all."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[K, tuple[V, int]] = {}
        self._bytes = 0

    @property
    def size(self) -> int:
        """The bytes held, as counted against :attr:`max_bytes`."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K, refresh: bool = False) -> V | None:
        """The value kept for ``key``, or None; with ``refresh``, it becomes the newest."""
        if not refresh:
            found = self._entries.get(key)
            return None if found is None else found[0]
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self._entries[key] = found
        return found[0]

    def put(self, key: K, value: V, cost: int) -> bool:
        """Keep ``value`` for ``key`` at ``cost`` bytes, the oldest entries leaving until it fits;
        False (nothing changed) when ``key`` is kept already or ``cost`` exceeds the bound."""
        if cost > self.max_bytes or key in self._entries:
            return False
        self._entries[key] = (value, cost)
        self._bytes += cost
        while self._bytes > self.max_bytes:
            self._bytes -= self._entries.pop(next(iter(self._entries)))[1]
        return True

    def discard(self, key: K) -> None:
        """Forget the entry for ``key``, if any."""
        found = self._entries.pop(key, None)
        if found is not None:
            self._bytes -= found[1]

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
        self._bytes = 0


class Cache(Generic[K, V]):
    """A cache over a :class:`Bounded` map: its bound, the bytes it holds, and how many look-ups
    found an entry (``hits``) or none (``misses``), which subclasses count."""

    def __init__(self, max_bytes: int, max_entry_bytes: int | None = None) -> None:
        self.hits = 0
        self.misses = 0
        self._entries: Bounded[K, V] = Bounded(max_bytes)
        self.max_entry_bytes = max_entry_bytes
        """Entries that cost more are not kept (None: only :attr:`max_bytes` bounds them)."""

    @property
    def max_bytes(self) -> int:
        """The bound on :attr:`size`."""
        return self._entries.max_bytes

    @property
    def enabled(self) -> bool:
        """Whether anything is kept at all."""
        return self._entries.max_bytes > 0

    @property
    def size(self) -> int:
        """The bytes held, as counted against :attr:`max_bytes`."""
        return self._entries.size

    def __len__(self) -> int:
        return len(self._entries)

    def keep(self, key: K, value: V, cost: int, replace: bool = False) -> None:
        """Keep ``value`` for ``key`` at ``cost`` bytes unless it costs more than
        :attr:`max_entry_bytes`; an entry already kept for ``key`` stays, unless ``replace``."""
        if self.max_entry_bytes is not None and cost > self.max_entry_bytes:
            return
        if replace:
            self._entries.discard(key)
        self._entries.put(key, value, cost)

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        self._entries.clear()

    def configure(self, max_bytes: int) -> None:
        """Keep at most ``max_bytes`` (0: nothing); entries and counters start afresh."""
        self.clear()
        self._entries.max_bytes = max_bytes
        self.hits = self.misses = 0
