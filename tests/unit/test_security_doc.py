"""docs/security.md names, for each limit, the test that proves it: every name must be a test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_cited_test_exists() -> None:
    cited = CITED.findall((ROOT / "docs" / "security.md").read_text())
    assert len(cited) > 30
    missing = [f"{path}::{name}" for path, name in cited
               if not (ROOT / path).is_file()
               or not re.search(rf"^(?:async )?def {name}\(", (ROOT / path).read_text(), re.M)]
    assert missing == []
