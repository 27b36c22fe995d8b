"""``apply`` on many objects (issue 24): files, directories, multi-document YAML and repeated
``--resource``; repeated single-valued options refused; per-rule results, summary and JSON;
audit findings shown; the exit code of the worst object; ``--old-resource`` paired by identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli import run

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

POLICIES = """\
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata:
  name: pods
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: Pod
  validateRules:
    - targetOperations: [CREATE, UPDATE]
      cel: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
      message: no latest tag
      validationActions: [Audit]
    - targetOperations: [CREATE, UPDATE]
      cel: "has(object.metadata.labels)"
      message: labels are required
      validationActions: [Deny]
    - targetOperations: [CREATE, UPDATE]
      cel: "object.metadata.name.size() < 6"
      message: a short name is better
      validationActions: [Warn]
    - targetOperations: [UPDATE]
      cel: "oldObject.metadata.labels == object.metadata.labels"
      message: labels are frozen
      validationActions: [Deny]
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: stamp
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: Pod
  overrideRules:
    - targetOperations: [CREATE, UPDATE]
      overriders:
        plaintext:
          - {op: add, path: /metadata/annotations, value: {stamped: "yes"}}
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata:
  name: services
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: Service
  validateRules:
    - cel: "false"
      validationActions: [Deny]
