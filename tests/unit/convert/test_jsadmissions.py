"""js-admissions-controller documents → our policies (kinitiras_py.convert.jsadmissions)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kinitiras_py.convert import registry
from kinitiras_py.engine.policies.compiling import compile_policy
from tests.cli import run

DATA = Path(__file__).resolve().parents[2] / "data" / "foreign" / "jsadmissions"


def load(name: str) -> list[dict]:
    return list(yaml.safe_load_all((DATA / name).read_text()))


def test_every_spelling_of_the_kinds_is_claimed() -> None:
    for kind in ("JsAdmission", "JsAdmissions", "ClusterJsAdmission", "ClusterJsAdmissions"):
        assert registry.is_foreign({"apiVersion": "momiji.com/v1", "kind": kind})
    assert not registry.is_foreign({"apiVersion": "example.com/v1", "kind": "JsAdmission"})


def test_a_cluster_admission_with_jsa_mutate_becomes_a_cluster_override_policy() -> None:
    result = registry.convert_all(load("date-annotation.yaml"), "f")
    assert result.problems == []
    [policy] = result.documents
    assert policy["kind"] == "ClusterOverridePolicy" and policy["metadata"] == {"name": "pod-date"}
    assert policy["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Pod"}]
    source = policy["spec"]["overrideRules"][0]["overriders"]["javascript"]["source"]
    assert source == load("date-annotation.yaml")[0]["spec"]["js"]
    compiled = compile_policy(policy)
    assert compiled.javascript_only and compiled.cluster_scoped


def test_a_namespaced_admission_with_both_functions_becomes_two_policies_in_its_namespace() -> None:
    result = registry.convert_all(load("namespaced-both.yaml"), "f")
    assert result.problems == []
    assert [(d["kind"], d["metadata"]) for d in result.documents] == [
        ("OverridePolicy", {"name": "team-defaults", "namespace": "team-a"}),
        ("ValidatePolicy", {"name": "team-defaults", "namespace": "team-a"})]
    for doc in result.documents:
        assert doc["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Pod"},
                                                    {"apiVersion": "apps/v1", "kind": "Deployment"}]
        assert compile_policy(doc).warnings == ()


def test_watch_hooks_and_state_convert_as_they_are() -> None:
    result = registry.convert_all(load("pod-limit-stateful.yaml"), "f.yaml")
    assert result.problems == []
    [policy] = result.documents
    assert policy["kind"] == "ClusterValidatePolicy"
    source = policy["spec"]["validateRules"][0]["javascript"]["source"]
    assert source == load("pod-limit-stateful.yaml")[0]["spec"]["js"]
    hooks = compile_policy(policy).rules[0].javascript.hooks
    assert hooks is not None and set(hooks.parameters) == {"jsa_init", "jsa_created", "jsa_deleted"}


def test_a_hook_parameter_it_is_not_given_is_reported() -> None:
    doc = {"apiVersion": "momiji.com/v1", "kind": "ClusterJsAdmission", "metadata": {"name": "n"},
           "spec": {"kinds": ["pods"], "js": "function jsa_created(op, obj) {} function jsa_validate() {}"}}
    [problem] = registry.convert_all([doc], "f").problems
    assert problem.field == "spec.js: jsa_created" and "'op' is not one it is given" in problem.reason


def test_kinds_in_every_form_discovery_resolves() -> None:
    doc = {"apiVersion": "momiji.com/v1", "kind": "ClusterJsAdmission", "metadata": {"name": "n"},
           "spec": {"kinds": ["v1/pods", "apps/v1/deployments", "Pod", "deployment", "v1/statefulsets",
                              "jobs.batch"], "js": "function jsa_validate() {}"}}
    result = registry.convert_all([doc], "f")
    assert result.problems == []
    assert result.documents[0]["spec"]["resourceSelectors"] == [  # v1/pods and Pod: one selector
        {"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "apps/v1", "kind": "Deployment"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet"}, {"apiVersion": "batch/v1", "kind": "Job"}]
    wrong = {**doc, "spec": {**doc["spec"], "kinds": ["apps/v2/deployments", "v2/pods", "batch/v1/pods", "/pods",
                                                       "a/b/c/d", "v1/widgets"]}}
    reasons = {p.field: p.reason for p in registry.convert_all([wrong], "f").problems}
    assert "Deployment is known here at apps/v1 only" in reasons["spec.kinds[0]"]
    assert "Pod is known here at v1 only" in reasons["spec.kinds[1]"] and "Pod" in reasons["spec.kinds[2]"]
    for i in (3, 4, 5):
        assert "group/version/resource" in reasons[f"spec.kinds[{i}]"]


def test_an_override_policy_carries_the_marker_with_the_admission_name() -> None:
    [cluster] = registry.convert_all(load("date-annotation.yaml"), "f").documents
    assert cluster["spec"]["overrideRules"][0]["overriders"]["javascript"]["marker"] == {
        "annotation": "jsadmissions.momiji.com/mutate", "name": "pod-date"}
    mutate, validate = registry.convert_all(load("namespaced-both.yaml"), "f").documents
    assert mutate["spec"]["overrideRules"][0]["overriders"]["javascript"]["marker"]["name"] == "team-a.team-defaults"
    assert "marker" not in validate["spec"]["validateRules"][0]["javascript"]


def test_unknown_resources_and_syntax_errors_are_reported() -> None:
    result = registry.convert_all(load("unknown-resource.yaml"), "f")
    reasons = {p.field: p.reason for p in result.problems}
    assert "not a built-in resource" in reasons["spec.kinds[0]"]
    assert reasons["spec.js"].startswith("line 4: SyntaxError")  # the end of the script, where quickjs gave up


def test_missing_and_unknown_fields_are_reported() -> None:
    doc = {"apiVersion": "momiji.com/v1", "kind": "JsAdmission", "metadata": {},
           "spec": {"kinds": [], "js": "", "priority": 3}}
    fields = {p.field for p in registry.convert_all([doc], "f").problems}
    assert fields == {"metadata.name", "spec.kinds", "spec.priority", "spec.js"}
    assert {p.field for p in registry.convert_all([{**doc, "spec": "x"}], "f").problems} == {"metadata.name", "spec"}
    script_only = {**doc, "metadata": {"name": "n"}, "spec": {"kinds": ["pods"], "js": "var x = 1"}}
    assert [p.reason for p in registry.convert_all([script_only], "f").problems] == [
        "defines neither jsa_mutate nor jsa_validate"]
    wrong_group = {**script_only, "spec": {"kinds": ["pods.apps", 7], "js": "function jsa_validate() {}"}}
    assert {p.field for p in registry.convert_all([wrong_group], "f").problems} == {"spec.kinds[0]", "spec.kinds[1]"}


def test_the_convert_command_prints_policies_or_exits_2_naming_each_problem() -> None:
    code, out, err = run("convert", str(DATA / "sas-workload-class.yaml"))
    assert code == 0 and err == ""
    [doc] = list(yaml.safe_load_all(out))
    assert doc["kind"] == "ClusterOverridePolicy"
    code, out, err = run("convert", str(DATA / "unknown-resource.yaml"))
    assert code == 2 and out == ""
    assert err.count("error: ") == 2 and "spec.kinds[0]" in err


def test_a_state_parameter_the_body_never_names_converts_exactly() -> None:
    result = registry.convert_all(load("sample-add-annotations.yaml"), "f")
    assert result.problems == []
    [policy] = result.documents
    assert compile_policy(policy).warnings == ()
    reading = {**load("sample-add-annotations.yaml")[0]}
    reading["spec"] = {**reading["spec"], "js": "function jsa_mutate(op, obj, sync, state) { state.n = 1 }"}
    assert registry.convert_all([reading], "f").problems == []
