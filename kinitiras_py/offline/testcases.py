"""``kinitiras-py test DIR``: declarative test cases, with a readable diff on failure.

A directory holds ``kinitiras-test.yaml`` files (searched recursively), each::

    name: oversell deployments
    description: free text            # optional, for people (and generated docs)
    policies: [policy.yaml]            # files relative to the test file
    context: [namespace.yaml]          # optional: objects for k8s/owner refs, HTTPResponse docs
    cases:
      - name: two containers are oversold
        description: free text         # optional
        resource: deployment.yaml
        operation: CREATE              # default CREATE
        oldResource: old.yaml          # UPDATE only
        policies: [other.yaml]         # optional: replaces the file's policies for this case
        context: [owner.yaml]          # optional: replaces the file's context for this case
        expect:
          allowed: true
          object: expected.yaml        # optional: the whole final object
          message: cannot delete       # optional: a substring of the denial message
          warnings: 1                  # optional: how many warnings
          error: not supported         # optional: the case must fail to run (e.g. a refused
                                       # policy) with an error containing this text

Unknown keys under ``expect`` are reported as problems, so a typo cannot make a case pass.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinitiras_py.admission.pipeline import Decision
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.offline import apply, loader
from kinitiras_py.offline.dumper import dump_yaml
from kinitiras_py.offline.policyfiles import load_policies
from kinitiras_py.refs.egress import Egress

TEST_FILE = "kinitiras-test.yaml"
EXPECT_KEYS = frozenset({"allowed", "object", "message", "warnings", "error"})
CASE_KEYS = frozenset({"name", "description", "resource", "operation", "oldResource", "policies", "context",
                       "expect"})


@dataclass
class CaseSpec:
    """One case of a test file, with every file name resolved against the test file's folder."""

    file: Path
    name: str
    description: str
    policies: list[Path]
    context: list[Path]
    resource: Path
    operation: str = "CREATE"
    old_resource: Path | None = None
    expect: dict[str, Any] = field(default_factory=dict)

    def load(self, egress: Egress | None = None) -> apply.Case:
        """Read every file the case names; InputError when one is missing or malformed. ``egress``
        is the http setting the case runs under (default: the webhook's default)."""
        return apply.Case(
            policies=[d for f in self.policies for d in load_policies(f)],
            resource=loader.load_one(self.resource),
            old_resource=loader.load_one(self.old_resource) if self.old_resource else None,
            operation=self.operation,
            context=[d for f in self.context for d in loader.load_documents(f)],
            egress=egress if egress is not None else Egress(),
        )


@dataclass
class Outcome:
    """One case's result; ``problems`` is empty when it passed."""

    file: Path
    name: str
    problems: list[str]
    decision: Decision | None = None


def _dump(obj: Obj) -> list[str]:
    return dump_yaml(obj, sort_keys=True).splitlines(keepends=True)


def _files(value: object, here: Path, what: str) -> list[Path]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise loader.InputError(f"{what} must be a list of file names")
    return [here / v for v in value]


def load_file(path: Path) -> list[CaseSpec]:
    """Parse one test file into its cases; InputError on a malformed file."""
    spec = loader.load_one(path)
    here = path.parent
    policies = _files(spec.get("policies"), here, f"{path}: policies")
    context = _files(spec.get("context"), here, f"{path}: context")
    cases = spec.get("cases")
    if not isinstance(cases, list) or not cases:
        raise loader.InputError(f"{path}: cases must be a non-empty list")
    out = []
    for i, case in enumerate(cases):
        where = f"{path}: cases[{i}]"
        if not isinstance(case, dict):
            raise loader.InputError(f"{where} must be a mapping")
        unknown = sorted(set(case) - CASE_KEYS)
        if unknown:
            raise loader.InputError(f"{where}: unknown keys {', '.join(unknown)}")
        if not isinstance(case.get("resource"), str):
            raise loader.InputError(f"{where}: resource (a file name) is required")
        expect = case.get("expect") or {}
        if not isinstance(expect, dict):
            raise loader.InputError(f"{where}: expect must be a mapping")
        out.append(CaseSpec(
            file=path, name=str(case.get("name") or f"case {i}"), description=str(case.get("description") or ""),
            policies=_files(case["policies"], here, f"{where}.policies") if "policies" in case else policies,
            context=_files(case["context"], here, f"{where}.context") if "context" in case else context,
            resource=here / case["resource"], operation=str(case.get("operation") or "CREATE"),
            old_resource=here / case["oldResource"] if case.get("oldResource") else None, expect=expect,
        ))
    return out


