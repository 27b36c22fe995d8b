"""``kinitiras-py test DIR``: declarative test cases, with a readable diff on failure.

A directory holds ``kinitiras-test.yaml`` files, each::

    name: oversell deployments
    policies: [policy.yaml]            # files relative to the test file
    context: [namespace.yaml]          # optional: objects for k8s/owner refs, HTTPResponse docs
    cases:
      - name: two containers are oversold
        resource: deployment.yaml
        operation: CREATE              # default CREATE
        oldResource: old.yaml          # UPDATE only
        expect:
          allowed: true
          object: expected.yaml        # optional: the whole final object
          message: cannot delete       # optional: a substring of the denial message
          warnings: 1                  # optional: how many warnings
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.offline import apply, loader

TEST_FILE = "kinitiras-test.yaml"


@dataclass
class Outcome:
    """One case's result; ``problems`` is empty when it passed."""

    file: Path
    name: str
    problems: list[str]


def _dump(obj: Obj) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=True).splitlines(keepends=True)


def run_file(path: Path) -> list[Outcome]:
    """Run every case of one test file."""
    spec = loader.load_one(path)
    here = path.parent
    policies = [d for f in spec.get("policies") or [] for d in loader.load_documents(here / f)]
    context = [d for f in spec.get("context") or [] for d in loader.load_documents(here / f)]
    outcomes = []
    for i, case in enumerate(spec.get("cases") or []):
        name = str(case.get("name") or f"case {i}")
        problems: list[str] = []
        try:
            old = loader.load_one(here / case["oldResource"]) if case.get("oldResource") else None
            decision = apply.run(apply.Case(policies, loader.load_one(here / case["resource"]), old,
                                            str(case.get("operation") or "CREATE"), context))
        except (loader.InputError, KeyError) as e:
            outcomes.append(Outcome(path, name, [f"cannot run: {e}"]))
            continue
        expect = case.get("expect") or {}
        if "allowed" in expect and decision.allowed != bool(expect["allowed"]):
            problems.append(f"allowed: expected {expect['allowed']}, got {decision.allowed} ({decision.message})")
        if expect.get("message") and str(expect["message"]) not in decision.message:
            problems.append(f"message: expected to contain {expect['message']!r}, got {decision.message!r}")
        if "warnings" in expect and len(decision.warnings) != int(expect["warnings"]):
            problems.append(f"warnings: expected {expect['warnings']}, got {decision.warnings}")
        if expect.get("object"):
            want = loader.load_one(here / expect["object"])
            if want != decision.object:
                diff = "".join(difflib.unified_diff(_dump(want), _dump(decision.object), "expected", "got"))
                problems.append("object differs:\n" + diff)
        outcomes.append(Outcome(path, name, problems))
    return outcomes


def run_dir(directory: Path) -> list[Outcome]:
    """Run every test file under ``directory`` (recursively), in path order."""
    files = sorted(directory.rglob(TEST_FILE)) if directory.is_dir() else [directory]
    if not files:
        raise loader.InputError(f"no {TEST_FILE} under {directory}")
    return [o for f in files for o in run_file(f)]
