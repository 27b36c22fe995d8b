"""The one watchdog for every request's deadline (webhook/deadlines.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kinitiras_py.webhook.deadlines import Deadlines


async def test_work_past_its_deadline_ends_in_a_timeout_within_one_tick() -> None:
    deadlines = Deadlines(0.2, tick=0.02)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await deadlines.run(asyncio.sleep(5))
    assert 0.2 <= time.monotonic() - started < 0.2 + 0.02 + 0.1  # the tick, and a loop's slack


async def test_work_within_its_deadline_returns_its_result() -> None:
    deadlines = Deadlines(1.0, tick=0.01)

    async def answer() -> str:
        await asyncio.sleep(0.05)
        return "done"

    assert await deadlines.run(answer()) == "done"


async def test_only_the_late_requests_time_out() -> None:
    deadlines = Deadlines(0.15, tick=0.01)

    async def request(seconds: float) -> str:
        try:
            await deadlines.run(asyncio.sleep(seconds))
        except TimeoutError:
            return "late"
        return "in time"

    outcomes = await asyncio.gather(request(0.01), request(5), request(0.05), request(5))
    assert outcomes == ["in time", "late", "in time", "late"]


async def test_a_cancellation_that_is_not_the_deadlines_goes_through() -> None:
    # The server stopping cancels the handlers' tasks: that must stay a cancellation, not an answer.
    deadlines = Deadlines(5.0, tick=0.01)
    task = asyncio.create_task(deadlines.run(asyncio.sleep(5)))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_besides_the_deadline_is_not_taken_for_it() -> None:
    deadlines = Deadlines(0.0, tick=60)  # past its deadline at once; checked only when told
    task = asyncio.create_task(deadlines.run(asyncio.sleep(5)))
    await asyncio.sleep(0)  # the task is in flight
    deadlines._check(asyncio.get_running_loop())  # the deadline cancels it...
    task.cancel()  # ...and so does someone else, before it runs again
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_nested_timeout_inside_the_work_does_not_swallow_the_deadline() -> None:
    # The pipeline's lookups run under their own asyncio.timeout, longer than what is left.
    deadlines = Deadlines(0.1, tick=0.01)

    async def lookup() -> None:
        async with asyncio.timeout(5):
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        await deadlines.run(lookup())
    assert not deadlines._running and not deadlines._expired


async def test_the_watchdog_sleeps_when_no_request_is_in_flight() -> None:
    deadlines = Deadlines(1.0, tick=0.01)
    await deadlines.run(asyncio.sleep(0))
    assert deadlines._armed  # checks until it has seen the dict empty
    await asyncio.sleep(0.05)
    assert not deadlines._armed and not deadlines._running


def test_the_tick_is_at_most_a_tenth_of_the_deadline() -> None:
    assert Deadlines(2.5).tick == 0.05
    assert Deadlines(0.2).tick == pytest.approx(0.02)
