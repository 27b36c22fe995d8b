"""The byte-bounded map behind the caches of results (base/bounded.py)."""

from __future__ import annotations

from kinitiras_py.base.bounded import Bounded, Cache


def test_the_oldest_entries_leave_until_a_new_one_fits() -> None:
    kept: Bounded[str, int] = Bounded(100)
    assert kept.put("a", 1, 40) and kept.put("b", 2, 40)
    assert kept.put("c", 3, 50)  # 130 bytes: "a" leaves
    assert "a" not in kept and kept.get("b") == 2 and kept.get("c") == 3
    assert kept.size == 90 and len(kept) == 2


def test_a_refreshed_entry_is_the_newest_and_a_plain_look_up_changes_nothing() -> None:
    kept: Bounded[str, int] = Bounded(100)
    kept.put("a", 1, 40)
    kept.put("b", 2, 40)
    assert kept.get("a") == 1  # not refreshed: still the oldest
    kept.put("c", 3, 30)
    assert "a" not in kept and "b" in kept
    assert kept.get("b", refresh=True) == 2
    kept.put("d", 4, 40)  # "c" is now the oldest
    assert "c" not in kept and kept.get("b") == 2 and kept.get("d") == 4


def test_too_large_or_present_entries_change_nothing() -> None:
    kept: Bounded[str, int] = Bounded(100)
    kept.put("a", 1, 60)
    assert not kept.put("huge", 2, 101)
    assert not kept.put("a", 3, 10)
    assert kept.get("a") == 1 and kept.size == 60 and "huge" not in kept
    assert kept.get("missing") is None and kept.get("missing", refresh=True) is None


def test_a_cache_configured_anew_forgets_its_entries_and_counters() -> None:
    cache: Cache[str, int] = Cache(100)
    cache._entries.put("a", 1, 50)
    cache.hits, cache.misses = 3, 4
    assert cache.enabled and cache.size == 50 and len(cache) == 1
    cache.configure(0)
    assert not cache.enabled and cache.size == 0 and len(cache) == 0 and cache.hits == cache.misses == 0
    assert cache.max_bytes == 0


def test_a_discarded_entry_gives_back_its_bytes() -> None:
    kept: Bounded[str, int] = Bounded(100)
    kept.put("a", 1, 40)
    kept.put("b", 2, 50)
    kept.discard("a")
    kept.discard("missing")
    assert ("a" in kept, kept.get("b"), kept.size, len(kept)) == (False, 2, 50, 1)
    assert kept.put("c", 3, 50)  # fits without pushing "b" out
    assert ("b" in kept, kept.size) == (True, 100)


def test_a_cache_keeps_no_entry_over_its_entry_bound_and_replaces_only_when_told() -> None:
    cache: Cache[str, int] = Cache(100, max_entry_bytes=30)
    cache.keep("big", 1, 31)
    cache.keep("a", 1, 30)
    cache.keep("a", 2, 10)
    assert ("big" in cache._entries, cache._entries.get("a"), cache.size) == (False, 1, 30)
    cache.keep("a", 3, 10, replace=True)
    assert (cache._entries.get("a"), cache.size, len(cache)) == (3, 10, 1)
