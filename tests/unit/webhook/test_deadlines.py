"""The one watchdog for every request's deadline (webhook/deadlines.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kinitiras_py.webhook.deadlines import Deadlines


async def test_work_past_its_deadline_ends_in_a_timeout_within_one_tick() -> None:
    deadlines = Deadlines(tick=0.02)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await deadlines.run(asyncio.sleep(5), 0.2)
    assert 0.2 <= time.monotonic() - started < 0.2 + 0.02 + 0.1  # the tick, and a loop's slack


async def test_work_within_its_deadline_returns_its_result() -> None:
    deadlines = Deadlines(tick=0.01)

    async def answer() -> str:
        await asyncio.sleep(0.05)
        return "done"

    assert await deadlines.run(answer(), 1.0) == "done"


async def test_only_the_late_requests_time_out() -> None:
    deadlines = Deadlines(tick=0.01)

    async def request(seconds: float) -> str:
        try:
            await deadlines.run(asyncio.sleep(seconds), 0.15)
        except TimeoutError:
            return "late"
        return "in time"

    outcomes = await asyncio.gather(request(0.01), request(5), request(0.05), request(5))
    assert outcomes == ["in time", "late", "in time", "late"]


async def test_a_cancellation_that_is_not_the_deadlines_goes_through() -> None:
    # The server stopping cancels the handlers' tasks: that must stay a cancellation, not an answer.
    deadlines = Deadlines(tick=0.01)
    task = asyncio.create_task(deadlines.run(asyncio.sleep(5), 5.0))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_besides_the_deadline_is_not_taken_for_it() -> None:
    deadlines = Deadlines(tick=60)  # checked only when told
    task = asyncio.create_task(deadlines.run(asyncio.sleep(5), 0.0))  # past its deadline at once
    await asyncio.sleep(0)  # the task is in flight
    deadlines._check(asyncio.get_running_loop())  # the deadline cancels it...
    task.cancel()  # ...and so does someone else, before it runs again
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_nested_timeout_inside_the_work_does_not_swallow_the_deadline() -> None:
    # The pipeline's lookups run under their own asyncio.timeout, longer than what is left.
    deadlines = Deadlines(tick=0.01)

    async def lookup() -> None:
        async with asyncio.timeout(5):
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        await deadlines.run(lookup(), 0.1)
    assert not deadlines._running and not deadlines._expired


async def test_the_watchdog_sleeps_when_no_request_is_in_flight() -> None:
    deadlines = Deadlines(tick=0.01)
    await deadlines.run(asyncio.sleep(0), 1.0)
    assert deadlines._interval is not None  # checks until it has seen the dict empty
    await asyncio.sleep(0.05)
    assert deadlines._interval is None and not deadlines._running


async def test_checks_come_every_tenth_of_the_shortest_deadline_in_flight_at_most_every_50_ms() -> None:
    deadlines = Deadlines()
    slow = asyncio.create_task(deadlines.run(asyncio.sleep(5), 2.5))
    await asyncio.sleep(0)
    assert deadlines._interval == 0.05
    with pytest.raises(TimeoutError):
        await deadlines.run(asyncio.sleep(5), 0.2)  # a shorter deadline: checks every 20 ms from then on
    assert deadlines._interval == pytest.approx(0.02)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
