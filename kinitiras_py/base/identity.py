"""Results remembered by the identity of their argument, for values built once and passed around.

``functools.lru_cache`` hashes its argument on every call; for a long tuple of paths (what a CEL
program reads, or what bounds its cost) that hash costs more than the look-up it serves. The
programs' tuples are made once per program text and shared, so their identity is the key: an
entry keeps its argument alive, so no other object can take its id while it is there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def by_identity(maxsize: int) -> Callable[[Callable[[K], V]], Callable[[K], V]]:
    """Remember ``build(key)`` by ``id(key)``; at most ``maxsize`` entries (all forgotten when full)."""
    def wrap(build: Callable[[K], V]) -> Callable[[K], V]:
        entries: dict[int, tuple[K, V]] = {}

        @functools.wraps(build)
        def get(key: K) -> V:
            entry = entries.get(id(key))
            if entry is None or entry[0] is not key:
                if len(entries) >= maxsize:
                    entries.clear()
                entry = entries[id(key)] = (key, build(key))
            return entry[1]

        return get

    return wrap
