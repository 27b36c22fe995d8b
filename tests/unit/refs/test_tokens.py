"""Token cache and fetch rules (refs.tokens) and Go durations (refs.durations), without a network."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinitiras_py.refs.durations import parse_duration
from kinitiras_py.refs.tokens import (
    Credentials,
    Token,
    TokenCache,
    TokenError,
    stored_token,
    token_from_answer,
)

NOW = 1_700_000_000.0
CREDS = Credentials("https://auth.example.com/token?x=1", "alice", "pa55-word-xyz")


class Clock:
    """A settable Unix clock."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Endpoint:
    """A fake token endpoint: answers ``tok-<n>`` with the configured lifetime, optionally slowly."""

    def __init__(self, clock: Clock, lifetime_ms: float | None = 600_000, delay: float = 0.0) -> None:
        self.clock, self.lifetime_ms, self.delay = clock, lifetime_ms, delay
        self.calls: list[tuple[Credentials, float]] = []
        self.fail: Exception | None = None

    async def __call__(self, creds: Credentials, timeout: float) -> Any:
        self.calls.append((creds, timeout))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        answer: dict[str, Any] = {"token": f"tok-{len(self.calls)}"}
        if self.lifetime_ms is not None:
            answer["expireAt"] = self.clock.now * 1000 + self.lifetime_ms
        return answer


# ---- durations ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3),
    ("2us", 2e-6), ("2µs", 2e-6), ("5ns", 5e-9), ("-1m", -60.0), ("+2s", 2.0), (".5s", 0.5),
    ("1h0m10s", 3610.0), ("3.s", 3.0),
])
def test_parse_duration_accepts_go_syntax(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "m", "1d", "1h 30m", "-", "1.2.3s", "s10", "0s0", "1hm"])
def test_parse_duration_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


# ---- answers and freshness ---------------------------------------------------------------------

def test_answer_expire_at_is_unix_milliseconds() -> None:
    token = token_from_answer({"token": "t", "expireAt": (NOW + 120) * 1000}, CREDS, NOW)
    assert (token.value, token.fetched_at, token.expires_at) == ("t", NOW, NOW + 120)


def test_answer_without_expire_at_uses_expire_duration_then_five_minutes() -> None:
    with_duration = Credentials("https://a/t", "u", "p", expire_duration=600.0)
    assert token_from_answer({"token": "t"}, with_duration, NOW).expires_at == NOW + 600
    assert token_from_answer({"token": "t", "expireAt": 0}, CREDS, NOW).expires_at == NOW + 300
    assert token_from_answer({"token": "t"}, Credentials("https://a/t", "u", "p", 0.0), NOW).expires_at == NOW + 300


@pytest.mark.parametrize(("answer", "message"), [
    ([], "did not answer a JSON object"),
    ({}, "answered no token"),
    ({"token": ""}, "answered no token"),
    ({"token": 5}, "answered no token"),
    ({"token": "a\nb"}, "control characters"),
    ({"token": "t", "expireAt": "soon"}, "non-numeric expireAt"),
    ({"token": "t", "expireAt": True}, "non-numeric expireAt"),
    ({"token": "t", "expireAt": (NOW - 1) * 1000}, "expired at"),
    # Seconds instead of milliseconds: 1970, so clearly expired (checked against now, not the last fetch).
    ({"token": "t", "expireAt": NOW + 3600}, "expireAt must be Unix milliseconds"),
])
def test_bad_answers_are_refused(answer: Any, message: str) -> None:
    with pytest.raises(TokenError, match=message) as err:
        token_from_answer(answer, CREDS, NOW)
    assert CREDS.password not in str(err.value)
    assert "alice@auth.example.com" in str(err.value)


def test_fresh_until_margin_before_expiry() -> None:
    token = Token("t", NOW, NOW + 600)
    assert token.fresh(NOW + 569)
    assert not token.fresh(NOW + 571)


def test_short_lived_token_is_reused_with_a_smaller_margin() -> None:
    # kinitiras: a token living under 10 s made NewTicker(0) panic.
    token = Token("t", NOW, NOW + 8)
    assert token.fresh(NOW)
    assert token.fresh(NOW + 5.9)
    assert not token.fresh(NOW + 6.1)
    assert not Token("t", NOW, NOW).fresh(NOW)


def test_credentials_hide_the_password() -> None:
    assert CREDS.password not in repr(CREDS)
    assert CREDS.password not in str(CREDS.key)
    assert CREDS.describe() == "alice@auth.example.com"
    assert Credentials("https://a/t", "u", "p1").key != Credentials("https://a/t", "u", "p2").key


