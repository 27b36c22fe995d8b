"""``apply --policy-report``: the run's results as PolicyReports, in the shape the cluster's reports have."""

from __future__ import annotations

from pathlib import Path

import yaml

from kinitiras_py.reports.build import MAX_RESULTS
from tests.cli import run
from tests.unit.api.test_crds import BY_KIND, validate
from tests.unit.offline.test_apply_many import GOOD, LATEST, POLICIES, UNLABELLED, pod, write

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1, uid: 6c1d2a4e-0000-4000-8000-000000000001}\n"
NODE_CHECK = """\
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: nodes}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Node}]
  validateRules:
  - cel: "has(object.metadata.labels)"
    message: nodes need labels
    validationActions: [Audit]
"""


def schema(kind: str) -> dict:
    return BY_KIND[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_each_object_gets_its_report_with_every_rule_result_and_the_counts(tmp_path: Path) -> None:
    policies = write(tmp_path / "p.yaml", POLICIES, NODE_CHECK)
    target = tmp_path / "reports.yaml"
    code, out, err = run("apply", "--policy", policies,
                         "--resource", write(tmp_path / "r.yaml", GOOD, LATEST, UNLABELLED, NODE),
                         "--policy-report", target)
    assert code == 1, err  # the unlabelled pod is denied, as without the option
    assert len(list(yaml.safe_load_all(out))) == 4  # the objects' results are still printed
    reports = list(yaml.safe_load_all(target.read_text()))
    assert [(r["kind"], r["scope"]["name"]) for r in reports] == [
        ("PolicyReport", "good"), ("PolicyReport", "latest"), ("PolicyReport", "bare"),
        ("ClusterPolicyReport", "node-1")]
    for report in reports:
        assert validate(schema(report["kind"]), report) == []
        assert all(one["source"] == "kinitiras-py" for one in report["results"])
    good, latest, bare, node = reports
    assert good["metadata"]["namespace"] == "team-a"
    assert good["summary"] == {"pass": 4, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    assert latest["summary"] == {"pass": 2, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    failed = next(one for one in latest["results"] if one["result"] == "fail")
    assert (failed["policy"], failed["rule"], failed["message"]) == ("pods", "validateRules[0]", "no latest tag")
    assert failed["resources"] == [{"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "latest"}]
    # Denied by rule 1: the rules after it were not evaluated.
    assert bare["summary"] == {"pass": 2, "fail": 1, "warn": 0, "error": 0, "skip": 1}
    # A uid given in the file names the report and makes the object its owner, as in a cluster.
    assert node["metadata"]["name"] == "6c1d2a4e-0000-4000-8000-000000000001"
    assert node["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert node["summary"]["fail"] == 1
    assert good["metadata"]["name"] != latest["metadata"]["name"]  # named after each object's identity


def test_the_names_do_not_change_from_run_to_run(tmp_path: Path) -> None:
    policies, resources = write(tmp_path / "p.yaml", POLICIES), write(tmp_path / "r.yaml", GOOD, LATEST)
    names = []
    for _ in range(2):
        code, out, _ = run("apply", "--policy", policies, "--resource", resources, "--policy-report", "-")
        assert code == 0
        names.append([r["metadata"]["name"] for r in yaml.safe_load_all(out)])  # only the reports on stdout
    assert names[0] == names[1] and len(set(names[0])) == 2


def test_many_policies_split_an_objects_report(tmp_path: Path) -> None:
    many = "---\n".join(NODE_CHECK.replace("name: nodes", f"name: nodes-{i:03d}") for i in range(MAX_RESULTS + 5))
    code, out, _ = run("apply", "--policy", write(tmp_path / "p.yaml", many),
                       "--resource", write(tmp_path / "n.yaml", NODE), "--policy-report", "-")
    assert code == 0
    reports = list(yaml.safe_load_all(out))
    assert [len(r["results"]) for r in reports] == [MAX_RESULTS, 5]
    assert sum(r["summary"]["fail"] for r in reports) == MAX_RESULTS + 5


def test_stdout_cannot_take_two_outputs_and_an_unwritable_file_is_bad_input(tmp_path: Path) -> None:
    policies, resources = write(tmp_path / "p.yaml", POLICIES), write(tmp_path / "r.yaml", pod("x"))
    code, out, err = run("apply", "--policy", policies, "--resource", resources, "--results", "-",
                         "--policy-report", "-")
    assert (code, out) == (2, "") and "both write on stdout" in err
    code, _, err = run("apply", "--policy", policies, "--resource", resources,
                       "--policy-report", tmp_path / "missing" / "r.yaml")
    assert code == 2 and err.startswith("error: --policy-report ") and "No such file" in err
