"""``kinitiras-py test DIR``: declarative test cases, with a readable diff on failure.

A directory holds ``kinitiras-test.yaml`` files (searched recursively); docs/testing.md documents
every key with an example. Every key is checked when the file is read: an unknown key (a typo
such as ``polices:``) and a case that asserts nothing are refused, naming the file and the key,
so that no case passes by accident.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinitiras_py.admission.pipeline import Decision
from kinitiras_py.admission.results import RESULTS, RuleResult
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.offline import apply, loader
from kinitiras_py.offline.dumper import dump_yaml
from kinitiras_py.offline.policyfiles import load_policies
from kinitiras_py.refs.egress import Egress

TEST_FILE = "kinitiras-test.yaml"
FILE_KEYS = frozenset({"name", "description", "policies", "context", "cases"})
CASE_KEYS = frozenset({"name", "description", "resource", "operation", "oldResource", "policies", "context",
                       "expect"})
EXPECT_KEYS = frozenset({"allowed", "object", "patched", "message", "warnings", "audit", "rules", "error"})
RULE_KEYS = frozenset({"policy", "kind", "namespace", "rule", "result", "message"})


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
    rules: list[RuleResult] = field(default_factory=list)
    """The result of every rule that matched the case's object."""
    broken: bool = False
    """The case could not run as written (a file unreadable, an input refused): an error, not a failure."""


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


def _unknown(given: dict[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(given) - known, key=str)
    if unknown:
        raise loader.InputError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(map(repr, unknown))} (known: {', '.join(sorted(known))})")


def _check_type(expect: dict[str, Any], key: str, kinds: tuple[type, ...], what: str, where: str) -> None:
    value = expect.get(key)
    # bool is an int to Python, never a count here
    if key in expect and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
        raise loader.InputError(f"{where}.{key} must be {what}")


def _check_expect(expect: dict[str, Any], where: str) -> None:
    """Refuse an expectation with unknown keys, values of the wrong type, or nothing to assert."""
    _unknown(expect, EXPECT_KEYS, where)
    if not expect:
        raise loader.InputError(f"{where}: a case must assert something (one of {', '.join(sorted(EXPECT_KEYS))})")
    for key, kinds, what in (("allowed", (bool,), "true or false"), ("patched", (bool,), "true or false"),
                             ("object", (str,), "a file name"), ("message", (str,), "text"),
                             ("error", (str,), "text"), ("warnings", (int,), "a number"),
                             ("audit", (int, list), "a number or a list of texts"),
                             ("rules", (list,), "a list of mappings")):
        _check_type(expect, key, kinds, what, where)
    if isinstance(expect.get("audit"), list) and not all(isinstance(text, str) for text in expect["audit"]):
        raise loader.InputError(f"{where}.audit must be a number or a list of texts")
    for i, rule in enumerate(expect.get("rules") or []):
        at = f"{where}.rules[{i}]"
        if not isinstance(rule, dict):
            raise loader.InputError(f"{at} must be a mapping")
        _unknown(rule, RULE_KEYS, at)
        for key in ("policy", "result"):
            if not isinstance(rule.get(key), str):
                raise loader.InputError(f"{at}.{key} is required (text)")
        for key, kinds, what in (("rule", (int,), "a rule index"), ("kind", (str,), "text"),
                                 ("namespace", (str,), "text"), ("message", (str,), "text")):
            _check_type(rule, key, kinds, what, at)
        if rule["result"] not in RESULTS:
            raise loader.InputError(f"{at}.result must be one of {', '.join(RESULTS)}, not {rule['result']!r}")


