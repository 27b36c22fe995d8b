"""Regular expressions that rules run on request data, by RE2: what Kubernetes' CEL and Go run.

Python's ``re`` backtracks: ``(a+)+$`` takes exponential time on a string of a few dozen
characters, and our functions cannot be interrupted while they run (the evaluation's time
limit is checked between calls), so one Pod's name could hold the webhook for minutes. RE2
runs in time linear in its input and accepts the syntax of Go's ``regexp`` (no backreferences
or look-around), as CEL's built-in ``matches`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The RE2 module and its options, loaded on first use: it holds about 1 MiB that a process
    whose rules use no regular expression need not carry."""
    import re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern fails its rule with the reason; nothing goes to stderr
    return re2, options


@functools.lru_cache(maxsize=256)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ValueError with RE2's reason when it refuses the pattern."""
    re2, options = _re2()
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        reason = e.args[0] if e.args else ""
        raise ValueError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None


def go_matches(pattern: Any, text: str) -> Iterator[Any]:
    """The successive non-overlapping matches of ``pattern`` (:func:`compiled`) in ``text`` that
    Go's ``FindAll`` and ``ReplaceAll`` take: an empty match right after the previous match is
    passed over."""
    end = -1
    for match in pattern.finditer(text):
        if match.start() == match.end() == end:
            continue
        yield match
        end = match.end()
