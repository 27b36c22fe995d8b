"""Every path into a JSON document, for tests that damage a document at a random place."""

from __future__ import annotations

from typing import Any


def json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path (keys and list indexes) of every member and item below ``node``, parents first; not the root."""
    out: list[tuple[Any, ...]] = []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        out += [(*prefix, key), *json_paths(child, (*prefix, key))]
    return out