def test_stored_token_checked_against_now() -> None:
    assert stored_token("t", None, NOW) == "t"
    assert stored_token("t", "2100-01-01T00:00:00Z", NOW) == "t"
    with pytest.raises(TokenError, match="expired at 2020"):
        stored_token("t", "2020-01-01T00:00:00Z", NOW)
    with pytest.raises(TokenError, match="not an RFC 3339 time"):
        stored_token("t", "tomorrow", NOW)


# ---- cache -------------------------------------------------------------------------------------

async def test_token_is_fetched_once_then_reused_until_near_expiry() -> None:
    clock = Clock()
    endpoint = Endpoint(clock)
    cache = TokenCache(endpoint, clock=clock)
    assert await cache.token(CREDS, 1.0) == "tok-1"
    clock.now += 569
    assert await cache.token(CREDS, 1.0) == "tok-1"
    assert len(endpoint.calls) == 1
    clock.now += 2
    assert await cache.token(CREDS, 1.5) == "tok-2"
    assert [t for _, t in endpoint.calls] == [1.0, 1.5]
    assert cache.fetches == 2


async def test_reject_fetches_a_new_token_once() -> None:
    clock = Clock()
    endpoint = Endpoint(clock)
    cache = TokenCache(endpoint, clock=clock)
    assert await cache.token(CREDS, 1.0) == "tok-1"
    assert await cache.token(CREDS, 1.0, reject="tok-1") == "tok-2"
    # A stale rejection (someone already refreshed) keeps the newer token.
    assert await cache.token(CREDS, 1.0, reject="tok-1") == "tok-2"
    assert len(endpoint.calls) == 2


async def test_concurrent_requests_share_one_fetch() -> None:
    clock = Clock()
    endpoint = Endpoint(clock, delay=0.05)
    cache = TokenCache(endpoint, clock=clock)
    tokens = await asyncio.gather(*(cache.token(CREDS, 1.0) for _ in range(20)))
    assert set(tokens) == {"tok-1"}
    assert len(endpoint.calls) == 1
    other = Credentials(CREDS.auth_url, "bob", "x")
    assert await asyncio.gather(cache.token(other, 1.0), cache.token(CREDS, 1.0)) == ["tok-2", "tok-1"]


async def test_failures_are_not_cached_and_do_not_loop() -> None:
    clock = Clock()
    endpoint = Endpoint(clock)
    endpoint.fail = LookupError("token endpoint for alice@auth.example.com answered 500")
    cache = TokenCache(endpoint, clock=clock)
    for _ in range(2):
        with pytest.raises(LookupError, match="answered 500"):
            await cache.token(CREDS, 1.0)
    await asyncio.sleep(0.05)
    assert len(endpoint.calls) == 2  # one per request; no background retry loop
    endpoint.fail = None
    assert await cache.token(CREDS, 1.0) == "tok-3"


async def test_fetch_timeout_becomes_token_error() -> None:
    clock = Clock()
    endpoint = Endpoint(clock)
    endpoint.fail = TimeoutError()
    cache = TokenCache(endpoint, clock=clock)
    with pytest.raises(TokenError, match=r"alice@auth.example.com: no answer within 0.5 s"):
        await cache.token(CREDS, 0.5)


async def test_a_waiter_giving_up_does_not_cancel_the_shared_fetch() -> None:
    clock = Clock()
    endpoint = Endpoint(clock, delay=0.1)
    cache = TokenCache(endpoint, clock=clock)
    impatient = asyncio.ensure_future(cache.token(CREDS, 1.0))
    patient = asyncio.ensure_future(cache.token(CREDS, 1.0))
    await asyncio.sleep(0.01)
    impatient.cancel()
    assert await patient == "tok-1"
    assert impatient.cancelled()
    assert cache.cached(CREDS) is not None


async def test_forget_and_bounded_size() -> None:
    clock = Clock()
    endpoint = Endpoint(clock)
    cache = TokenCache(endpoint, clock=clock, max_entries=2)
    users = [Credentials("https://a/t", f"u{i}", "p") for i in range(3)]
    for creds in users:
        await cache.token(creds, 1.0)
    assert cache.cached(users[0]) is None
    assert cache.cached(users[2]) is not None
    cache.forget(users[2])
    assert cache.cached(users[2]) is None
