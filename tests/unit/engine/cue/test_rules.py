"""`cue` rules inside policies: compiled at admission, run by the engine with kinitiras' inputs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running.overriding import apply_rule
from kinitiras_py.engine.running.validating import check_rule
from tests.cli import run
from tests.conftest import DATA

API = "policy.kcloudlabs.io/v1alpha1"
SCALE = """object: _ @tag(object)
oldObject: _ @tag(oldObject)
validate: {
    if oldObject.spec != _|_ if object.spec.replicas < oldObject.spec.replicas {
        valid: false
        reason: "scaling down from \\(oldObject.spec.replicas) is not allowed"
    }
}"""


def _cvp(cue: str) -> Any:
    return compile_policy({"apiVersion": API, "kind": "ClusterValidatePolicy", "metadata": {"name": "v"},
                           "spec": {"validateRules": [{"cue": cue}]}})


def _variables(operation: str, obj: Any, old: Any = None) -> dict[str, Any]:
    return {"object": obj, "oldObject": old, "request": {"operation": operation}}


def test_validate_reads_old_object_on_update_only() -> None:
    rule = _cvp(SCALE).rules[0]
    new, old = {"spec": {"replicas": 1}}, {"spec": {"replicas": 3}}
    assert check_rule(rule, _variables("UPDATE", new, old)) == (False, "scaling down from 3 is not allowed")
    assert check_rule(rule, _variables("UPDATE", old, new)) == (True, "")
    # On CREATE (and DELETE) there is no oldObject, even when the API server sends one.
    assert check_rule(rule, _variables("CREATE", new, old)) == (True, "")
    assert check_rule(rule, _variables("DELETE", new, old)) == (True, "")


@pytest.mark.parametrize(("valid", "obj", "cls"), [
    ("object.spec.replicas > 1", {"spec": {}}, r"cue error \(incomplete\): no such key: replicas"),
    ('object.kind & "Pod" == "Pod"', {"kind": "Namespace"}, r"cue error \(conflict\): .*conflicting values"),
    ('object.kind == 3', {"kind": "Pod"}, r"cue error \(other\): .*invalid operands to =="),
])
def test_validate_error_is_a_rule_error_naming_its_class(valid: str, obj: Any, cls: str) -> None:
    rule = _cvp(f"object: _\nvalidate: {{valid: {valid}}}").rules[0]
    with pytest.raises(CelEvalError, match=cls):
        check_rule(rule, _variables("CREATE", obj))


def test_override_error_names_its_class() -> None:
    policy = compile_policy({"apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "o"},
                             "spec": {"overrideRules": [{"overriders": {
                                 "cue": 'object: _\npatches: [{op: "add", path: "/a", value: object.x}]'}}]}})
    with pytest.raises(CelEvalError, match=r"cue error \(incomplete\): no such key: x"):
        apply_rule({"kind": "Pod"}, policy.rules[0], policy, _variables("CREATE", {"kind": "Pod"}))


def test_override_gets_object_only_and_runs_between_template_and_cel() -> None:
    policy = compile_policy({
        "apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "o"},
        "spec": {"overrideRules": [{"overriders": {
            "cue": 'object: _\noldObject: _\npatches: [\n  if oldObject == _|_ {op: "add", path: "/a", value: 1},\n'
                   '  {op: "add", path: "/b", value: object.kind}]',
            "cel": '[{"op": "add", "path": "/c", "value": object.a + 1}]',
            "renderedCue": "this: is ignored",
        }}]}})
    rule = policy.rules[0]
    draft = apply_rule({"kind": "Pod"}, rule, policy, _variables("UPDATE", {"kind": "Pod"}, {"kind": "Old"}))
    assert draft.doc == {"kind": "Pod", "a": 1, "b": "Pod", "c": 2}


def test_render_shows_the_compiled_cel_beside_the_untouched_cue() -> None:
    path = DATA / "examples" / "addanno-cop.yaml"
    code, out, _ = run("render", path)
    assert code == 0
    overriders = yaml.safe_load(out)["spec"]["overrideRules"][0]["overriders"]
    assert overriders["cue"] == yaml.safe_load(path.read_text())["spec"]["overrideRules"][0]["overriders"]["cue"]
    assert overriders["cueCel"].startswith("cel.bind(")
    code, out, _ = run("render", "--cel", path)
    assert "// ClusterOverridePolicy add-anno-cop-cue: spec.overrideRules[0].overriders.cueCel" in out
