"""ModRule → our policies: the shapes made, the Go templates that translate exactly and the ones
reported with their field."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.convert import gotemplate, kubemod
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import fanout
from kinitiras_py.engine.policies.compiling import compile_policy
from tests.compiling import render_select


def modrule(spec: dict[str, Any], namespace: str | None = "shop") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "r"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "api.kubemod.io/v1beta1", "kind": "ModRule", "metadata": meta, "spec": spec}


def convert(doc: dict[str, Any]) -> dict[str, Any]:
    result = kubemod.convert_modrule(doc, "f.yaml", [doc])
    assert result.problems == [], result.problems
    [policy] = result.documents
    compile_policy(policy)  # every conversion is a valid policy
    return policy


def problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.field, p.reason) for p in kubemod.convert_modrule(doc, "f.yaml", [doc]).problems]


PATCH = {"type": "Patch", "match": [{"select": "$.kind", "matchValue": "Pod"}],
         "patch": [{"op": "add", "path": "/metadata/labels/a", "value": "'8080'"}]}


def test_a_namespaced_patch_rule() -> None:
    policy = convert(modrule({**PATCH, "executionTier": 3, "admissionOperations": ["UPDATE"]}))
    assert policy["kind"] == "OverridePolicy" and policy["metadata"]["namespace"] == "shop"
    assert policy["metadata"]["annotations"]["kinitiras.kcloudlabs.io/converted-from"] == "ModRule shop/r"
    spec = policy["spec"]
    assert spec["resourceSelectors"] == [{"apiVersion": "*", "kind": "Pod"}]
    assert spec["matchConditions"] == [{"select": "$.kind", "matchValue": "Pod"}]
    assert spec["executionTier"] == 3
    assert spec["overrideRules"] == [{"targetOperations": ["UPDATE"], "patchLastApplied": True, "overriders": {
        "plaintext": [{"op": "add", "path": "/metadata/labels/a", "lenient": True, "value": "8080"}]}}]


def test_values_are_read_as_yaml_when_converted() -> None:
    def value(text: str | None) -> Any:
        op: dict[str, Any] = {"op": "add", "path": "/a"}
        if text is not None:
            op["value"] = text
        return convert(modrule({**PATCH, "patch": [op]}))["spec"]["overrideRules"][0]["overriders"]["plaintext"][0]

    assert value("8080")["value"] == 8080
    assert value('"8080"')["value"] == "8080"
    assert value("false")["value"] is False
    assert value("a: [1]")["value"] == {"a": [1]}
    assert value(None)["value"] is None
    assert "value" not in convert(modrule({**PATCH, "patch": [{"op": "remove", "path": "/a"}]}))[
        "spec"]["overrideRules"][0]["overriders"]["plaintext"][0]


def test_default_operations_and_namespace() -> None:
    policy = convert(modrule(PATCH, namespace=None))
    assert policy["metadata"]["namespace"] == "default"
    assert policy["spec"]["overrideRules"][0]["targetOperations"] == ["CREATE", "UPDATE"]


def _conditions_hold(policy: dict[str, Any], obj: dict[str, Any], namespace: str) -> bool:
    program = compile_policy(policy).conditions
    assert program is not None
    return bool(program.evaluate({"object": obj, "request": {"namespace": namespace}}))


def test_cluster_wide_rules_and_target_namespace_regex() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    spec = {**PATCH, "match": []}
    cluster_only = convert(modrule(spec, namespace="kubemod-system"))
    assert cluster_only["kind"] == "ClusterOverridePolicy" and "namespace" not in cluster_only["metadata"]
    assert _conditions_hold(cluster_only, node, "")
    assert _conditions_hold(cluster_only, namespace, "team-a")  # a Namespace is cluster-scoped
    assert not _conditions_hold(cluster_only, pod, "team-a")
    regex = convert(modrule({**spec, "targetNamespaceRegex": "^team-"}, namespace="kubemod-system"))
    assert _conditions_hold(regex, pod, "team-a")
    assert not _conditions_hold(regex, pod, "other")
    assert not _conditions_hold(regex, node, "")
    assert not _conditions_hold(regex, namespace, "team-a")
    unanchored = convert(modrule({**spec, "targetNamespaceRegex": "team"}, namespace="kubemod-system"))
    assert _conditions_hold(unanchored, pod, "my-team-b")


def test_a_reject_rule() -> None:
    policy = convert(modrule({"type": "Reject", "rejectMessage": "no {{ .Target.metadata.name }}",
                              "match": [{"select": "$.kind", "matchValues": ["Deployment", "StatefulSet"]}]}))
    assert policy["kind"] == "ValidatePolicy"
    assert policy["spec"]["resourceSelectors"] == [{"apiVersion": "*", "kind": "Deployment"},
                                                   {"apiVersion": "*", "kind": "StatefulSet"}]
    message = 'no {{ template.goText(dyn(target["metadata"][?"name"].orValue(null))) }}'
    assert policy["spec"]["validateRules"] == [{"targetOperations": ["CREATE", "UPDATE"], "messageTemplate": message}]
    default = convert(modrule({"type": "Reject", "match": []}, namespace="kubemod-system"))
    assert default["kind"] == "ClusterValidatePolicy"
    assert default["spec"]["validateRules"][0]["messageTemplate"] == "rejected by ModRule kubemod-system/r"


@pytest.mark.parametrize(("spec", "field", "reason"), [
    ({**PATCH, "surprise": 1}, "spec.surprise", "unknown field"),
    ({**PATCH, "type": "Mutate"}, "spec.type", "must be Patch or Reject"),
    ({**PATCH, "patch": []}, "spec.patch", "at least one operation"),
    ({**PATCH, "patch": [{"op": "move", "path": "/a"}]}, "spec.patch[0].op", "must be one of"),
    ({**PATCH, "patch": [{"op": "add", "path": "/a", "value": "a: [", }]}, "spec.patch[0].value", "is not YAML"),
    ({**PATCH, "patch": [{"op": "add", "path": "/a", "value": 5}]}, "spec.patch[0].value", "must be a string"),
    ({**PATCH, "patch": [{"op": "add", "path": "/a", "value": "{{ upper .Namespace }}"}]}, "spec.patch[0].value",
     "the function upper has no translation"),
    ({**PATCH, "match": [{"select": "$.a["}]}, "spec.match[0].select", "invalid select"),
    ({**PATCH, "match": [{"select": "$.a", "other": 1}]}, "spec.match[0].other", "unknown field"),
    ({"type": "Reject", "match": [], "executionTier": 2}, "spec.executionTier", "no patch to order"),
    ({"type": "Reject", "match": [], "rejectMessage": "{{ range .Target.x }}{{ end }}"}, "spec.rejectMessage",
     "range has no translation"),
])
def test_what_cannot_be_converted_exactly_is_reported(spec: dict[str, Any], field: str, reason: str) -> None:
    found = problems(modrule(spec))
    assert any(f == field and reason in r for f, r in found), found


def test_the_node_synthetic_reference_is_a_value_ref() -> None:
    reads_node = {**PATCH, "match": [{"select": "$.syntheticRefs.node.metadata.labels"}]}
    policy = convert(modrule(reads_node, kubemod.SYSTEM_NAMESPACE))
    assert policy["spec"]["valueRefs"] == {"node": kubemod.NODE_REF}
    assert "valueRefs" not in convert(modrule(PATCH, kubemod.SYSTEM_NAMESPACE))["spec"]
    # A namespaced policy may not read Nodes (docs/security.md): reported, not converted.
    assert any(f == "spec" and "$.syntheticRefs.node reads a Node, which is cluster-scoped" in r
               for f, r in problems(modrule(reads_node)))


def test_an_unknown_version_is_reported() -> None:
    doc = {**modrule(PATCH), "apiVersion": "api.kubemod.io/v2"}
    assert ("apiVersion", "only api.kubemod.io/v1beta1 is known") in problems(doc)


def render(template: str, target: dict[str, Any], selected: Any = None, namespace_object: Any = None) -> str:
    """Our translation of a KubeMod template, rendered (as text, before YAML) against ``target``."""
    source = fanout.with_scope(fanout.template_cel(gotemplate.translate(template), "t"), "dyn(params.item)", ())
    program = cel.compile_program(source)
    params = {"item": selected, "node": {"metadata": {"labels": {"zone": "b"}}}}
    return str(program.evaluate({"object": target, "request": {"namespace": "shop"}, "params": params,
                                 "namespaceObject": namespace_object}))


TARGET = {"metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
          "spec": {"replicas": 3, "big": 1000000, "ips": ["1.2.3.4", "5.6.7.8"], "empty": "", "flag": True,
                   "map": {"b": 1, "a": "x"}}}


@pytest.mark.parametrize(("template", "text"), [
    ("name={{ .Target.metadata.name }}", "name=web"),
    ("{{ .Namespace }}", "shop"),
    ("{{ .Target.spec.replicas }} {{ .Target.spec.big }} {{ .Target.spec.flag }}", "3 1e+06 true"),
    ("{{ .Target.spec.ips }}", "[1.2.3.4 5.6.7.8]"),
    ("{{ .Target.spec.map }}", "map[a:x b:1]"),
    ("{{ .Target.spec.missing }}", "<no value>"),
    ('{{ index .Target.metadata.labels "app.kubernetes.io/name" }}', "web"),
    ('{{ index .Target.spec.ips 1 }}', "5.6.7.8"),
    ('{{ index .Target.metadata.labels "missing" }}', "<no value>"),
    ("{{ .Target.metadata.name | quote }}", '"web"'),
    ("{{ quote .Target.spec.replicas }}", '"3"'),
    ('{{ default "none" .Target.spec.empty }}-{{ default "none" .Target.spec.missing }}', "none-none"),
    ('{{ default "none" .Target.metadata.name }}', "web"),
    ('{{ regexReplaceAll "(.+)/(.*)" .SelectedItem "my-repo/${2}" }}', "my-repo/app:1"),
    ("{{ .SelectedItem | quote }}", '"their-repo/app:1"'),
    ("a {{- .Namespace -}} b", "ashopb"),
    ('{{ "lit" }}{{ `raw` }}', "litraw"),
    ("{{ .Target.syntheticRefs.namespace.metadata.name }}", "shop"),
    ('{{ index .Target.syntheticRefs.node.metadata.labels "zone" }}', "b"),
])
def test_templates_that_translate(template: str, text: str) -> None:
    namespace_object = {"metadata": {"name": "shop"}}
    assert render(template, TARGET, "their-repo/app:1", namespace_object) == text


def test_a_list_index_out_of_range_fails_as_in_go() -> None:
    with pytest.raises(cel.CelEvalError):
        render("{{ index .Target.spec.ips 5 }}", TARGET)


@pytest.mark.parametrize(("template", "reason"), [
    ("{{ if .Target }}x{{ end }}", "if has no translation"),
    ("{{ range .Target.spec.ips }}{{ . }}{{ end }}", "range has no translation"),
    ("{{ $x := .Target }}", "$x"),
    ("{{ . }}", "'.'"),
    ("{{ .Other }}", "not one of KubeMod's template fields"),
    ("{{ upper .Namespace }}", "upper has no translation"),
    ("{{ .Target.syntheticRefs.pod.metadata }}", "namespace and node"),
    ('{{ regexReplaceAll "(?=a)" .SelectedItem "b" }}', "Go's regexp (RE2) refuses"),
    ("{{ .Namespace | printf }}", "printf has no translation"),
    ("{{ .Target ", "never closed"),
    ("{{/* note */}}", "comments"),
])
def test_templates_that_do_not_translate(template: str, reason: str) -> None:
    with pytest.raises(gotemplate.Untranslatable) as caught:
        gotemplate.translate(template)
    assert reason in str(caught.value)


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 81}]},
                               {"name": "b", "ports": [{"containerPort": 90}]}]}}


def _names(value: str) -> list[tuple[str, Any]]:
    """The ports' (path, value) a converted patch operation naming every port with ``value`` makes."""
    op = {"op": "add", "select": "$.spec.containers[*].ports[*]", "path": "/spec/containers/#0/ports/#1/name",
          "value": value}
    policy = convert(modrule({"type": "Patch", "patch": [op]}))
    [converted] = policy["spec"]["overrideRules"][0]["overriders"]["plaintext"]
    made = render_select(converted, "p")
    result = cel.compile_program(made.source).evaluate({"object": POD, "request": {"namespace": "shop"}})
    return [(o["path"], o["value"]) for o in fanout.operations(result, converted, made.depth)]


