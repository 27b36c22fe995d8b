"""When a Lease held by someone else runs out, as a candidate judges it (no API server needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kinitiras_py.cluster import leader
from kinitiras_py.cluster.leader import CLOCK_TOLERANCE, LeaderElector

WALL = 1_800_000_000.0  # the candidate's wall clock
MONO = 500.0  # and its monotonic clock, at the same instant


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def candidate(monkeypatch: pytest.MonkeyPatch) -> LeaderElector:
    monkeypatch.setattr(leader.time, "time", lambda: WALL)
    return LeaderElector(object(), "ns", "lease", "me", lease_duration=15, renew_deadline=10, retry_period=2,
                         clock=lambda: MONO)


@pytest.mark.parametrize(("age", "expires_in"), [
    (0.0, 15.0),
    (0.5, 14.5),  # renewed half a second before we saw it: it runs out 15 s after the renewal
    (2 * 1.2 + CLOCK_TOLERANCE - 0.01, 15.0 - 2 * 1.2 - CLOCK_TOLERANCE + 0.01),  # a poll late, tolerance
    (-0.5, 15.0),  # the holder's clock is a little ahead: never later than client-go, never earlier
    (2 * 1.2 + CLOCK_TOLERANCE + 0.1, 15.0),  # older than a poll allows: the clocks disagree, or the
    (60.0, 15.0),  # lease was stale when we first saw it; either way count from now, as client-go does
    (-CLOCK_TOLERANCE - 0.1, 15.0),
])
def test_a_renewal_that_agrees_with_our_clock_counts_from_the_renewal(candidate: LeaderElector, age: float,
                                                                       expires_in: float) -> None:
    spec = {"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": stamp(WALL - age)}
    assert candidate._expiry(spec) == pytest.approx(MONO + expires_in)


@pytest.mark.parametrize("renew_time", [None, "", "yesterday", 12])
def test_without_a_readable_renewal_the_lease_runs_from_now(candidate: LeaderElector, renew_time: object) -> None:
    spec = {"holderIdentity": "other", "leaseDurationSeconds": 7, "renewTime": renew_time}
    assert candidate._expiry(spec) == MONO + 7


def test_the_duration_written_on_the_lease_wins(candidate: LeaderElector) -> None:
    spec = {"holderIdentity": "other", "leaseDurationSeconds": 40, "renewTime": stamp(WALL - 1)}
    assert candidate._expiry(spec) == pytest.approx(MONO + 39)
    assert candidate._expiry({"holderIdentity": "other"}) == MONO + 15  # no duration: ours
