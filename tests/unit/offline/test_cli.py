"""The offline commands through ``kinitiras_py.cli.main.main``: output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kinitiras_py.cli.main import main
from tests.cli import run
from tests.unit.engine.test_render import EVERY_TEMPLATE

DATA = Path(__file__).resolve().parents[2] / "data"
EXAMPLES = DATA / "examples"
CASES = DATA / "cases"
INVALID = sorted((DATA / "invalid").glob("*.yaml"))


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: team-a
  labels:
    app: web
spec:
  containers:
    - name: app
      image: nginx:1.27
"""

NAMESPACE_LABEL_POLICY = """\
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: team-from-namespace
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: Pod
  overrideRules:
    - targetOperations: [CREATE]
      overriders:
        template:
          type: labels
          operation: add
          path: team
          valueRef:
            from: k8s
            path: /metadata/labels/team
            k8s:
              apiVersion: v1
              kind: Namespace
              name: "{{metadata.namespace}}"
"""

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels:
    team: payments
"""


# -- render -----------------------------------------------------------------------------------------


def test_render_prints_rendered_cel_for_each_templated_rule() -> None:
    code, out, _ = run("render", EXAMPLES / "templates" / "override-anno.yaml")
    assert code == 0
    (policy,) = yaml.safe_load_all(out)
    rules = policy["spec"]["overrideRules"]
    assert len(rules) == 6
    for rule in rules:
        assert '"op": ' in rule["overriders"]["renderedCel"]
    assert "renderedCel: |" in out  # multi-line CEL printed as a readable block


def test_render_validate_policy_sets_rendered_cel_on_the_rule() -> None:
    code, out, _ = run("render", EXAMPLES / "templates" / "validate-multi.yaml")
    assert code == 0
    (policy,) = yaml.safe_load_all(out)
    assert all("cel.bind(d," in rule["renderedCel"] for rule in policy["spec"]["validateRules"])


def test_render_cel_only_names_each_rule() -> None:
    code, out, _ = run("render", "--cel", EXAMPLES / "templates" / "override-labels.yaml")
    assert code == 0
    headers = [line for line in out.splitlines() if line.startswith("// OverridePolicy")]
    assert headers == [f"// OverridePolicy default/override-labels-op-template: "
                       f"spec.overrideRules[{i}].overriders.renderedCel" for i in range(3)]


def test_render_without_templates_prints_the_policy_unchanged() -> None:
    code, out, _ = run("render", EXAMPLES / "addanno-op.yaml")
    assert code == 0
    assert yaml.safe_load(out) == yaml.safe_load((EXAMPLES / "addanno-op.yaml").read_text())


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_render_malformed_policy_exits_2_naming_the_field(path: Path) -> None:
    wanted = path.read_text().splitlines()[0].removeprefix("# must-name: ").strip()
    code, out, err = run("render", path)
    assert code == 2
    assert out == ""
    assert wanted in err and err.startswith("error: invalid policy:")


def test_render_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, err = run("render", tmp_path / "nope.yaml")
    assert code == 2
    assert "nope.yaml" in err


# -- apply ------------------------------------------------------------------------------------------


def test_apply_allowed_mutation_exits_0() -> None:
    case = CASES / "override-resourcesoversell"
    code, out, _ = run("apply", "--policy", EXAMPLES / "templates" / "override-resourcesoversell.yaml",
                       "--resource", case / "deployment.yaml")
    assert code == 0
    result = yaml.safe_load(out)
    assert result["allowed"] is True
    assert result["object"] == yaml.safe_load((case / "expected" / "deployment.yaml").read_text())
    assert {op["op"] for op in result["patch"]} <= {"add", "replace"} and result["patch"]


def test_apply_json_prints_exactly_the_result_keys() -> None:
    code, out, _ = run("apply", "--policy", EXAMPLES / "addanno-op.yaml",
                       "--resource", CASES / "addanno-op" / "pod-annotated.yaml", "-o", "json")
    assert code == 0
    result = json.loads(out)
    # audit findings are always shown (issue 24): the key is there when there are none too
    assert list(result) == ["allowed", "message", "warnings", "audit", "patch", "object"]
    assert result["patch"] == [{"op": "add", "path": "/metadata/annotations/added-by", "value": "op"}]
    assert result["message"] == "" and result["warnings"] == [] and result["audit"] == []


def test_apply_denied_exits_1() -> None:
    case = CASES / "validate-multi"
    code, out, _ = run("apply", "--policy", EXAMPLES / "templates" / "validate-multi.yaml",
                       "--resource", case / "namespaces" / "team-a.yaml", "--operation", "DELETE",
                       "--context", case / "approver.yaml", "-o", "json")
    assert code == 1
    result = json.loads(out)
    assert result["allowed"] is False
    assert result["message"] == "ClusterValidatePolicy test-multi-validate: cannot delete this ns"
    assert result["patch"] == []


def test_apply_delete_with_a_validate_policy() -> None:
    case = CASES / "deletens-cvp"
    args = ("apply", "--policy", case / "test-delete-ns-cel.yaml", "--resource", case / "ns-labelled.yaml")
    code, out, _ = run(*args, "--operation", "DELETE", "-o", "json")
    assert code == 1
    assert "operation rejected" in json.loads(out)["message"]
    code, out, _ = run(*args, "-o", "json")  # CREATE is not a target operation
    assert code == 0 and json.loads(out)["allowed"] is True


def test_apply_http_reference_answered_by_context() -> None:
    case = CASES / "validate-multi"
    args = ("apply", "--policy", EXAMPLES / "templates" / "validate-multi.yaml", "--operation", "DELETE")
    code, out, _ = run(*args, "--resource", case / "namespaces" / "frozen.yaml",
                       "--context", case / "approver.yaml", "-o", "json")
    assert code == 1 and "api reject deletion" in json.loads(out)["message"]
    code, out, _ = run(*args, "--resource", case / "namespaces" / "frozen.yaml", "-o", "json")
    assert code == 1
    assert "no HTTPResponse given in --context for GET" in json.loads(out)["message"]


def test_apply_context_supplies_owner_and_k8s_objects() -> None:
    case = CASES / "override-anno"
    args = ("apply", "--policy", EXAMPLES / "templates" / "override-anno.yaml", "--resource", case / "pod.yaml",
            "--operation", "UPDATE", "--old-resource", case / "pod.yaml", "-o", "json")
    code, out, _ = run(*args, "--context", case / "context.yaml")
    assert code == 0
    annotations = json.loads(out)["object"]["metadata"]["annotations"]
    assert annotations["deployment-name"] == "web" and annotations["deployment-name-2"] == "web"
    code, out, _ = run(*args)  # no context: the owner cannot be found
    assert code == 1
    assert "ReplicaSet default/web-7d9f6 not found" in json.loads(out)["message"]


def test_apply_context_supplies_the_namespace_object(tmp_path: Path) -> None:
    policy = write(tmp_path / "policy.yaml", NAMESPACE_LABEL_POLICY)
    pod = write(tmp_path / "pod.yaml", POD)
    namespace = write(tmp_path / "namespace.yaml", NAMESPACE)
    code, out, _ = run("apply", "--policy", policy, "--resource", pod, "--context", namespace, "-o", "json")
    assert code == 0
    assert json.loads(out)["patch"] == [{"op": "add", "path": "/metadata/labels/team", "value": "payments"}]


def test_apply_yaml_output_by_default() -> None:
    code, out, _ = run("apply", "--policy", EXAMPLES / "addanno-op.yaml",
                       "--resource", CASES / "addanno-op" / "pod-team-a.yaml")
    assert code == 0
    assert yaml.safe_load(out) == {"allowed": True, "message": "", "warnings": [], "audit": [], "patch": [],
                                   "object": yaml.safe_load((CASES / "addanno-op" / "pod-team-a.yaml").read_text())}


def test_apply_missing_file_exits_2(tmp_path: Path) -> None:
    code, out, err = run("apply", "--policy", EXAMPLES / "addanno-op.yaml",
                         "--resource", tmp_path / "missing.yaml")
    assert (code, out) == (2, "")
    assert "missing.yaml" in err and "No such file" in err


def test_apply_bad_yaml_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "kind: Pod\nmetadata: {name: [unclosed\n")
    code, _, err = run("apply", "--policy", EXAMPLES / "addanno-op.yaml", "--resource", bad)
    assert code == 2
    assert "not valid YAML" in err


def test_apply_invalid_policy_exits_2_naming_the_field() -> None:
    code, out, err = run("apply", "--policy", DATA / "invalid" / "bad-operation.yaml",
                         "--resource", CASES / "addanno-op" / "pod-bare.yaml")
    assert (code, out) == (2, "")
    assert "spec.overrideRules[0].overriders.plaintext[0].op" in err


def test_apply_update_without_old_resource_exits_2() -> None:
    code, _, err = run("apply", "--policy", EXAMPLES / "templates" / "override-labels.yaml",
                       "--resource", CASES / "override-labels" / "pod.yaml", "--operation", "UPDATE")
    assert code == 2
    assert "--old-resource" in err


def test_apply_resource_that_is_not_an_object_exits_2(tmp_path: Path) -> None:
    resource = write(tmp_path / "r.yaml", "metadata: {name: x}\n")
    code, _, err = run("apply", "--policy", EXAMPLES / "addanno-op.yaml", "--resource", resource)
    assert code == 2
    assert "not a Kubernetes object (no apiVersion)" in err


def test_apply_unknown_operation_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["apply", "--policy", "p.yaml", "--resource", "r.yaml", "--operation", "PATCH"])
    assert exc.value.code == 2
    capsys.readouterr()


# -- test -------------------------------------------------------------------------------------------


def _case_dir(root: Path, expected_label: str) -> Path:
    root.mkdir()
    write(root / "pod.yaml", POD)
    write(root / "expected.yaml", POD.replace("    app: web\n", f"    app: web\n    team: {expected_label}\n"))
    write(root / "namespace.yaml", NAMESPACE)
    write(root / "policy.yaml", NAMESPACE_LABEL_POLICY)
    write(root / "kinitiras-test.yaml", """\
