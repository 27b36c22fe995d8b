"""docs/templates/sidecar.md: its policy is the example policy, and its before/after is what
``apply`` gives."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kinitiras_py.offline import apply
from kinitiras_py.offline.loader import load_documents

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "templates" / "sidecar.md"


def _blocks() -> list[dict]:
    text = DOC.read_text().split("## Before and after", 1)[1]
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)[:3]]


def test_the_documented_policy_is_the_example() -> None:
    policy, _, _ = _blocks()
    [example] = load_documents(ROOT / "tests" / "data" / "examples" / "extended" / "override-sidecar.yaml")
    assert policy == example


def test_before_and_after_are_what_apply_gives() -> None:
    policy, before, after = _blocks()
    decision = apply.run(apply.Case(policies=[policy], resource=before))
    assert decision.allowed, decision.message
    assert decision.object == after
