"""Reading an admission request's body: bounded in size, JSON only, kept for the error path."""

from __future__ import annotations

from aiohttp import web

from kinitiras_py.base.errors import ReviewError

MAX_BODY_BYTES = 8 * 1024 * 1024
"""Objects are at most ~3 MiB in etcd; a review may carry object and oldObject."""
PREFIX_BYTES = 64 * 1024
"""How much of an oversized body is kept, to find its uid for the 413 answer."""
BODY_KEY = web.RequestKey("kinitiras.body", bytes)
"""Where the body read is kept on the request, for the error middleware (it cannot be read twice)."""


async def read_body(request: web.Request, limit: int = MAX_BODY_BYTES) -> tuple[bytes, bool]:
    """``(body, True)``, or ``(its first PREFIX_BYTES, False)`` when it exceeds ``limit`` bytes.

    The stream is read directly rather than through ``request.read()``, whose size error would
    leave nothing to answer with; a declared length over the limit stops reading early.
    """
    declared = request.content_length
    if declared is not None and declared <= limit <= MAX_BODY_BYTES:
        # The common case: a declared length within the limit, which aiohttp holds the body to
        # (and within the client_max_size that make_app gives aiohttp, so read() cannot refuse it).
        request[BODY_KEY] = await request.read()
        return request[BODY_KEY], True
    declared_too_large = declared is not None and declared > limit
    data = bytearray()
    async for chunk in request.content.iter_chunked(PREFIX_BYTES):
        data += chunk
        if len(data) > limit or (declared_too_large and len(data) >= PREFIX_BYTES):
            request[BODY_KEY] = bytes(data[:PREFIX_BYTES])
            return request[BODY_KEY], False
    if declared_too_large:
        request[BODY_KEY] = bytes(data[:PREFIX_BYTES])
        return request[BODY_KEY], False
    request[BODY_KEY] = bytes(data)
    return request[BODY_KEY], True


def check_content_type(request: web.Request) -> None:
    """ReviewError unless the body is declared JSON (or not declared at all, as some clients do)."""
    declared = request.headers.get("Content-Type")
    if declared is None:
        return
    mime = declared.split(";", 1)[0].strip().lower()
    if mime != "application/json" and not mime.endswith("+json"):
        raise ReviewError(f"content type {declared!r} is not application/json")
