"""What bounds a CEL evaluation while it runs (the static estimate is :mod:`.cost`).

Only :mod:`.cel` uses this. cel-expr-python holds the GIL for a whole evaluation and cannot be
interrupted, so the bounds act where Python runs: before the evaluation (the request must be
no larger than the program's estimate assumed, where it depends on it) and at every call of one of our functions (the
time limit, and the length of the lists they make).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from kinitiras_py.base import identity
from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import cost, costmodel

TIME_LIMIT = 1.0
"""Seconds after which our functions make an evaluation fail (checked at each call)."""

_CONTAINERS = frozenset((dict, list, tuple))  # what the conversion to CEL walks into (subclasses are copied)
_SIZED = _CONTAINERS | {str}  # a string's entries are its characters, as the estimate takes them
_clock = threading.local()  # per thread: when the running evaluation must give up


def start() -> None:
    """An evaluation starts on this thread: its time limit runs from now."""
    _clock.deadline = time.monotonic() + TIME_LIMIT


def stop() -> None:
    """The evaluation on this thread is over."""
    _clock.deadline = float("inf")


def in_time() -> None:
    """Refuse (ValueError) once the evaluation on this thread has run past its time limit."""
    try:
        deadline = _clock.deadline
    except AttributeError:  # outside an evaluation (a test calling a function directly)
        return
    if time.monotonic() > deadline:
        raise ValueError(f"the evaluation ran longer than its {TIME_LIMIT:g} s limit")


def bounded(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` refusing to run past the time limit (:func:`in_time`), and lists over
    :data:`costmodel.FUNCTION_ITEMS`. A function that never returns a list needs only
    :func:`in_time` before each call."""
    limit = costmodel.FUNCTION_ITEMS
    counted = name in ("range", "lists.range")  # refused before the list exists

    def call(*args: Any) -> Any:
        in_time()
        if counted and isinstance(args[0], int) and args[0] > limit:
            raise ValueError(f"{name}: {args[0]} is more than the {limit} elements a list may have here")
        result = impl(*args)
        if isinstance(result, list) and len(result) > limit:
            raise ValueError(f"{name}: the result has {len(result)} elements; the limit is {limit}")
        return result

    return call


def longest(variables: Mapping[str, JSON], paths: tuple[costmodel.Path, ...]) -> tuple[int, str]:
    """The most entries of a list, map or string at any of ``paths`` in ``variables``, and which path
    (``object.spec.containers``; ``[*]`` any element or value). Only these lengths bound the
    cost (:attr:`cost.Estimate.paths`): long lists elsewhere are not looked at."""
    most: list[Any] = [0, ""]
    for root, node in _trie(paths).items():
        if root is None:  # no path is empty
            continue
        found = _everything(variables) if root == costmodel.EVERYWHERE else [variables.get(root)]
        for value in found:
            _visit(value, node, most)
    return most[0], most[1]


_Node = dict[str | None, Any]  # a trie node: child nodes by segment, the path's name under None


@identity.by_identity(1024)  # a program's paths are made once: hashing them would cost more than the look-up
def _trie(paths: tuple[costmodel.Path, ...]) -> _Node:
    """``paths`` as nested dicts of segments (they share their prefixes: pod spec alternatives)."""
    root: _Node = {}
    for path in paths:
        node = root
        for segment in path:
            node = node.setdefault(segment, {})
        node[None] = ".".join(path).replace(".*", "[*]")
    return root


def _visit(value: Any, node: _Node, most: list[Any]) -> None:
    kind = type(value)
    where = node.get(None)
    if where is not None and kind in _SIZED and len(value) > most[0]:
        most[0], most[1] = len(value), where
    if kind is dict:
        for segment, child in node.items():
            if segment == costmodel.ANY:  # a loop over a map is over its keys; an index by them, its values
                for v in value.values():
                    _visit(v, child, most)
                if None in child:
                    leaf: _Node = {None: child[None]}
                    for k in value:
                        _visit(k, leaf, most)
            elif segment is not None and segment in value:
                _visit(value[segment], child, most)
    elif kind in _CONTAINERS and costmodel.ANY in node:
        child = node[costmodel.ANY]
        for v in value:
            _visit(v, child, most)


def _everything(variables: Mapping[str, JSON]) -> list[Any]:
    """Every list, map and string in ``variables``, at any depth."""
    found: list[Any] = []
    stack: list[Any] = [v for v in variables.values() if type(v) in _SIZED]
    while stack:
        value = stack.pop()
        found.append(value)
        if type(value) is not str:
            stack.extend([v for v in (value.values() if type(value) is dict else value) if type(v) in _SIZED])
    return found


def largest(variables: Mapping[str, JSON], names: tuple[str, ...]) -> int:
    """The serialized bytes of the largest of the variables ``names`` (all for ``**``)."""
    size = 0
    read = variables.values() if costmodel.EVERYWHERE in names else [variables.get(n) for n in names]
    for value in read:
        with contextlib.suppress(TypeError):  # not JSON: the conversion to CEL reports it
            size = max(size, len(orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS)))
    return size


def check_size(bound: cost.Estimate, most: tuple[int, str], size: int) -> None:
    """Refuse request data larger than what ``bound`` was estimated for: ``most`` entries at the
    paths it depends on (:func:`longest`), ``size`` bytes in a variable (:func:`largest`)."""
    entries, where = most
    if entries > (bound.items or 0) or size > (bound.bytes or 0):
        at = f"{where} has {entries} entries" if entries > (bound.items or 0) else f"it has {size:,} bytes"
        raise CelEvalError(
            f"the request is too large for this expression's cost bound ({bound.cost:,} for lists of at "
            f"most {bound.items} entries where it reads them and values of at most {bound.bytes or 0:,} bytes; "
            f"{at})")


def grown(value: JSON, path: tuple[str, ...]) -> int:
    """At most how many bytes serialized ``value`` gained by a change at ``path`` (JSON pointer
    tokens): what lies there now, with a key for every token (parents a lenient add created)."""
    joined = "".join(path)
    if joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined:
        keys = len(joined) + 6 * len(path)  # written as they are: "token":{...}, or an index
    else:
        try:
            keys = sum(len(orjson.dumps(token)) + 4 for token in path)
        except TypeError:  # a lone surrogate (a script may write one): not JSON, no bound
            return cost.MAX_REQUEST_BYTES * 1024
    node: Any = value
    for token in path:
        if type(node) is dict:
            node = node.get(token)
        elif type(node) is list and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return keys
    try:
        return keys + len(orjson.dumps(node, option=orjson.OPT_PASSTHROUGH_SUBCLASS))
    except TypeError:  # not JSON: no bound; the conversion to CEL reports it
        return cost.MAX_REQUEST_BYTES * 1024