def load_file(path: Path) -> list[CaseSpec]:
    """Parse one test file into its cases; InputError on a malformed file (naming the file and the key)."""
    spec = loader.load_one(path)
    _unknown(spec, FILE_KEYS, str(path))
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
        _unknown(case, CASE_KEYS, where)
        if not isinstance(case.get("resource"), str):
            raise loader.InputError(f"{where}: resource (a file name) is required")
        expect = case.get("expect")
        if not isinstance(expect, dict):
            raise loader.InputError(f"{where}: expect must be a mapping of what the case asserts")
        _check_expect(expect, f"{where}.expect")
        out.append(CaseSpec(
            file=path, name=str(case.get("name") or f"case {i}"), description=str(case.get("description") or ""),
            policies=_files(case["policies"], here, f"{where}.policies") if "policies" in case else policies,
            context=_files(case["context"], here, f"{where}.context") if "context" in case else context,
            resource=here / case["resource"], operation=str(case.get("operation") or "CREATE"),
            old_resource=here / case["oldResource"] if case.get("oldResource") else None, expect=expect,
        ))
    return out


def _rule_problems(expected: list[dict[str, Any]], got: list[RuleResult]) -> list[str]:
    problems = []
    for want in expected:
        found = [r for r in got if r.policy.name == want["policy"] and r.rule == want.get("rule", 0)
                 and want.get("kind", r.policy.kind) == r.policy.kind
                 and want.get("namespace", r.policy.namespace) == r.policy.namespace]
        named = f"rules: {want.get('kind', 'policy')} {want['policy']} rule {want.get('rule', 0)}"
        if not found:
            problems.append(f"{named}: expected {want['result']}, but the rule did not match the object")
        elif found[0].result != want["result"]:
            problems.append(f"{named}: expected {want['result']}, got {found[0].result} ({found[0].message})")
        elif "message" in want and want["message"] not in found[0].message:
            problems.append(f"{named}: message expected to contain {want['message']!r}, got {found[0].message!r}")
    return problems


def _audit_problems(expected: int | list[str], audit: list[str]) -> list[str]:
    if isinstance(expected, int):
        return [] if len(audit) == expected else [f"audit: expected {expected} findings, got {audit}"]
    if len(audit) != len(expected) or not all(want in got for want, got in zip(expected, audit, strict=False)):
        return [f"audit: expected findings containing {expected} (in order), got {audit}"]
    return []


def check(spec: CaseSpec, decision: Decision, rules: list[RuleResult] | None = None) -> list[str]:
    """What differs between ``decision`` (and the ``rules`` results) and the case's expectations
    (empty when it passed)."""
    expect, problems = spec.expect, []
    if "error" in expect:
        problems.append(f"error: expected the case to fail with {expect['error']!r}, but it ran "
                        f"(allowed={decision.allowed}, message={decision.message!r})")
    if "allowed" in expect and decision.allowed != expect["allowed"]:
        problems.append(f"allowed: expected {expect['allowed']}, got {decision.allowed} ({decision.message})")
    if "patched" in expect and bool(decision.patch) != expect["patched"]:
        problems.append(f"patched: expected {expect['patched']}, got the patch {decision.patch}")
    if "message" in expect and expect["message"] not in decision.message:
        problems.append(f"message: expected to contain {expect['message']!r}, got {decision.message!r}")
    if "warnings" in expect and len(decision.warnings) != expect["warnings"]:
        problems.append(f"warnings: expected {expect['warnings']}, got {decision.warnings}")
    if "audit" in expect:
        problems += _audit_problems(expect["audit"], decision.audit)
    if "rules" in expect:
        problems += _rule_problems(expect["rules"], rules or [])
    if "object" in expect:
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
        result = apply.evaluate(spec.load(egress)).objects[0]
    except loader.InputError as e:
        wanted = spec.expect.get("error")
        if wanted is not None and str(wanted) in str(e):
            return Outcome(spec.file, spec.name, [])
        if wanted is not None:
            return Outcome(spec.file, spec.name, [f"error: expected one containing {wanted!r}, got: {e}"])
        return Outcome(spec.file, spec.name, [f"cannot run: {e}"], broken=True)
    return Outcome(spec.file, spec.name, check(spec, result.decision, result.rules), result.decision, result.rules)


def run_file(path: Path, egress: Egress | None = None) -> list[Outcome]:
    """Run every case of one test file (http references within ``egress``); a malformed file is one
    failed outcome."""
    try:
        specs = load_file(path)
    except loader.InputError as e:
        return [Outcome(path, "(test file)", [f"cannot read: {e}"], broken=True)]
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
