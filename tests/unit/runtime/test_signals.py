"""How `serve` reads its stop signals: SIGTERM asks for a drained stop, SIGINT or a second signal for a prompt one."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator

import pytest

from kinitiras_py.runtime.running import _Signals


@pytest.fixture
async def signals() -> AsyncIterator[_Signals]:
    loop = asyncio.get_running_loop()
    try:
        yield _Signals()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def received(event: asyncio.Event) -> bool:
    """Whether ``event`` is set once the loop has run the signal's handler."""
    for _ in range(100):
        if event.is_set():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_sigterm_stops_with_a_drain_and_a_second_one_cuts_it_short(signals: _Signals) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    assert await received(signals.stop)
    assert not signals.hurry.is_set()
    os.kill(os.getpid(), signal.SIGTERM)
    assert await received(signals.hurry)


async def test_sigint_stops_at_once(signals: _Signals) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    assert await received(signals.stop)
    assert signals.hurry.is_set()
