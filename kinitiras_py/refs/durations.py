"""Go ``time.ParseDuration`` strings (``90s``, ``10m``, ``1h30m``, ``1.5h``, ``300ms``) as seconds."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """The duration ``text`` in seconds (negative when it starts with ``-``).

    Accepts what Go accepts: an optional sign, then one or more ``<number><unit>`` parts with
    units ns, us (µs), ms, s, m and h, or the bare ``0``. Raises ValueError otherwise.
    """
    if not isinstance(text, str):
        raise ValueError(f"duration must be a string such as 10m, not {type(text).__name__}")
    body = text.strip()
    sign = 1.0
    if body[:1] in "+-" and body:
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f"invalid duration {text!r} (expected e.g. 90s, 10m or 1h30m)")
    return sign * total
