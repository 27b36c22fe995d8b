"""Command-line input the machine or the flags refuse: one line on stderr, exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinitiras_py.cli.main import main


def test_a_path_the_machine_refuses_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["crds", "--write", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kinitiras-py crds: ") and str(blocker) in err and "Traceback" not in err


@pytest.mark.parametrize(("flag", "value"), [
    ("--port", "99999"), ("--port", "-1"), ("--port", "http"),
    ("--deadline", "nan"), ("--deadline", "-1"), ("--deadline", "inf"), ("--deadline", "0"),
    ("--cert-check-interval", "inf"), ("--cert-check-interval", "-5"), ("--cert-poll-interval", "nan"),
    ("--cel-results-mib", "nan"), ("--cel-results-mib", "-1"), ("--cel-results-mib", "lots"),
    ("--mutation-results-mib", "inf"), ("--mutation-results-mib", "-0.5"), ("--mutation-results-mib", "1e999"),
    ("--drain-seconds", "-1"), ("--drain-seconds", "nan"), ("--drain-seconds", "1e9"), ("--drain-seconds", "soon"),
])
def test_serve_refuses_flags_that_cannot_work(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["serve"], ["bench", "--e2e", "--pods", "2"], ["bench", "--memory"]])
def test_a_kubeconfig_that_says_nothing_usable_is_one_line(argv: list[str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: 5\n")
    assert main([*argv, "--kubeconfig", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"kinitiras-py {argv[0]}: {bad}: clusters must be a list" in err and "Traceback" not in err
