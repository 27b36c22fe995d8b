"""The alert rules of config/monitoring/prometheusrule.yaml pass `promtool check rules`, and
`promtool test rules` with tests/data/monitoring/alerts-test.yaml, which fires every alert.

promtool comes from Debian's ``prometheus`` package (``make install``); without it these tests
fail rather than skip, so CI cannot pass them by not running them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
RULE = ROOT / "config" / "monitoring" / "prometheusrule.yaml"
CASES = ROOT / "tests" / "data" / "monitoring" / "alerts-test.yaml"


def promtool() -> str:
    """The path of promtool; fails the test when it is not installed."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: `apt-get install -y prometheus` (make install does it)")
    return found


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a plain Prometheus rules file."""
    rule = yaml.safe_load(RULE.read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    spec: dict[str, Any] = rule["spec"]
    return spec


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    """A directory holding rules.yaml (the spec) and a copy of the promtool test cases."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    shutil.copy(CASES, tmp_path / CASES.name)
    return tmp_path


def test_promtool_checks_the_rules(rules_dir: Path) -> None:
    checked = run("check", "rules", "rules.yaml", cwd=rules_dir)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = [r for g in rule_groups()["groups"] for r in g["rules"] if "alert" in r]
    assert f"SUCCESS: {len(alerts)} rules found" in checked.stdout


def test_promtool_unit_tests_of_the_alerts_pass(rules_dir: Path) -> None:
    tested = run("test", "rules", CASES.name, cwd=rules_dir)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_case_where_it_fires_and_one_where_it_does_not() -> None:
    cases = [case for test in yaml.safe_load(CASES.read_text())["tests"] for case in test["alert_rule_test"]]
    alerts = {r["alert"] for g in rule_groups()["groups"] for r in g["rules"] if "alert" in r}
    assert {c["alertname"] for c in cases if c["exp_alerts"]} == alerts
    assert {c["alertname"] for c in cases if not c["exp_alerts"]} == alerts


def test_every_alert_has_a_severity_and_says_what_to_do() -> None:
    for group in rule_groups()["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
            assert {"summary", "description"} <= rule["annotations"].keys(), rule["alert"]
