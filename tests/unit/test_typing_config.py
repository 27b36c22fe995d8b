"""mypy's configuration: the engine and the request path are checked with ``--strict``'s flags.

``strict = true`` is not a per-module option, so pyproject.toml lists the flags of ``--strict``
that are; this pins that every one of them stays on for ``engine`` and ``admission``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STRICT_PER_MODULE = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                     "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
                     "disallow_untyped_decorators", "warn_unused_ignores", "warn_return_any", "no_implicit_reexport",
                     "strict_equality", "extra_checks")
"""``mypy --strict``'s flags (``mypy --help`` lists them) that may be set per module; the other one,
warn_redundant_casts, is global and on."""


def strict_modules(config: dict[str, Any]) -> set[str]:
    """The module patterns of mypy's overrides that turn on every flag of :data:`STRICT_PER_MODULE`."""
    found: set[str] = set()
    for override in config.get("tool", {}).get("mypy", {}).get("overrides", []):
        if all(override.get(flag) is True for flag in STRICT_PER_MODULE):
            modules = override.get("module", [])
            found.update([modules] if isinstance(modules, str) else modules)
    return found


def test_the_engine_and_admission_are_checked_strictly() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert {"kinitiras_py.engine.*", "kinitiras_py.admission.*"} <= strict_modules(config)
    assert config["tool"]["mypy"]["warn_redundant_casts"] is True


def test_an_override_missing_a_flag_is_not_strict() -> None:
    flags = dict.fromkeys(STRICT_PER_MODULE, True)
    whole = {"tool": {"mypy": {"overrides": [{"module": "a.*", **flags}]}}}
    assert strict_modules(whole) == {"a.*"}
    flags["warn_return_any"] = False
    assert strict_modules({"tool": {"mypy": {"overrides": [{"module": ["a.*"], **flags}]}}}) == set()