EXPECTED_NAMES = [("/spec/containers/0/ports/0/name", "p0-0"), ("/spec/containers/0/ports/1/name", "p0-1"),
                  ("/spec/containers/1/ports/0/name", "p1-0")]


@pytest.mark.parametrize("value", [
    "p{{ .#0 }}-{{ .#1 }}",  # KubeMod's shorthand
    "p{{ index .SelectKeyParts 0 }}-{{ index .SelectKeyParts 1 }}",  # the long form it stands for
    "p{{ (.#0) }}-{{ .#1 }}",  # in parentheses
])
def test_key_parts_in_a_value_template(value: str) -> None:
    assert _names(value) == EXPECTED_NAMES


def test_a_key_part_quoted_is_a_string() -> None:
    assert [value for _, value in _names("{{ .#1 | quote }}")] == ["0", "1", "0"]


def test_the_shorthand_is_rewritten_everywhere_in_a_patch_value() -> None:
    # KubeMod rewrites the text before reading it as a template: outside {{ }} it stays text.
    assert _names("port.#1") == [(path, "port(index .SelectKeyParts 1)") for path, _ in EXPECTED_NAMES]
    assert gotemplate.expand_key_parts("{{ .#12 }}.#x") == "{{ (index .SelectKeyParts 12) }}.#x"


def test_a_key_part_the_select_does_not_have_fails_as_in_go() -> None:
    with pytest.raises(cel.CelEvalError):
        _names("{{ .#2 }}")


def test_a_reject_message_has_no_key_parts() -> None:
    reported = problems(modrule({"type": "Reject", "rejectMessage": "{{ .#0 }}",
                                 "match": [{"select": "$.kind", "matchValue": "Pod"}]}))
    assert [field for field, _ in reported] == ["spec.rejectMessage"]