"""


def pod(name: str, image: str = "nginx:1.27", labels: str = "{app: web}") -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: team-a, labels: {labels}}}\n"
            f"spec: {{containers: [{{name: c, image: '{image}'}}]}}\n")


GOOD, LATEST = pod("good"), pod("latest", image="nginx:latest")
UNLABELLED = ("apiVersion: v1\nkind: Pod\nmetadata: {name: bare, namespace: team-a}\n"
              "spec: {containers: [{name: c, image: 'nginx:1'}]}\n")


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policies.yaml"
    path.write_text(POLICIES)
    return path


def write(path: Path, *docs: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n".join(docs))
    return path


def names(out: str) -> list[str]:
    return [doc["object"]["metadata"]["name"] for doc in yaml.safe_load_all(out)]


def test_a_second_resource_adds_its_objects_instead_of_replacing_the_first(policy: Path, tmp_path: Path) -> None:
    code, out, _ = run("apply", "--policy", policy, "--resource", write(tmp_path / "a.yaml", GOOD),
                       "--resource", write(tmp_path / "b.yaml", pod("other")))
    assert code == 0
    assert names(out) == ["good", "other"]


def test_a_multi_document_file_is_read_whole(policy: Path, tmp_path: Path) -> None:
    code, out, err = run("apply", "--policy", policy, "--resource", write(tmp_path / "pods.yaml", GOOD, LATEST))
    assert code == 0, err
    assert names(out) == ["good", "latest"]


def test_a_directory_gives_its_yaml_and_json_files_in_path_order(policy: Path, tmp_path: Path) -> None:
    write(tmp_path / "dir" / "b.yaml", pod("b"))
    write(tmp_path / "dir" / "sub" / "c.yml", pod("c"))
    (tmp_path / "dir" / "a.json").write_text(json.dumps(yaml.safe_load(pod("a"))))
    write(tmp_path / "dir" / "notes.txt", "not a manifest")
    code, out, _ = run("apply", "--policy", policy, "--resource", tmp_path / "dir")
    assert code == 0
    assert names(out) == ["a", "b", "c"]


def test_an_empty_directory_is_bad_input(policy: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = run("apply", "--policy", policy, "--resource", tmp_path / "empty")
    assert (code, out) == (2, "")
    assert "empty: no .yaml, .yml, .json file" in err


def test_the_javascript_examples_deployments_file_is_usable() -> None:
    folder = EXAMPLES / "javascript" / "pod-limit"
    code, out, _ = run("apply", "--policy", folder / "policy.yaml", "--resource", folder / "deployments.yaml",
                       "-o", "json")
    assert code == 1  # the worst of the three: one is denied
    assert [r["allowed"] for r in json.loads(out)] == [True, False, True]


@pytest.mark.parametrize("option", [["--operation", "CREATE", "--operation", "UPDATE"],
                                    ["-o", "json", "--output", "yaml"], ["--namespace", "a", "--namespace", "a"],
                                    ["--results", "x.json", "--results", "y.json"]])
def test_a_single_valued_option_given_twice_is_a_usage_error(policy: Path, tmp_path: Path,
                                                             option: list[str]) -> None:
    code, out, err = run("apply", "--policy", policy, "--resource", write(tmp_path / "p.yaml", GOOD), *option,
                         usage_exit=True)
    assert (code, out) == (2, "")
    assert "was given more than once; it takes one value" in err
    assert option[2] in err.splitlines()[-1] or option[0] in err.splitlines()[-1]


def test_single_valued_options_of_every_command_refuse_repetition(tmp_path: Path) -> None:
    code, _, err = run("render", "--cel", "--cel", tmp_path / "p.yaml", usage_exit=True)
    assert code == 2 and "--cel was given more than once" in err
    code, _, err = run("test", tmp_path, "--junit", "a", "--junit", "b", usage_exit=True)
    assert code == 2 and "--junit was given more than once" in err


def test_audit_findings_are_shown_and_counted(policy: Path, tmp_path: Path) -> None:
    code, out, err = run("apply", "--policy", policy, "--resource", write(tmp_path / "p.yaml", LATEST))
    assert code == 0
    result = yaml.safe_load(out)
    assert result["allowed"] is True
    assert result["audit"] == ["ClusterValidatePolicy pods: no latest tag"]
    row = next(line for line in err.splitlines() if line.startswith("ClusterValidatePolicy pods ") and " 0 " in line)
    assert row.split()[-6:] == ["1", "0", "0", "0", "1", "0"]  # matched, patched, denied, warned, audited, skipped


def test_the_summary_has_every_rule_those_that_matched_nothing_too(policy: Path, tmp_path: Path) -> None:
    code, _, err = run("apply", "--policy", policy, "--resource", write(tmp_path / "p.yaml", GOOD, UNLABELLED))
    assert code == 1  # worst result: one object denied
    lines = err.splitlines()
    assert lines[0].split() == ["POLICY", "RULE", "TYPE", "MATCHED", "PATCHED", "DENIED", "WARNED", "AUDITED",
                                "SKIPPED"]
    rows = {tuple(line.split()[:4]): line.split()[4:] for line in lines[1:-2]}
    assert rows[("ClusterOverridePolicy", "stamp", "0", "override")] == ["2", "2", "0", "0", "0", "0"]
    assert rows[("ClusterValidatePolicy", "pods", "1", "validate")] == ["2", "0", "1", "0", "0", "0"]
    assert rows[("ClusterValidatePolicy", "pods", "2", "validate")] == ["2", "0", "0", "0", "0", "1"]
    assert rows[("ClusterValidatePolicy", "services", "0", "validate")] == ["0"] * 6  # matched nothing
    assert lines[-1].startswith("2 objects: 1 allowed, 1 denied; rule results: ")


def test_results_json_has_every_rule_result_and_the_totals(policy: Path, tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    code, out, _ = run("apply", "--policy", policy, "--resource",
                       write(tmp_path / "p.yaml", LATEST, UNLABELLED, pod("longname")), "--results", target)
    assert code == 1
    assert len(list(yaml.safe_load_all(out))) == 3  # the objects' results are still printed
    report = json.loads(target.read_text())
    by_object = {o["resource"]["name"]: {(r["policy"]["name"], r["rule"]): r for r in o["rules"]}
                 for o in report["objects"]}
    assert report["objects"][0]["resource"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a",
                                                "name": "latest"}
    latest = by_object["latest"]
    assert latest[("stamp", 0)]["result"] == "pass" and latest[("stamp", 0)]["patched"] is True
    assert latest[("pods", 0)]["result"] == "fail" and latest[("pods", 0)]["audited"] is True
    assert latest[("pods", 0)]["message"] == "no latest tag"
    assert latest[("pods", 1)]["result"] == "pass"
    assert ("pods", 3) not in latest  # an UPDATE-only rule does not match a CREATE
    bare = by_object["bare"]
    assert bare[("pods", 1)]["result"] == "fail" and bare[("pods", 1)]["denied"] is True
    assert bare[("pods", 2)]["result"] == "skip" and bare[("pods", 2)]["skipped"] is True  # after the denial
    assert by_object["longname"][("pods", 2)]["result"] == "warn"
    assert (report["totals"]["objects"], report["totals"]["objectsAllowed"], report["totals"]["objectsDenied"]) == (
        3, 2, 1)
    assert report["totals"]["denied"] == 1 and report["totals"]["audited"] == 1 and report["totals"]["matched"] == 12
    assert report["totals"]["results"] == {"pass": 7, "fail": 2, "warn": 2, "error": 0, "skip": 1}
    assert {p["policy"]["name"] for p in report["policies"]} == {"pods", "stamp", "services"}


def test_results_on_stdout_replace_the_objects_results(policy: Path, tmp_path: Path) -> None:
    code, out, _ = run("apply", "--policy", policy, "--resource", write(tmp_path / "p.yaml", GOOD), "--results", "-")
    assert code == 0
    assert set(json.loads(out)) == {"objects", "policies", "totals"}


def test_a_rule_error_is_an_error_result(tmp_path: Path) -> None:
    policy = write(tmp_path / "p.yaml", POLICIES.replace('cel: "has(object.metadata.labels)"',
                                                          'cel: "object.metadata.missing == 1"'))
    target = tmp_path / "r.json"
    code, _, _ = run("apply", "--policy", policy, "--resource", write(tmp_path / "pod.yaml", GOOD),
                     "--results", target)
    assert code == 1  # failurePolicy Fail (the default) with Deny denies
    rule = next(r for r in json.loads(target.read_text())["objects"][0]["rules"] if r["rule"] == 1)
    assert rule["result"] == "error" and rule["denied"] is True


def test_json_output_is_a_list_with_several_objects_and_the_result_alone_with_one(policy: Path,
                                                                                  tmp_path: Path) -> None:
    code, out, _ = run("apply", "--policy", policy, "--resource", write(tmp_path / "one.yaml", GOOD), "-o", "json")
    assert code == 0 and json.loads(out)["allowed"] is True
    code, out, _ = run("apply", "--policy", policy, "--resource", write(tmp_path / "two.yaml", GOOD, LATEST),
                       "-o", "json")
    assert code == 0 and [r["object"]["metadata"]["name"] for r in json.loads(out)] == ["good", "latest"]


def test_old_resources_pair_with_resources_by_kind_namespace_and_name(policy: Path, tmp_path: Path) -> None:
    new = write(tmp_path / "new.yaml", pod("a", labels="{app: a}"), pod("b", labels="{app: b2}"))
    old = write(tmp_path / "old.yaml", pod("b", labels="{app: b}"), pod("a", labels="{app: a}"))  # other order
    code, out, _ = run("apply", "--policy", policy, "--resource", new, "--old-resource", old,
                       "--operation", "UPDATE", "-o", "json")
    assert code == 1
    assert [(r["object"]["metadata"]["name"], r["allowed"]) for r in json.loads(out)] == [("a", True), ("b", False)]
    assert json.loads(out)[1]["message"] == "ClusterValidatePolicy pods: labels are frozen"


@pytest.mark.parametrize(("olds", "message"), [
    ([pod("a")], "UPDATE needs the previous object of Pod team-a/b"),
    ([pod("a"), pod("b"), pod("c")], "--old-resource Pod team-a/c is the previous object of no --resource"),
    ([pod("a"), pod("a"), pod("b")], "a second old resource for Pod team-a/a"),
])
def test_unpaired_old_resources_are_bad_input(policy: Path, tmp_path: Path, olds: list[str], message: str) -> None:
    new = write(tmp_path / "new.yaml", pod("a"), pod("b"))
    code, out, err = run("apply", "--policy", policy, "--resource", new,
                         "--old-resource", write(tmp_path / "old.yaml", *olds), "--operation", "UPDATE")
    assert (code, out) == (2, "")
    assert message in err


def test_a_bad_object_among_many_is_named_by_file_and_place(policy: Path, tmp_path: Path) -> None:
    code, out, err = run("apply", "--policy", policy,
                         "--resource", write(tmp_path / "p.yaml", GOOD, "kind: Pod\nmetadata: {name: x}\n"))
    assert (code, out) == (2, "")
    assert "p.yaml (object 2 of 2): not a Kubernetes object (no apiVersion)" in err
