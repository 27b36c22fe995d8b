"""The apiVersion and ``request.uid`` of a body that does not decode, found by a bounded scan.

A review orjson refuses (nested deeper than it decodes, a lone surrogate in some string, cut
short, larger than we read) still has to be answered with its uid: the API server uses no answer
whose uid is not the request's. The scan walks the body's tokens without building any value,
keeping only how deep it is and, in the top-level object and in its ``request`` object, the
last member name. It reports a uid only when exactly one string ``request.uid`` was seen (a
``uid`` anywhere deeper, e.g. in ``object.metadata``, is not it) and nothing made it doubtful: a
second ``request`` or ``uid`` member, a ``uid`` that is not a string. It stops after
:data:`MAX_TOKENS` tokens; a scan stopped there before the top-level object ended has not seen
all members, so it reports no uid unless the uid is where the API server writes it, the first
member of ``request``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import orjson

MAX_TOKENS: Final = 100_000
"""Tokens scanned at most (some tens of milliseconds): a body the API server writes has its uid first."""
_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]')
"""A string (escapes included) or a structural character; numbers and literals are skipped."""
_STRING_VALUE: Final = re.compile(rb'\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")\s*[,}]')
"""After a member name: its value, when that is a whole string."""
_COLON: Final = re.compile(rb"\s*:")


@dataclass
class Found:
    """What a scan found: the top-level ``apiVersion`` and ``request.uid`` strings ("" when none
    or doubtful)."""

    api_version: str
    uid: str


def _text(token: bytes) -> str | None:
    """A JSON string token's text, or None when it does not decode (a lone surrogate...)."""
    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def scan(body: bytes, whole: bool = True, max_tokens: int = MAX_TOKENS) -> Found:
    """The apiVersion and uid of ``body`` as the module docstring says, reading at most ``max_tokens``
    tokens; ``whole=False`` says that ``body`` is only the beginning of the request (a scan that
    reached its end has then not seen all members either)."""
    versions: list[str | None] = []
    uids: list[str | None] = []
    requests = 0
    first_in_request = False  # whether the uid found was request's first member
    stack: list[bytes] = []  # "{" or "[" per open container
    key = b""  # the last member name read in the top-level object (depth 1)
    members = 0  # members read in the current request object
    in_request = False
    seen_all = whole
    for count, match in enumerate(_TOKEN.finditer(body)):
        if count >= max_tokens:
            seen_all = False
            break
        token = match.group()
        first = token[:1]
        if first in (b"{", b"["):
            if len(stack) == 1 and first == b"{" and key == b'"request"':
                in_request, members = True, 0
            stack.append(first)
        elif first in (b"}", b"]"):
            if not stack:
                break
            stack.pop()
            if len(stack) == 1:
                in_request = False
            elif not stack:
                seen_all = True  # the top-level object ended: what follows is not part of it
                break
        elif first == b'"' and stack[-1:] == [b"{"] and len(stack) <= 2 and _COLON.match(body, match.end()):
            # A member name of the top-level object or of an object directly inside it.
            if len(stack) == 1:
                key = token
                requests += token == b'"request"'
                if token == b'"apiVersion"':
                    value = _STRING_VALUE.match(body, match.end())
                    versions.append(_text(value.group(1)) if value else None)
            elif in_request:
                members += 1
                if token == b'"uid"':
                    value = _STRING_VALUE.match(body, match.end())
                    uids.append(_text(value.group(1)) if value else None)
                    first_in_request = members == 1 and len(uids) == 1
    sure = seen_all or first_in_request
    uid = uids[0] if sure and requests == 1 and len(uids) == 1 else None
    version = versions[0] if len(versions) == 1 else None
    return Found(version or "", uid or "")
