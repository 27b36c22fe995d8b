"""What bounds a CEL evaluation while it runs (the static estimate is :mod:`.cost`).

Only :mod:`.cel` uses this. cel-expr-python holds the GIL for a whole evaluation and cannot be
interrupted, so the bounds act where Python runs: before the evaluation (the request must be
no larger than the program's estimate assumed) and at every call of one of our functions (the
time limit, and the length of the lists they make).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import cost, costmodel

TIME_LIMIT = 1.0
"""Seconds after which our functions make an evaluation fail (checked at each call)."""

_CONTAINERS = frozenset((dict, list, tuple))  # what the conversion to CEL walks into (subclasses are copied)
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


def measures(variables: Mapping[str, JSON]) -> tuple[int, int]:
    """(entries of the longest list or map, serialized bytes of the largest variable)."""
    longest = 0
    stack: list[Any] = [v for v in variables.values() if type(v) in _CONTAINERS]
    pop, push = stack.pop, stack.extend
    while stack:  # containers only, by exact type: several times faster than visiting every value
        value = pop()
        if len(value) > longest:
            longest = len(value)
        push([v for v in (value.values() if type(value) is dict else value) if type(v) in _CONTAINERS])
    largest = 0
    for value in variables.values():
        with contextlib.suppress(TypeError):  # not JSON: the conversion to CEL reports it
            largest = max(largest, len(orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS)))
    return longest, largest


def check_size(bound: cost.Estimate, measured: tuple[int, int]) -> None:
    """Refuse request data larger than what ``bound`` was estimated for."""
    longest, largest = measured
    if longest > (bound.items or 0) or largest > (bound.bytes or 0):
        raise CelEvalError(
            f"the request is too large for this expression's cost bound ({bound.cost:,} for lists of at "
            f"most {bound.items} entries and values of at most {bound.bytes or 0:,} bytes; this request has "
            f"{longest} entries and {largest:,} bytes)")
