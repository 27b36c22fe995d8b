"""docs/templates.md is generated from the acceptance cases and must match them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_template_docs", ROOT / "hack" / "gen-template-docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_templates_doc_is_current() -> None:
    gen = _generator()
    expected = gen.generate()
    current = (ROOT / "docs" / "templates.md").read_text()
    assert current == expected, "docs/templates.md is stale: run python3 hack/gen-template-docs.py"


def test_templates_doc_covers_every_type() -> None:
    text = (ROOT / "docs" / "templates.md").read_text()
    for title in ("annotations", "labels", "resources", "resourcesOversell", "tolerations", "affinity",
                  "condition", "origin", "plaintext", "Differences from kinitiras"):
        assert f"\n## {title}\n" in text
