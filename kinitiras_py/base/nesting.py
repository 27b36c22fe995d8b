"""How deep JSON values may nest: objects received, and what rules place in them.

orjson, which copies and writes every object, stops at 255 levels. Kubernetes objects are
nowhere near that deep, so received objects are held to :data:`MAX_DEPTH` levels, and a change a
rule makes to one must keep it there: a value placed at a path of n segments may nest at most
``MAX_DEPTH - n`` levels itself.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 200
"""Deepest nesting (objects and arrays) allowed below an object's root."""


def exceeds(root: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels below ``root``: one list comprehension
    per level, without recursion (finding where is left to slower checks)."""
    level: list[Any] = [root] if isinstance(root, dict | list) else []
    for _depth in range(limit + 1):
        level = [child for value in level for child in (value.values() if isinstance(value, dict) else value)
                 if isinstance(child, dict | list)]
        if not level:
            return False
    return True
