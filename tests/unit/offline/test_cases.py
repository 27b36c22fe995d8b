"""Every acceptance case under tests/data/cases runs through ``offline.testcases`` and passes.

Cases that express a corrected behaviour the engine does not have yet are listed in
``ENGINE_GAPS`` and marked xfail(strict): once the engine is fixed they pass and the marker
must go, so the list cannot go stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kinitiras_py.offline import testcases

CASES = Path(__file__).resolve().parents[2] / "data" / "cases"

ENGINE_GAPS: dict[tuple[str, str], str] = {}


def _specs() -> list[testcases.CaseSpec]:
    return [spec for f in testcases.find_files(CASES) for spec in testcases.load_file(f)]


def _param(spec: testcases.CaseSpec) -> object:
    key = (spec.file.parent.name, spec.name)
    marks = [pytest.mark.xfail(reason=ENGINE_GAPS[key], strict=True)] if key in ENGINE_GAPS else []
    return pytest.param(spec, id=f"{key[0]}: {key[1]}", marks=marks)


@pytest.mark.parametrize("spec", [_param(s) for s in _specs()])
def test_case(spec: testcases.CaseSpec) -> None:
    outcome = testcases.run_case(spec)
    assert not outcome.problems, f"{spec.file}: {spec.name}\n" + "\n".join(outcome.problems)


def test_run_dir_reports_every_case() -> None:
    outcomes = testcases.run_dir(CASES)
    assert len(outcomes) == len(_specs())
    failing = {(o.file.parent.name, o.name) for o in outcomes if o.problems}
    assert failing <= set(ENGINE_GAPS), "\n\n".join(
        f"{o.file}: {o.name}\n" + "\n".join(o.problems) for o in outcomes
        if o.problems and (o.file.parent.name, o.name) not in ENGINE_GAPS)


def test_every_kinitiras_example_has_a_case_dir() -> None:
    examples = {"addanno-cop", "addanno-op", "deletens-cvp", "override-affinity", "override-anno",
                "override-labels", "override-resources", "override-resourcesoversell", "override-tolerations",
                "validate-multi", "validate-pab"}
    assert examples <= {p.parent.name for p in testcases.find_files(CASES)}
