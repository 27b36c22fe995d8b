"""The package's public names, and the README's example of using the engine from Python."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import kinitiras_py

ROOT = Path(__file__).resolve().parents[2]


def test_all_is_deliberate_and_every_name_resolves() -> None:
    assert kinitiras_py.__all__ == ["Decision", "Engine", "ObjectResult", "PolicyErrors", "Request", "RuleResult",
                                    "__version__"]
    from kinitiras_py.admission.engine import Engine
    from kinitiras_py.base.errors import PolicyErrors

    assert kinitiras_py.Engine is Engine and kinitiras_py.PolicyErrors is PolicyErrors
    for name in kinitiras_py.__all__:
        assert getattr(kinitiras_py, name) is not None
        assert name in dir(kinitiras_py)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        kinitiras_py.Pipeline  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert "Pipeline" in str(e)
    else:
        raise AssertionError("kinitiras_py.Pipeline is not public")


def test_importing_the_package_imports_no_engine() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, kinitiras_py; "
                          "print(sorted(m for m in sys.modules if m.startswith('kinitiras_py.')))"],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "[]"


def readme_example() -> tuple[str, list[str]]:
    """The Python block of the README's "Using the engine from Python", and the output its
    comments show (lines starting ``# `` right after a ``print``)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using the engine from Python", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the section has no python block"
    code = found.group(1)
    shown = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    return code, shown


def test_the_readme_example_runs_and_prints_what_it_shows() -> None:
    code, shown = readme_example()
    assert shown, "the example shows its output"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == shown
