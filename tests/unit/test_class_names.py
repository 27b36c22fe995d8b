"""Class names that once meant two things (issue 21) name one class each in the package, so a
reader and a traceback never have to ask which ``Request`` or ``Policy`` is meant."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import kinitiras_py

ROOT = Path(kinitiras_py.__file__).resolve().parent
ONCE = ("OverrideRule", "ValidateRule", "Policy", "Request", "Store")


def _defined() -> dict[str, list[str]]:
    """Each top-level class name in the package, with the modules that define it."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(ROOT)))
    return where


def test_the_once_colliding_names_are_defined_at_most_once() -> None:
    where = _defined()
    assert {name: where[name] for name in ONCE if len(where[name]) > 1} == {}


def test_the_scan_sees_every_module() -> None:
    assert _defined()["HttpCall"] == ["refs/httpblock.py"]
