"""The garbage-collector policy: what is settled leaves the full collections' walk, and only in a
process that manages it; full collections are timed."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from kinitiras_py.base import collector


@pytest.fixture
def managed() -> Iterator[None]:
    collector.manage(True)
    try:
        yield
    finally:
        collector.manage(False)


class Node:
    """A tracked object (instances of a class are)."""


def test_settle_freezes_what_lives_and_manage_off_unfreezes_it(managed: None) -> None:
    long_lived = [Node() for _ in range(1000)]
    assert collector.settle("test") == gc.get_freeze_count() >= len(long_lived)
    walked = {id(obj) for obj in gc.get_objects()}
    assert not walked & {id(obj) for obj in long_lived}  # out of every generation the collector walks
    collector.manage(False)
    assert gc.get_freeze_count() == 0 and not collector.managed()
    assert {id(obj) for obj in long_lived} <= {id(obj) for obj in gc.get_objects()}


def test_settle_leaves_the_collector_alone_unless_the_process_manages_it() -> None:
    assert not collector.managed()
    assert collector.settle("a library user") == 0 and gc.get_freeze_count() == 0


def test_settle_collects_young_cycles_before_freezing(managed: None) -> None:
    garbage = Node()
    garbage.me = garbage  # type: ignore[attr-defined]  # a cycle: only a collection frees it
    gone = weakref.ref(garbage)
    del garbage
    collector.settle("test")
    assert gone() is None  # collected, not frozen for ever


def test_pauses_times_every_collection_with_its_generation_while_installed() -> None:
    seen: list[tuple[int, float]] = []
    with collector.Pauses(lambda generation, took: seen.append((generation, took))):
        gc.collect(0)
        gc.collect(1)
        gc.collect()
    gc.collect()  # no longer timed
    explicit = [generation for generation, _took in seen]
    # A young collection may also be triggered by an allocation in between: the three asked for are there, in order.
    assert [g for g in explicit if g == collector.FULL] == [collector.FULL] and explicit[-1] == collector.FULL
    assert 0 in explicit and 1 in explicit and explicit.index(0) < explicit.index(1)
    assert all(took >= 0 for _generation, took in seen)


@pytest.mark.usefixtures(managed.__name__)
async def test_later_settles_a_burst_of_changes_once_after_its_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    settled: list[str] = []
    settle = collector.settle
    monkeypatch.setattr(collector, "settle", lambda reason: settled.append(reason) or settle(reason))
    later = collector.Later(delay=0.05)
    policies = []
    for _ in range(100):  # a watch's list: one change after another
        policies.append(Node())
        later.soon("policy changes")
    assert settled == []  # not on every change
    await asyncio.sleep(0.2)
    assert settled == ["policy changes"]
    walked = {id(obj) for obj in gc.get_objects()}
    assert not walked & {id(one) for one in policies}
    later.soon("a policy changed")  # a later change settles again
    later.cancel()  # unless the process stops first
    await asyncio.sleep(0.1)
    assert settled == ["policy changes"]
