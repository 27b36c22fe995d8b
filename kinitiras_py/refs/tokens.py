"""Bearer tokens fetched from an ``authUrl`` with Basic auth, cached in memory until shortly before expiry.

kinitiras ran a daemon per token endpoint that wrote each token into the policy objects (and
patched the wrong field for COPs), retried a failing endpoint every 100 ms forever, panicked on
tokens living under 10 s, and checked a new token against the *previous* fetch time. Here a token
is fetched on demand when a request needs one, kept only in this process, reused until
``refresh_margin`` before it expires, and checked against the current time. Concurrent requests
for the same endpoint and user share one fetch. Failures are not cached: the next request tries
again (at most one fetch in flight per endpoint and user).

The HTTP call itself is injected (``fetch``), and so is the clock, so this module is testable
without a network or real time.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON

log = logging.getLogger(__name__)

DEFAULT_LIFETIME = 300.0
"""Seconds a token is assumed valid when the endpoint gives no expireAt and no expireDuration is set."""

REFRESH_MARGIN = 30.0
"""A cached token is replaced this many seconds before it expires (less for short-lived tokens)."""


class TokenError(KinitirasError, LookupError):
    """No usable token: the endpoint failed, answered garbage, or the token has expired.

    Messages never contain a token or a password.
    """


@dataclass(frozen=True)
class Credentials:
    """What is needed to ask ``auth_url`` for a token. The password is left out of repr."""

    auth_url: str
    username: str
    password: str = field(repr=False)
    expire_duration: float | None = None
    """Seconds a token lives when the endpoint does not say (``expireDuration``); None or <= 0: unset."""

    @property
    def key(self) -> tuple[str, str, str]:
        """Cache and coalescing key: endpoint, user and a digest of the password (so a changed
        password fetches a new token, and the password itself is not kept as a key)."""
        return self.auth_url, self.username, hashlib.sha256(self.password.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """``user@host`` for messages and logs (no password, no path or query)."""
        try:
            host = urlsplit(self.auth_url).hostname or self.auth_url
        except ValueError:
            host = self.auth_url
        return f"{self.username}@{host}"


@dataclass(frozen=True)
class Token:
    """One fetched token; times are seconds of the cache's clock (Unix time by default)."""

    value: str = field(repr=False)
    fetched_at: float
    expires_at: float

    def fresh(self, now: float, margin: float = REFRESH_MARGIN) -> bool:
        """Still worth using at ``now``: more than the margin left, where the margin shrinks to a
        quarter of the lifetime for short-lived tokens (so they are still reused, never spun on)."""
        lifetime = max(self.expires_at - self.fetched_at, 0.0)
        return now < self.expires_at - min(margin, lifetime / 4)


def token_from_answer(answer: JSON, creds: Credentials, now: float,
                      default_lifetime: float = DEFAULT_LIFETIME) -> Token:
    """Validate the token endpoint's JSON answer ``{"token": str, "expireAt": <Unix ms>?}``.

    Expiry is ``expireAt`` when positive, else ``now + expire_duration`` when positive, else
    ``now + default_lifetime``. A token that has already expired at ``now`` is refused.
    """
    who = creds.describe()
    if not isinstance(answer, dict):
        raise TokenError(f"token endpoint for {who} did not answer a JSON object")
    value = answer.get("token")
    if not isinstance(value, str) or not value:
        raise TokenError(f"token endpoint for {who} answered no token (expected {{\"token\": \"...\"}})")
    if any(c in value for c in "\r\n\0"):
        raise TokenError(f"token endpoint for {who} answered a token with control characters")
    expire_ms = answer.get("expireAt")
    if expire_ms is not None and (isinstance(expire_ms, bool) or not isinstance(expire_ms, int | float)
                                  or not math.isfinite(expire_ms)):
        raise TokenError(f"token endpoint for {who} answered a non-numeric expireAt "
                         "(expected Unix milliseconds)")
    if expire_ms is not None and expire_ms > 0:
        expires_at = expire_ms / 1000.0
    elif creds.expire_duration is not None and creds.expire_duration > 0:
        expires_at = now + creds.expire_duration
    else:
        expires_at = now + default_lifetime
    if expires_at <= now:
        raise TokenError(f"token endpoint for {who} answered a token that expired at "
                         f"{_iso(expires_at)}, before now ({_iso(now)}); expireAt must be Unix milliseconds")
    return Token(value, now, expires_at)


