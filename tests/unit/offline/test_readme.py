"""The README's commands: the first two are the demo and the tests, and every offline one it shows
runs as written (from the repository root) with the exit code it says."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.cli import run

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
OFFLINE = ("render", "apply", "test", "convert")


def shell_commands() -> list[str]:
    """Every command of the README's ``sh`` blocks, continuation lines joined, in order."""
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README, flags=re.S):
        commands += [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return commands


def offline_commands() -> list[str]:
    return [c for c in shell_commands() if c.startswith("kinitiras-py ") and c.split()[1] in OFFLINE]


def test_the_first_two_commands_bring_up_the_demo_and_run_the_tests() -> None:
    first, second = (c.split("#")[0].strip() for c in shell_commands()[:2])
    assert (first, second) == ("make demo", "make test")


def test_the_readme_shows_the_offline_commands_of_a_first_policy() -> None:
    shown = {c.split("#")[0].split()[1] for c in offline_commands()}
    assert set(OFFLINE) <= shown


@pytest.mark.parametrize("command", offline_commands())
def test_each_offline_command_runs_as_written(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    line, _, comment = command.partition("#")
    expected = int(m.group(1)) if (m := re.search(r"exit (\d)\b", comment)) and "if refused" not in comment else 0
    monkeypatch.chdir(ROOT)
    code, out, err = run(*shlex.split(line)[1:])
    assert code == expected, f"{line}: exit {code}\n{err}"
    assert out and "Traceback" not in err


def test_the_table_of_contents_points_at_headings() -> None:
    headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^## (.+)$", README, re.M)}
    contents = README[README.index("## Contents"):README.index("## Quick start")]
    anchors = re.findall(r"\]\(#([^)]+)\)", contents)
    assert anchors and all(a in headings for a in anchors), set(anchors) - headings
    linked = re.findall(r"\]\((docs/[^)#]+|config/[^)#]+)", README)
    assert linked and all((ROOT / path).exists() for path in linked), linked
