"""The e2e benchmark times each set-up from a quiet machine (``e2e.quiet_machine``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kinitiras_py.bench import e2e


class Clock:
    """A fake clock that the fake sleep advances, and CPU counters read from a script of shares."""

    def __init__(self, shares: list[float]) -> None:
        self.now = 0.0
        self.busy = self.total = 0.0
        self._shares: Iterator[float] = iter(shares)

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        share = next(self._shares, 0.0)
        self.busy += 100 * share
        self.total += 100

    def cpu_times(self) -> tuple[float, float]:
        return self.busy, self.total


def _install(monkeypatch: pytest.MonkeyPatch, shares: list[float]) -> Clock:
    clock = Clock(shares)
    monkeypatch.setattr(e2e.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(e2e.asyncio, "sleep", clock.sleep)
    monkeypatch.setattr(e2e, "_cpu_times", clock.cpu_times)
    return clock


async def test_waits_until_the_cpus_have_been_quiet_for_two_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Busy for 3 s, one quiet half second, busy again, then quiet for good.
    _install(monkeypatch, [0.9] * 6 + [0.1] + [0.8] + [0.05] * 20)
    waited, busy = await e2e.quiet_machine(below=0.25, seconds=2.0, timeout=60.0)
    # Quiet from 4.0 s on: the first quiet half second ends at 4.5, two seconds later at 6.5.
    assert waited == pytest.approx(6.5)
    assert busy == pytest.approx(0.05)


async def test_gives_up_after_the_timeout_on_a_machine_that_stays_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, [0.9] * 100)
    waited, busy = await e2e.quiet_machine(below=0.25, seconds=2.0, timeout=5.0)
    assert waited == pytest.approx(5.0)
    assert busy == pytest.approx(0.9)
