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


POD_POLICY = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: deep}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules: [{overriders: %s}]
"""
POD = "{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}, spec: {containers: [{name: c}]}}"


def test_apply_with_a_path_deeper_than_objects_nest_is_refused_or_denied_never_an_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    deep = "/metadata/annotations" + "/a" * 251
    (tmp_path / "plaintext.yaml").write_text(POD_POLICY % f"{{plaintext: [{{op: add, path: {deep}, value: x}}]}}")
    cel = f"[{{'op': 'add', 'value': 'x', 'path': '{deep}/a/a/a/a/a/a/a/a/' + object.metadata.name}}]"
    (tmp_path / "cel.yaml").write_text(POD_POLICY % f'{{cel: "{cel}"}}')
    args = ["apply", "--resource", str(tmp_path / "pod.yaml"), "--policy"]
    assert main([*args, str(tmp_path / "plaintext.yaml")]) == 2  # it exited 3, orjson refusing the result
    assert ("spec.overrideRules[0].overriders.plaintext[0].path: the path has 253 segments; no object may nest "
            "deeper than 200 levels") in capsys.readouterr().err
    assert main([*args, str(tmp_path / "cel.yaml")]) == 1  # computed per object: the rule fails
    assert "the path has 262 segments" in capsys.readouterr().out