name: team label
policies: [policy.yaml]
context: [namespace.yaml]
cases:
  - name: the team label comes from the namespace
    resource: pod.yaml
    expect:
      allowed: true
      object: expected.yaml
""")
    return root


def test_test_command_passes(tmp_path: Path) -> None:
    code, out, _ = run("test", _case_dir(tmp_path / "ok", "payments"))
    assert code == 0
    assert out.splitlines()[-1] == "1 passed, 0 failed"


def test_test_command_prints_a_unified_diff_on_failure(tmp_path: Path) -> None:
    code, out, _ = run("test", _case_dir(tmp_path / "bad", "search"))
    assert code == 1
    lines = [line.strip() for line in out.splitlines()]
    assert any(line.startswith("FAIL") and "the team label comes from the namespace" in line for line in lines)
    assert "--- expected (expected.yaml)" in lines and "+++ got" in lines
    assert any(line.startswith("-") and line.endswith(" team: search") for line in lines)
    assert any(line.startswith("+") and line.endswith(" team: payments") for line in lines)
    assert any(line.startswith("@@") for line in lines)
    assert lines[-1] == "0 passed, 1 failed"


def test_test_command_on_a_missing_dir_exits_2(tmp_path: Path) -> None:
    code, _, err = run("test", tmp_path / "none")
    assert code == 2
    assert "no such file or directory" in err


def test_test_command_runs_the_acceptance_cases() -> None:
    code, out, _ = run("test", CASES / "override-tolerations")
    assert code == 0
    assert out.splitlines()[-1].endswith("passed, 0 failed")


def test_rendered_cel_is_byte_identical_across_processes(tmp_path: Path) -> None:
    # Set iteration order changes with the hash seed; the rendered text must not.
    policies = [{"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
                 "metadata": {"name": f"p{i}"},
                 "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                          "overrideRules": [{"overriders": {"template": {**t, "operation": op}}}
                                            for op in ("add", "replace", "remove")]}}
                for i, t in enumerate(EVERY_TEMPLATE)]
    path = tmp_path / "policies.yaml"
    path.write_text(yaml.safe_dump_all(policies))
    outputs = set()
    for seed in ("0", "1", "12345"):
        proc = subprocess.run([sys.executable, "-m", "kinitiras_py", "render", "--cel", str(path)],
                              capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        outputs.add(proc.stdout)
    assert len(outputs) == 1
    assert next(iter(outputs)).count(b"renderedCel") == 3 * len(EVERY_TEMPLATE)


# -- YAML kubectl reads, YAML kubectl reads back (issue 10, items 6 and 7) ---------------------------

README = Path(__file__).resolve().parents[3] / "README.md"


def _readme_cel() -> str:
    """The CEL of the README's `cel` overrider example."""
    text = README.read_text()
    block = text[text.index("```yaml\ncel: >"):]
    return str(yaml.safe_load(block[len("```yaml\n"):block.index("```", 3)])["cel"])


