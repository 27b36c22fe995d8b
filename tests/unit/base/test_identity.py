"""by_identity: remembered by the argument's identity, never by an equal stand-in."""

from __future__ import annotations

from kinitiras_py.base.identity import by_identity


def test_a_result_is_remembered_for_the_same_object_only() -> None:
    built: list[tuple[int, ...]] = []

    @by_identity(8)
    def total(key: tuple[int, ...]) -> int:
        built.append(key)
        return sum(key)

    key = tuple(range(5))
    assert total(key) == 10 and total(key) == 10
    assert len(built) == 1
    equal = tuple(list(key))  # equal, but another object: built again, not mistaken for it
    assert equal is not key and total(equal) == 10
    assert len(built) == 2


def test_entries_are_forgotten_when_full() -> None:
    built: list[object] = []

    @by_identity(2)
    def same(key: object) -> object:
        built.append(key)
        return key

    keys = [object() for _ in range(3)]
    for key in keys:
        assert same(key) is key
    assert same(keys[2]) is keys[2] and len(built) == 3  # the newest stays after the clear
    assert same(keys[0]) is keys[0] and len(built) == 4
