"""The outcomes of ``kinitiras-py test`` as JUnit XML (for CI systems) and as JSON.

JUnit: one ``testsuite`` per test file, one ``testcase`` per case (``classname`` the file,
``name`` the case); a case whose expectations do not hold has a ``failure``, one that could not
run as written (a file unreadable, an input refused) an ``error``; the text is the problems, one
per line. The JSON holds the same, with each case's rule results (docs/testing.md).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from kinitiras_py.offline.testcases import Outcome


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    broken = sum(o.broken for o in outcomes)
    failed = sum(bool(o.problems) and not o.broken for o in outcomes)
    return {"tests": len(outcomes), "failures": failed, "errors": broken}


def junit_xml(outcomes: Sequence[Outcome]) -> str:
    """The outcomes as a JUnit XML document."""
    root = ET.Element("testsuites", {"name": "kinitiras-py test",
                                     **{k: str(v) for k, v in _counts(outcomes).items()}})
    files: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        files.setdefault(str(outcome.file), []).append(outcome)
    for file, cases in files.items():
        suite = ET.SubElement(root, "testsuite", {"name": file, **{k: str(v) for k, v in _counts(cases).items()}})
        for outcome in cases:
            case = ET.SubElement(suite, "testcase", {"classname": file, "name": outcome.name})
            if outcome.problems:
                text = "\n".join(outcome.problems)
                problem = ET.SubElement(case, "error" if outcome.broken else "failure",
                                        {"message": outcome.problems[0].splitlines()[0]})
                problem.text = text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def to_json(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The outcomes as JSON: every case, whether it passed, its problems and its rule results."""
    counts = _counts(outcomes)
    return {
        "cases": [{"file": str(o.file), "name": o.name,
                   "result": "error" if o.broken else "fail" if o.problems else "pass",
                   "problems": o.problems, "rules": [r.to_json() for r in o.rules]} for o in outcomes],
        "totals": {"cases": counts["tests"], "passed": counts["tests"] - counts["failures"] - counts["errors"],
                   "failed": counts["failures"], "errors": counts["errors"]},
    }