def check(spec: CaseSpec, decision: Decision) -> list[str]:
    """What differs between ``decision`` and the case's expectations (empty when it passed)."""
    expect, problems = spec.expect, []
    unknown = sorted(set(expect) - EXPECT_KEYS)
    if unknown:
        problems.append(f"expect: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(EXPECT_KEYS))})")
    if "error" in expect:
        problems.append(f"error: expected the case to fail with {expect['error']!r}, but it ran "
                        f"(allowed={decision.allowed}, message={decision.message!r})")
    if "allowed" in expect and decision.allowed != bool(expect["allowed"]):
        problems.append(f"allowed: expected {expect['allowed']}, got {decision.allowed} ({decision.message})")
    if expect.get("message") and str(expect["message"]) not in decision.message:
        problems.append(f"message: expected to contain {expect['message']!r}, got {decision.message!r}")
    if "warnings" in expect and len(decision.warnings) != int(expect["warnings"]):
        problems.append(f"warnings: expected {expect['warnings']}, got {decision.warnings}")
    if expect.get("object"):
        want_file = spec.file.parent / str(expect["object"])
        try:
            want = loader.load_one(want_file)
        except loader.InputError as e:
            return [*problems, f"object: cannot read the expected object: {e}"]
        if want != decision.object:
            diff = "".join(difflib.unified_diff(_dump(want), _dump(decision.object),
                                                f"expected ({want_file.name})", "got"))
            problems.append("object differs:\n" + diff.rstrip("\n"))
    return problems


def run_case(spec: CaseSpec, egress: Egress | None = None) -> Outcome:
    """Run one case (http references within ``egress``) and compare it with its expectations."""
    try:
        decision = apply.run(spec.load(egress))
    except loader.InputError as e:
        wanted = spec.expect.get("error")
        if wanted is not None and str(wanted) in str(e):
            return Outcome(spec.file, spec.name, [])
        if wanted is not None:
            return Outcome(spec.file, spec.name, [f"error: expected one containing {wanted!r}, got: {e}"])
        return Outcome(spec.file, spec.name, [f"cannot run: {e}"])
    return Outcome(spec.file, spec.name, check(spec, decision), decision)


def run_file(path: Path, egress: Egress | None = None) -> list[Outcome]:
    """Run every case of one test file (http references within ``egress``); a malformed file is one
    failed outcome."""
    try:
        specs = load_file(path)
    except loader.InputError as e:
        return [Outcome(path, "(test file)", [f"cannot read: {e}"])]
    return [run_case(spec, egress) for spec in specs]


def find_files(directory: Path) -> list[Path]:
    """The test files under ``directory`` (recursively, in path order), or ``directory`` if it is a file."""
    if not directory.exists():
        raise loader.InputError(f"{directory}: no such file or directory")
    files = sorted(directory.rglob(TEST_FILE)) if directory.is_dir() else [directory]
    if not files:
        raise loader.InputError(f"no {TEST_FILE} under {directory}")
    return files


def run_dir(directory: Path, egress: Egress | None = None) -> list[Outcome]:
    """Run every test file under ``directory`` (recursively), in path order, http references
    within ``egress``."""
    return [o for f in find_files(directory) for o in run_file(f, egress)]