def stored_token(value: str, expire_at: str | None, now: float) -> str:
    """A token written into the policy itself (``auth.token``, optional RFC 3339 ``auth.expireAt``),
    accepted only while it has not expired at ``now``."""
    if expire_at:
        try:
            when = datetime.fromisoformat(expire_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise TokenError(f"auth.expireAt {expire_at!r} is not an RFC 3339 time") from None
        if when <= now:
            raise TokenError(f"auth.token expired at {expire_at}")
    return value


def _iso(seconds: float) -> str:
    """Unix ``seconds`` as RFC 3339 UTC, or the raw number when out of range."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return f"{seconds:g}"


Fetcher = Callable[[Credentials, float], Awaitable[JSON]]
"""``fetch(creds, timeout)``: POST to ``creds.auth_url`` with Basic auth and return the parsed JSON
answer; raise LookupError (without secrets in the message) on failure."""


class TokenCache:
    """Tokens per (authUrl, username, password digest), fetched on demand through ``fetch``."""

    def __init__(self, fetch: Fetcher, *, clock: Callable[[], float] = time.time,
                 refresh_margin: float = REFRESH_MARGIN, default_lifetime: float = DEFAULT_LIFETIME,
                 max_entries: int = 1024) -> None:
        """``clock`` must be Unix time in seconds (``expireAt`` from endpoints is absolute)."""
        self._fetch = fetch
        self._clock = clock
        self._margin = refresh_margin
        self._default_lifetime = default_lifetime
        self._max_entries = max_entries
        self._tokens: dict[tuple[str, str, str], Token] = {}
        self._inflight: dict[tuple[str, str, str], asyncio.Task[Token]] = {}
        self.fetches = 0
        """How many fetches were started (for metrics and tests)."""

    def cached(self, creds: Credentials) -> Token | None:
        """The cached token for ``creds``, fresh or not."""
        return self._tokens.get(creds.key)

    def forget(self, creds: Credentials) -> None:
        """Drop the cached token for ``creds``."""
        self._tokens.pop(creds.key, None)

    async def token(self, creds: Credentials, timeout: float, *, reject: str | None = None) -> str:
        """A fresh token for ``creds``: the cached one, or one fetched now (joining a fetch already
        in flight for the same key). ``reject`` names a token the target refused (HTTP 401): it is
        dropped from the cache and a new one is fetched. ``timeout`` bounds a fetch this call starts.
        Raises TokenError or LookupError."""
        key = creds.key
        cached = self._tokens.get(key)
        if cached is not None and reject is not None and cached.value == reject:
            del self._tokens[key]
            cached = None
        if cached is not None and cached.fresh(self._clock(), self._margin):
            return cached.value
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._refresh(creds, timeout))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._settled(key, t))
        # shield: a caller giving up (its own deadline) must not cancel the fetch others wait on.
        return (await asyncio.shield(task)).value

    async def _refresh(self, creds: Credentials, timeout: float) -> Token:
        """Fetch, validate and cache one token."""
        self.fetches += 1
        try:
            answer = await self._fetch(creds, timeout)
            token = token_from_answer(answer, creds, self._clock(), self._default_lifetime)
        except TimeoutError:
            log.warning("token fetch timed out", extra={"auth": creds.describe(), "timeout": timeout})
            raise TokenError(f"token endpoint for {creds.describe()}: no answer within {timeout:g} s") from None
        except LookupError as e:
            log.warning("token fetch failed", extra={"auth": creds.describe(), "error": str(e)})
            raise
        self._store(creds.key, token)
        log.info("fetched a token", extra={"auth": creds.describe(), "expiresAt": _iso(token.expires_at)})
        return token

    def _store(self, key: tuple[str, str, str], token: Token) -> None:
        """Cache ``token``, dropping expired entries (and the oldest ones) when the cache is full."""
        self._tokens[key] = token
        if len(self._tokens) > self._max_entries:
            now = self._clock()
            for k in [k for k, t in self._tokens.items() if t.expires_at <= now]:
                del self._tokens[k]
            while len(self._tokens) > self._max_entries:
                del self._tokens[next(iter(self._tokens))]

    def _settled(self, key: tuple[str, str, str], task: asyncio.Task[Token]) -> None:
        """Clear the in-flight marker; fetch the exception so an unawaited failure is not reported."""
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()
