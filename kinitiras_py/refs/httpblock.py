"""A reference's ``http`` block, checked and made into the request to send.

Each problem is a LookupError naming the field (``url``, ``method``, ``params``, ``header``,
``timeoutSeconds``, ``auth``), as the reference's error says it. Query ``params`` are merged into
a URL that already has a query; a ``body`` is sent as JSON (with its Content-Type unless a header
gives one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import orjson
from yarl import URL

from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.base.urls import parse_url

MAX_TIMEOUT = 30.0
"""Upper bound for ``timeoutSeconds`` (an admission webhook call cannot take longer)."""


@dataclass(frozen=True)
class HttpCall:
    """A checked ``http`` block: the request to send (``shown``: the URL without user info, for messages)."""

    method: str
    url: URL
    shown: str
    headers: dict[str, str]
    body: bytes | None
    timeout: float
    auth: Obj | None


def prepare(spec: Obj, default_timeout: float) -> HttpCall:
    """Validate the ``http`` block; raise LookupError naming the bad field."""
    url_text = spec.get("url")
    if not isinstance(url_text, str) or not url_text:
        raise LookupError("url is required")
    try:
        url = parse_url(url_text)
    except (ValueError, TypeError):
        raise LookupError(f"url {url_text!r} is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise LookupError(f"url {url.with_user(None) if url.absolute else url_text} is not an absolute "
                          "http or https URL")
    method = str(spec.get("method") or "GET").upper()
    if method not in ("GET", "POST"):
        raise LookupError(f"method {method} is not supported (GET or POST)")
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise LookupError("params must be a map of strings")
    if params:
        url = url.extend_query({str(k): _scalar("params", k, v) for k, v in params.items()})
    shown = str(url.with_user(None))
    header = spec.get("header") or {}
    if not isinstance(header, dict):
        raise LookupError("header must be a map of strings")
    headers = {str(k): _scalar("header", k, v) for k, v in header.items()}
    body = None
    if spec.get("body") is not None:
        body = orjson.dumps(spec["body"], option=orjson.OPT_SORT_KEYS)
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
    timeout = spec.get("timeoutSeconds", default_timeout)
    if timeout is None:
        timeout = default_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) \
            or not 0 < timeout <= MAX_TIMEOUT:
        raise LookupError(f"timeoutSeconds must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}")
    auth = spec.get("auth")
    if auth is not None and not isinstance(auth, dict):
        raise LookupError("auth must be a map")
    return HttpCall(method, url, shown, headers, body, float(timeout), auth or None)


def _scalar(field: str, key: object, value: JSON) -> str:
    """A header or query value as a string; maps and lists are refused."""
    if isinstance(value, dict | list):
        raise LookupError(f"{field}.{key} must be a string, not a {'map' if isinstance(value, dict) else 'list'}")
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
