"""Results of CEL programs remembered by the parts of their variables they read (bounded).

Only :mod:`.cel` and :mod:`.celbindings` use this. A program's result depends on nothing but
the parts of its variables it reads (:mod:`.celreads`): CEL is deterministic and every function
of our library is pure. Pods made from one template (a Deployment's replicas, a Job's) show the
same parts to the same programs, so the second and later Pods look the result up instead of
evaluating it again. The stored CEL still decides every result: an entry is what that program
returned for exactly those parts.

An entry is keyed by the program's source and the JSON of the parts it read, and holds the
result's JSON, decoded afresh for each hit so that no two requests share a value. Only
successful evaluations are kept. The cache is bounded in bytes (oldest entries leave first) and
can be switched off (``max_bytes`` 0).

There is no cache of the process: each :class:`kinitiras_py.Engine` owns one and makes it the
active one (:func:`using`) while it evaluates, in its task and the threads it starts with the
context copied (``asyncio.to_thread``). Outside :func:`using` nothing is remembered.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson

from kinitiras_py.base.bounded import Cache
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import celvalues

DEFAULT_BYTES: Final = 1024 * 1024
"""What `serve` keeps unless told otherwise (``--cel-results-mib``)."""
MAX_ENTRY_BYTES: Final = 16 * 1024
"""Larger inputs or results are not kept: their evaluation dwarfs the look-up anyway."""
_OVERHEAD: Final = 200
"""Bytes an entry costs beyond its key and result (dict slot, tuple, bytes headers)."""
MISSING: Final = object()
"""What :meth:`Results.get` returns when it has no entry."""


class Results(Cache[tuple[str, bytes], bytes]):
    """A bounded map (program source, parts read) → result; safe to share between threads."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        super().__init__(max_bytes)
        self._lock = threading.Lock()

    def get(self, source: str, key: bytes) -> Any:
        """The result ``source`` gave for the parts ``key`` (a fresh copy), or :data:`MISSING`."""
        blob = self._entries.get((source, key))
        if blob is None:
            self.misses += 1
            return MISSING
        self.hits += 1
        return orjson.loads(blob)

    def put(self, source: str, key: bytes, result: JSON) -> None:
        """Remember that ``source`` gave ``result`` for the parts ``key``."""
        blob = _exact_json(result)
        cost = len(key) + len(blob or b"") + _OVERHEAD
        if blob is None or len(key) > MAX_ENTRY_BYTES or cost > self.max_bytes:
            return
        with self._lock:
            self._entries.put((source, key), blob, cost)

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        with self._lock:
            super().clear()


def key(data: Mapping[str, JSON]) -> bytes | None:
    """The key of the parts ``data`` (variable name → the part of it a program reads); None
    when no result is kept: no cache is active or it is off, or they cannot be told apart by
    their JSON (see :func:`_exact_json`)."""
    results = _ACTIVE.get()
    return _exact_json(data) if results is not None and results.enabled else None


def _exact_json(value: Any) -> bytes | None:
    """``value``'s JSON, when it says exactly what ``value`` is (:func:`.celvalues.exact_json`: a
    NaN must never share a key or a result with a null; integers beyond 64 bits are refused) and
    is small enough to keep (:data:`MAX_ENTRY_BYTES`); else None."""
    return celvalues.exact_json(value, limit=MAX_ENTRY_BYTES)


_ACTIVE: contextvars.ContextVar[Results | None] = contextvars.ContextVar("cel_results", default=None)
"""The cache of the engine evaluating in this context, if any."""


@contextlib.contextmanager
def using(results: Results | None) -> Iterator[None]:
    """Programs evaluated inside this block (and in threads started from it with the context
    copied) look results up in ``results`` and keep theirs there (None: nowhere)."""
    token = _ACTIVE.set(results)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def get(source: str, key: bytes) -> Any:
    """The active cache's result for ``source`` and the parts ``key`` (:func:`key` gave ``key``
    only while a cache is active), or :data:`MISSING`."""
    results = _ACTIVE.get()
    return MISSING if results is None else results.get(source, key)


def put(source: str, key: bytes, result: JSON) -> None:
    """Keep ``result`` in the active cache, if any."""
    results = _ACTIVE.get()
    if results is not None:
        results.put(source, key, result)