@pytest.mark.parametrize(("labels", "expected"), [
    (None, {"team": "team-a"}),
    ({"app": "web"}, {"app": "web", "team": "team-a"}),  # the existing labels stay
    ({"app": "web", "team": "core"}, {"app": "web", "team": "core"}),
])
def test_the_readme_cel_example_adds_team_and_keeps_other_labels(
        tmp_path: Path, labels: dict[str, str] | None,
        expected: dict[str, str]) -> None:
    policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
              "metadata": {"name": "team", "namespace": "team-a"},
              "spec": {"overrideRules": [{"overriders": {"cel": _readme_cel()}}]}}
    pod = yaml.safe_load(POD)
    pod["metadata"].pop("labels")
    if labels is not None:
        pod["metadata"]["labels"] = labels
    code, out, err = run("apply", "--policy", write(tmp_path / "p.yaml", json.dumps(policy)),
                         "--resource", write(tmp_path / "pod.yaml", json.dumps(pod)), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["object"]["metadata"]["labels"] == expected


KEYS_POD = POD.replace("    app: web\n", "    app: web\n    off: a\n    1: b\n    2024-01-01: c\n    y: d\n")


def test_apply_reads_non_string_keys_as_kubectl_does(tmp_path: Path) -> None:
    code, out, err = run("apply", "--policy", write(tmp_path / "p.yaml", NAMESPACE_LABEL_POLICY),
                         "--resource", write(tmp_path / "pod.yaml", KEYS_POD),
                         "--context", write(tmp_path / "ns.yaml", NAMESPACE), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["object"]["metadata"]["labels"] == {
        "app": "web", "false": "a", "1": "b", "2024-01-01": "c", "true": "d", "team": "payments"}


@pytest.mark.parametrize(("text", "where"), [
    ("    ~: a\n", "pod.yaml:8:5: a mapping key must be a string"),
    ("    app2: !!binary aGVsbG8=\n", "pod.yaml:8:11: !!binary values"),
    ("    deep: " + "[" * 3000 + "]" * 3000 + "\n", "pod.yaml:8:"),
])
def test_apply_refuses_yaml_json_cannot_hold_with_file_and_place(
        tmp_path: Path, text: str, where: str) -> None:
    pod = write(tmp_path / "pod.yaml", POD.replace("    app: web\n", "    app: web\n" + text))
    code, out, err = run("apply", "--policy", write(tmp_path / "p.yaml", NAMESPACE_LABEL_POLICY),
                         "--resource", pod)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {pod.parent}/{where}"), err


def test_render_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(NAMESPACE_LABEL_POLICY.replace("team-from", "t\xe9am-from").encode("latin-1"))
    code, _, err = run("render", path)
    assert code == 2
    assert "p.yaml: not UTF-8 text" in err


AMBIGUOUS_VALUES = ["y", "n", "Y", "N", "1e3", "0o12", "off", "2024-01-01", "1:20", ".inf"]


def test_render_output_reads_back_identically(tmp_path: Path) -> None:
    """Strings YAML 1.1 readers (kubectl) or 1.2 readers take for booleans or numbers are quoted."""
    policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
              "metadata": {"name": "y", "labels": {v: v for v in AMBIGUOUS_VALUES if v != ".inf"}},
              "spec": {"overrideRules": [{"overriders": {
                  "plaintext": [{"op": "add", "path": f"/metadata/annotations/k{i}", "value": v}
                                for i, v in enumerate(AMBIGUOUS_VALUES)],
                  "template": {"type": "annotations", "operation": "add", "path": "a",
                               "value": {"string": "y"}}}}]}}
    code, out, err = run("render", write(tmp_path / "p.yaml", json.dumps(policy)))
    assert code == 0, err
    for value in AMBIGUOUS_VALUES:
        assert f": {value}\n" not in out
    (again,) = yaml.safe_load_all(out)
    assert again["spec"]["overrideRules"][0]["overriders"]["plaintext"] == \
        policy["spec"]["overrideRules"][0]["overriders"]["plaintext"]  # type: ignore[index]
    assert again["metadata"] == policy["metadata"]
    code, out2, _ = run("render", write(tmp_path / "again.yaml", out))
    assert (code, out2) == (0, out)  # our own reader (kubectl's rules) reads it back the same


def test_an_internal_error_exits_3_in_one_line_never_1(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kinitiras_py.offline import apply

    def broken(*_args: object, **_kwargs: object) -> None:
        raise TypeError("Dict key must be str")

    monkeypatch.setattr(apply, "run_batch", broken)
    code, out, err = run("apply", "--policy", write(tmp_path / "p.yaml", NAMESPACE_LABEL_POLICY),
                         "--resource", write(tmp_path / "pod.yaml", POD))
    assert (code, out) == (3, "")
    assert err == "error: internal error, please report it with the input: TypeError: Dict key must be str\n"


@pytest.mark.parametrize(("context", "reason"), [
    ("kind: HTTPResponse\nurl: https://x.example/\nparams: [1, 2]\n", "params must be a mapping"),
    ("kind: HTTPResponse\nurl: https://x.example/\nheader: {a: [1]}\n", "header must be a mapping"),
    ("kind: HTTPResponse\nurl: 5\n", "url must be a string"),
    ("kind: Namespace\nmetadata: 5\n", "not a Kubernetes object"),
])
def test_apply_refuses_malformed_context_documents(tmp_path: Path,
                                                   context: str, reason: str) -> None:
    code, out, err = run("apply", "--policy", write(tmp_path / "p.yaml", NAMESPACE_LABEL_POLICY),
                         "--resource", write(tmp_path / "pod.yaml", POD),
                         "--context", write(tmp_path / "c.yaml", context))
    assert (code, out) == (2, "")
    assert err.startswith("error: context document 1 (") and reason in err, err
