"""``kinitiras-py test`` that cannot pass by accident (issue 24): unknown keys and cases without an
expectation are refused, naming the file and the key; cases assert rule results, audit findings
and the patch; outcomes are written as JUnit XML and JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli import run
from tests.unit.offline.test_apply_many import GOOD, LATEST, POLICIES, UNLABELLED


def suite(tmp_path: Path, test_file: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "policies.yaml").write_text(POLICIES)
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "latest.yaml").write_text(LATEST)
    (tmp_path / "bare.yaml").write_text(UNLABELLED)
    (tmp_path / "kinitiras-test.yaml").write_text(test_file)
    return tmp_path


def one_case(expect: str, resource: str = "latest.yaml") -> str:
    return f"policies: [policies.yaml]\ncases:\n  - name: c\n    resource: {resource}\n    expect:\n{expect}"


@pytest.mark.parametrize(("text", "message"), [
    ("polices: [policies.yaml]\ncases: [{resource: good.yaml, expect: {allowed: true}}]\n",
     "kinitiras-test.yaml: unknown key 'polices' (known: cases, context, description, name, policies)"),
    (one_case("      allowed: true\n      alowed: false\n"),
     "kinitiras-test.yaml: cases[0].expect: unknown key 'alowed'"),
    ("policies: [policies.yaml]\ncases:\n  - name: nothing asserted\n    resource: good.yaml\n",
     "kinitiras-test.yaml: cases[0]: expect must be a mapping of what the case asserts"),
    (one_case("      {}\n"), "cases[0].expect: a case must assert something"),
    (one_case("      rules: [{policy: pods, rule: 0, result: failed}]\n"),
     "cases[0].expect.rules[0].result must be one of pass, fail, warn, error, skip, not 'failed'"),
    (one_case("      rules: [{policy: pods, rul: 0, result: fail}]\n"), "cases[0].expect.rules[0]: unknown key 'rul'"),
    (one_case("      rules: [{rule: 0, result: fail}]\n"), "cases[0].expect.rules[0].policy is required"),
    (one_case("      warnings: '1'\n"), "cases[0].expect.warnings must be a number"),
    (one_case("      allowed: 'yes'\n"), "cases[0].expect.allowed must be true or false"),
    (one_case("      audit: [1]\n"), "cases[0].expect.audit must be a number or a list of texts"),
])
def test_a_file_that_could_pass_by_accident_is_refused(tmp_path: Path, text: str, message: str) -> None:
    code, out, _ = run("test", suite(tmp_path, text))
    assert code == 1
    assert "FAIL" in out and "(test file)" in out
    assert message in out


PASSING = one_case("""\
      allowed: true
      patched: true
      audit: [no latest tag]
      warnings: 1
      rules:
        - {policy: pods, rule: 0, result: fail, message: latest}
        - {policy: pods, kind: ClusterValidatePolicy, rule: 1, result: pass}
        - {policy: pods, rule: 2, result: warn}
        - {policy: stamp, result: pass}
""") + """\
  - name: denied
    resource: bare.yaml
    expect:
      allowed: false
      audit: 0
      patched: false
      rules: [{policy: pods, rule: 1, result: fail}, {policy: pods, rule: 2, result: skip}]
"""


def test_cases_assert_rule_results_audit_findings_and_the_patch(tmp_path: Path) -> None:
    code, out, _ = run("test", suite(tmp_path, PASSING))
    assert code == 0, out
    assert out.splitlines()[-1] == "2 passed, 0 failed"


@pytest.mark.parametrize(("change", "problem"), [
    (("rule: 0, result: fail", "rule: 0, result: pass"), "rules: policy pods rule 0: expected pass, got fail"),
    (("rule: 2, result: warn", "rule: 3, result: warn"),
     "rules: policy pods rule 3: expected warn, but the rule did not match the object"),
    (("message: latest", "message: labels"), "message expected to contain 'labels', got 'no latest tag'"),
    (("audit: [no latest tag]", "audit: [labels]"), "audit: expected findings containing ['labels']"),
    (("audit: 0", "audit: 1"), "audit: expected 1 findings, got []"),
    (("patched: true", "patched: false"), "patched: expected False"),
    (("kind: ClusterValidatePolicy", "kind: ValidatePolicy"), "rules: ValidatePolicy pods rule 1"),
])
def test_each_new_assertion_can_fail(tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    assert change[0] in PASSING
    code, out, _ = run("test", suite(tmp_path, PASSING.replace(change[0], change[1])))
    assert code == 1
    assert problem in out


def test_junit_and_json_outputs(tmp_path: Path) -> None:
    broken = PASSING.replace("rule: 0, result: fail", "rule: 0, result: pass")
    folder = suite(tmp_path / "s", broken)
    (tmp_path / "t" / "bad").mkdir(parents=True)
    (tmp_path / "t" / "bad" / "kinitiras-test.yaml").write_text("polices: []\ncases: []\n")
    code, out, _ = run("test", tmp_path, "--junit", tmp_path / "junit.xml", "--json", tmp_path / "out.json")
    assert code == 1 and "0 failed" not in out
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "3", "1", "1")
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert cases["c"].get("classname") == str(folder / "kinitiras-test.yaml")
    failure = cases["c"].find("failure")
    assert failure is not None and "expected pass, got fail" in (failure.text or "")
    assert cases["denied"].find("failure") is None and cases["denied"].find("error") is None
    assert cases["(test file)"].find("error") is not None
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["totals"] == {"cases": 3, "passed": 1, "failed": 1, "errors": 1}
    by_name = {case["name"]: case for case in report["cases"]}
    assert by_name["denied"]["result"] == "pass" and by_name["c"]["result"] == "fail"
    assert by_name["(test file)"]["result"] == "error"
    assert {(r["policy"]["name"], r["rule"], r["result"]) for r in by_name["denied"]["rules"]} >= {
        ("pods", 1, "fail"), ("pods", 2, "skip")}


def test_junit_on_stdout_moves_the_text_to_stderr(tmp_path: Path) -> None:
    code, out, err = run("test", suite(tmp_path, PASSING), "--junit", "-")
    assert code == 0
    assert ET.fromstring(out).get("tests") == "2"
    assert err.splitlines()[-1] == "2 passed, 0 failed"
    code, _, err = run("test", tmp_path, "--junit", "-", "--json", "-")
    assert code == 2 and "would both write on stdout" in err


def test_docs_testing_md_documents_every_key_and_result() -> None:
    from kinitiras_py.admission.results import COUNTERS, RESULTS
    from kinitiras_py.offline import testcases

    text = (Path(__file__).resolve().parents[3] / "docs" / "testing.md").read_text()
    keys = testcases.FILE_KEYS | testcases.CASE_KEYS | testcases.EXPECT_KEYS | testcases.RULE_KEYS
    assert not [key for key in sorted(keys) if f"{key}:" not in text]
    assert not [word for word in (*RESULTS, *COUNTERS) if f"`{word}`" not in text]
    assert "--junit FILE" in text and "--json FILE" in text and "--results FILE" in text
