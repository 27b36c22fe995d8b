"""``--http-allow`` and ``--http-namespaced`` on the offline commands and ``serve``: the same verdict
as the webhook's, exit 2 for a refused policy or bad flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run

POLICY = """\
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: team-label, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders:
      template:
        type: labels
        operation: add
        path: team
        valueRef: {from: http, path: body.team, http: {url: "URL"}}
"""
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: billing, namespace: team-a}\n"
ANSWER = "kind: HTTPResponse\nurl: URL\nbody: {team: blue}\n"
ALLOW = ("--http-namespaced", "--http-allow", "https://cmdb.example.com/api/")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    def write(name: str, text: str, url: str = "https://cmdb.example.com/api/team") -> Path:
        path = tmp_path / name
        path.write_text(text.replace("URL", url))
        return path

    return {"policy": write("policy.yaml", POLICY), "cm": write("cm.yaml", CONFIGMAP),
            "answer": write("answer.yaml", ANSWER),
            "metadata": write("metadata.yaml", POLICY, "http://169.254.169.254/latest/meta-data/"),
            "metadata-answer": write("metadata-answer.yaml", ANSWER, "http://169.254.169.254/latest/meta-data/")}


def apply(files: dict[str, Path], policy: str, answer: str, *flags: str) -> tuple[int, str, str]:
    return run("apply", "--policy", files[policy], "--resource", files["cm"], "--context", files[answer], *flags)


def test_apply_refuses_a_namespaced_http_reference_by_default(files: dict[str, Path]) -> None:
    code, out, err = apply(files, "policy", "answer")
    assert (code, out) == (2, "")
    assert err == ("error: invalid policy:\n  policy OverridePolicy team-a/team-label: "
                   "spec.overrideRules[0].overriders.template.valueRef.http.url: https://cmdb.example.com/api/team "
                   "is refused: http references are off for namespaced policies; the operator allows them with "
                   "--http-namespaced and --http-allow PREFIX\n")


def test_apply_with_the_setting_answers_from_the_context(files: dict[str, Path]) -> None:
    code, out, err = apply(files, "policy", "answer", *ALLOW)
    assert code == 0, err
    assert "team: blue" in out


def test_apply_refuses_the_metadata_endpoint_even_with_the_setting(files: dict[str, Path]) -> None:
    code, _, err = apply(files, "metadata", "metadata-answer", *ALLOW)
    assert code == 2
    assert "http://169.254.169.254/latest/meta-data/ is refused: it is under no allowed prefix " \
           "(https://cmdb.example.com/api/)" in err


def test_render_holds_policies_to_the_setting(files: dict[str, Path]) -> None:
    code, _, err = run("render", files["policy"])
    assert code == 2 and "http references are off for namespaced policies" in err
    code, out, err = run("render", files["policy"], *ALLOW)
    assert code == 0, err
    assert "renderedCel" in out


def test_test_command_runs_cases_under_the_setting(files: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "kinitiras-test.yaml").write_text("""\
name: team label
policies: [policy.yaml]
context: [answer.yaml]
cases:
  - name: labelled
    resource: cm.yaml
    expect: {allowed: true}
""")
    code, out, _ = run("test", tmp_path)
    assert code == 1 and "http references are off for namespaced policies" in out
    code, out, _ = run("test", tmp_path, *ALLOW)
    assert code == 0, out
    assert "1 passed, 0 failed" in out


@pytest.mark.parametrize("command", ["apply", "render", "test", "serve"])
def test_namespaced_without_a_prefix_is_a_usage_error(files: dict[str, Path], command: str) -> None:
    args = {"apply": ["--policy", files["policy"], "--resource", files["cm"]], "render": [files["policy"]],
            "test": [files["policy"].parent], "serve": []}[command]
    code, out, err = run(command, *args, "--http-namespaced")
    assert (code, out) == (2, "")
    assert err == ("error: --http-namespaced needs at least one --http-allow PREFIX: namespaced policies may "
                   "only call allowed prefixes\n")


@pytest.mark.parametrize(("prefix", "problem"), [
    ("cmdb.example.com", "is not an absolute http or https URL"),
    ("https://user@cmdb.example.com/", "a prefix has no user info, query or fragment"),
    ("http://2130706433/", "legacy notation"),
])
def test_a_bad_prefix_is_a_usage_error(files: dict[str, Path], prefix: str, problem: str) -> None:
    for command in (["render", files["policy"]], ["serve"]):
        code, _, err = run(*command, "--http-allow", prefix, usage_exit=True)
        assert code == 2
        assert "--http-allow" in err and problem in err
