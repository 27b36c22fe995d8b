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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

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


def bounded(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """``impl`` refusing to run past the time limit, and lists over :data:`costmodel.FUNCTION_ITEMS`."""
    limit = costmodel.FUNCTION_ITEMS
    counted = name in ("range", "lists.range")  # refused before the list exists

    def call(*args: Any) -> Any:
        if time.monotonic() > getattr(_clock, "deadline", float("inf")):
            raise ValueError(f"the evaluation ran longer than its {TIME_LIMIT:g} s limit")
        if counted and isinstance(args[0], int) and args[0] > limit:
            raise ValueError(f"{name}: {args[0]} is more than the {limit} elements a list may have here")
        result = impl(*args)
        if isinstance(result, list) and len(result) > limit:
            raise ValueError(f"{name}: the result has {len(result)} elements; the limit is {limit}")
        return result

    return call


def longest(variables: Mapping[str, JSON], paths: Iterable[costmodel.Path]) -> tuple[int, str]:
    """The most entries of a list, map or string at any of ``paths`` in ``variables``, and which path
    (``object.spec.containers``; ``[*]`` any element or value). Only these lengths bound the
    cost (:attr:`cost.Estimate.paths`): long lists elsewhere are not looked at."""
    most, where = 0, ""
    for path in paths:
        found: list[Any] = _everything(variables) if path[0] == costmodel.EVERYWHERE else [variables.get(path[0])]
        for segment in path[1:]:
            if segment == costmodel.ANY:
                found = [v for value in found if type(value) in _CONTAINERS
                         for v in (value.values() if type(value) is dict else value)]
            else:
                found = [value[segment] for value in found if type(value) is dict and segment in value]
        for value in found:
            if type(value) in _SIZED and len(value) > most:
                most, where = len(value), ".".join(path).replace(".*", "[*]")
    return most, where


def _everything(variables: Mapping[str, JSON]) -> list[Any]:
    """Every list and map in ``variables``, at any depth."""
    found: list[Any] = []
    stack: list[Any] = [v for v in variables.values() if type(v) in _CONTAINERS]
    while stack:  # containers only, by exact type: several times faster than visiting every value
        value = stack.pop()
        found.append(value)
        stack.extend([v for v in (value.values() if type(value) is dict else value) if type(v) in _CONTAINERS])
    return found


def largest(variables: Mapping[str, JSON]) -> int:
    """The serialized bytes of the largest variable."""
    size = 0
    for value in variables.values():
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
