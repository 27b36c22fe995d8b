"""SuperGloo Mesh → ClusterOverridePolicy with a sidecar template, and examples/appmesh: the
policy with its ConfigMap and the converted Mesh inject the same sidecar."""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.cli.main import main
from kinitiras_py.convert import registry
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rendering.sidecar import marker_key
from kinitiras_py.offline import apply
from kinitiras_py.offline.loader import load_documents

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "appmesh"
FOREIGN = ROOT / "tests" / "data" / "foreign" / "appmesh"


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def mesh(**app: Any) -> dict[str, Any]:
    base = {"region": "us-east-1", "enableAutoInject": True, "virtualNodeLabel": "vn",
            "injectionSelector": {"labelSelector": {"labelsToMatch": {"app": "shop"}}}}
    return {"apiVersion": "supergloo.solo.io/v1", "kind": "Mesh", "metadata": {"name": "m", "namespace": "sg"},
            "spec": {"awsAppMesh": {**base, **app}}}


def configmap(text: str, name: str = "patch", **more: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "sg"},
            "data": {"patch.yaml": text, **more}}


REF = {"sidecarPatchConfigMap": {"name": "patch", "namespace": "sg"}}
GO = 'containers:\n  - name: envoy\n    image: e\n    env: [{name: N, value: "{{ .MeshName }}/{{.VirtualNodeName}}"}]\n'


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "sg", "labels": {"app": "shop", "vn": "n"}},
       "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]}}


def problems(*docs: dict[str, Any]) -> list[str]:
    return [str(p) for p in registry.convert_all(list(docs), "in.yaml").problems]


def test_a_label_selector_mesh_becomes_a_cluster_policy() -> None:
    result = registry.convert_all([configmap(GO), mesh(**REF)], "in.yaml")
    assert result.problems == []
    [policy] = result.documents  # the ConfigMap is carried by the policy, not passed through
    assert policy["metadata"]["name"] == "appmesh-sg-m"
    assert policy["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Pod",
                                                    "labelSelector": {"matchLabels": {"app": "shop"}}}]
    rule = policy["spec"]["overrideRules"][0]
    assert rule["targetOperations"] == ["CREATE"] and rule["failurePolicy"] == "Fail"
    block = rule["overriders"]["template"]["sidecar"]
    assert block["group"] == "appmesh" and block["requiredLabels"] == ["vn"] and block["requireContainerPorts"]
    assert block["values"] == {"meshName": "m", "awsRegion": "us-east-1"}
    assert 'value: "{{ values.meshName }}/{{ labels["vn"] }}"' in block["template"]
    compile_policy(policy)


def test_a_namespace_selector_mesh_without_configmap_uses_the_default_patch() -> None:
    doc = mesh(injectionSelector={"namespaceSelector": {"namespaces": ["a", "b"]}})
    [policy] = registry.converted([doc], "in.yaml")
    assert policy["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Pod", "namespace": "a"},
                                                   {"apiVersion": "v1", "kind": "Pod", "namespace": "b"}]
    block = policy["spec"]["overrideRules"][0]["overriders"]["template"]["sidecar"]
    assert block["values"]["envoyImage"].endswith("aws-appmesh-envoy:v1.8.0.2-beta")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a", "labels": {"vn": "node"}},
           "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}}
    out = apply.run(apply.Case(policies=[policy], resource=pod)).object["spec"]
    env = {e["name"]: e["value"] for e in out["containers"][1]["env"]}
    assert env["APPMESH_VIRTUAL_NODE_NAME"] == "mesh/m/virtualNode/node" and env["AWS_REGION"] == "us-east-1"
    assert {"name": "APPMESH_APP_PORTS", "value": "80"} in out["initContainers"][0]["env"]


def test_the_default_configmap_is_found_among_the_input() -> None:
    default = configmap(GO, name="sidecar-injector")
    default["metadata"]["namespace"] = "supergloo-system"
    result = registry.convert_all([mesh(), default], "in.yaml")
    assert result.problems == [] and len(result.documents) == 1
    assert "{{ values.meshName }}" in result.documents[0]["spec"]["overrideRules"][0]["overriders"]["template"][
        "sidecar"]["template"]


def istio() -> dict[str, Any]:
    return {"apiVersion": "supergloo.solo.io/v1", "kind": "Mesh", "metadata": {"name": "i", "namespace": "sg"},
            "spec": {"istio": {"installationNamespace": "istio-system"}}}


@pytest.mark.parametrize(("docs", "note"), [
    ([mesh(enableAutoInject=False, **REF), configmap(GO)],
     "in.yaml: Mesh sg/m: skipped (and its ConfigMap sg/patch): enableAutoInject is not true"),
    ([mesh(enableAutoInject=None)], "in.yaml: Mesh sg/m: skipped: enableAutoInject is not true"),
    ([istio()], "in.yaml: Mesh sg/i: skipped: not an App Mesh mesh (istio)"),
])
def test_a_mesh_that_does_not_inject_is_left_out_with_a_note(docs: list[dict[str, Any]], note: str) -> None:
    result = registry.convert_all(docs, "in.yaml")
    assert (result.documents, result.problems) == ([], [])
    [written] = result.notes
    assert written.startswith(note), written


def test_a_mesh_that_does_not_inject_leaves_the_others_alone(tmp_path: Path) -> None:
    # (the ConfigMap of the stale mesh is left out with it; the working mesh still injects)
    stale = mesh(enableAutoInject=False, sidecarPatchConfigMap={"name": "old", "namespace": "sg"})
    stale["metadata"]["name"] = "stale"
    text = yaml.safe_dump_all([stale, istio(), configmap("containers: []", name="old"), mesh(**REF),
                               configmap(GO)])
    (tmp_path / "meshes.yaml").write_text(text)
    code, out, err = run_cli("convert", str(tmp_path / "meshes.yaml"))
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["ClusterOverridePolicy"]
    assert err.count("note: ") == 2 and "Mesh sg/stale: skipped (and its ConfigMap sg/old)" in err, err
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(POD))
    code, out, err = run_cli("apply", "--policy", str(tmp_path / "meshes.yaml"), "--resource",
                             str(tmp_path / "pod.yaml"), "-o", "json")
    assert code == 0, err
    assert err.count("note: ") == 2, err
    assert [c["name"] for c in yaml.safe_load(out)["object"]["spec"]["containers"]] == ["app", "envoy"]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"awsAppMesh": {"enableAutoInject": "yes"}}, "spec.awsAppMesh.enableAutoInject: must be true or false"),
    ({"awsAppMesh": "on"}, "spec.awsAppMesh: must be an object"),
    ("istio", "spec: must be an object"),
])
def test_a_malformed_mesh_is_reported_not_skipped(spec: Any, expected: str) -> None:
    doc = istio() | {"spec": spec}
    assert problems(doc) == [f"in.yaml: Mesh sg/i: {expected}"]


@pytest.mark.parametrize(("docs", "expected"), [
    ([mesh(virtualNodeLabel="")], "in.yaml: Mesh sg/m: spec.awsAppMesh.virtualNodeLabel: required when "
                                  "enableAutoInject is true"),
    ([mesh(region=None)], "in.yaml: Mesh sg/m: spec.awsAppMesh.region: required: the sidecar's AWS_REGION"),
    ([mesh(injectionSelector=None)], "in.yaml: Mesh sg/m: spec.awsAppMesh.injectionSelector: required when "
                                     "enableAutoInject is true"),
    ([mesh(injectionSelector={"upstreamSelector": {"upstreams": []}})],
     "in.yaml: Mesh sg/m: spec.awsAppMesh.injectionSelector.upstreamSelector: the App Mesh injector did not "
     "support it"),
    ([mesh(injectionSelector={"namespaceSelector": {"namespaces": []}})],
     "in.yaml: Mesh sg/m: spec.awsAppMesh.injectionSelector.namespaceSelector.namespaces: an empty list selects "
     "no pod"),
    ([mesh(**REF)], "in.yaml: Mesh sg/m: spec.awsAppMesh.sidecarPatchConfigMap: ConfigMap sg/patch is not among "
                    "the input documents"),
    ([mesh(**REF), configmap(GO, other="x")], "in.yaml: Mesh sg/m: ConfigMap sg/patch: data: the injector needs "
                                              "exactly one entry, found 2"),
    ([mesh(**REF), configmap(GO + "{{ if .AppPort }}x{{ end }}")],
     "in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml]: the Go template action '{{ if .AppPort }}' has no "
     "exact equivalent"),
    ([mesh(**REF), configmap(GO.replace(".MeshName", ".Pod.Name"))],
     "in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml]: the Go template action '{{ .Pod.Name }}' has no"),
    ([mesh(**REF), configmap(GO + "# {% raw %}\n")],
     "in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml]: the text '{%' is plain text to Go but starts a "
     "jinja2 tag"),
    ([mesh(**REF), configmap(GO + "volumes: [{name: v}]\n")],
     "in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml].volumes: the App Mesh injector ignored it, a "
     "sidecar template would add it: remove it"),
    ([mesh(**REF), configmap("containers: [{image: x}]")],
     "in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml]: the translated template does not render: "
     "containers[0] needs a name"),
])
def test_what_has_no_exact_equivalent_is_reported_with_its_field(docs: list[dict[str, Any]], expected: str) -> None:
    found = problems(*docs)
    assert any(p.startswith(expected) for p in found), found


def test_the_convert_command_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(yaml.safe_dump(mesh(**REF)))
    code, out, err = run_cli("convert", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}: Mesh sg/m: spec.awsAppMesh.sidecarPatchConfigMap: ConfigMap sg/patch")


@pytest.mark.parametrize("path", sorted(FOREIGN.glob("*.yaml")), ids=lambda p: p.name)
def test_the_samples_convert_into_policies_that_compile(path: Path) -> None:
    code, out, err = run_cli("convert", str(path))
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    for doc in docs:
        if doc["apiVersion"].startswith("policy.kcloudlabs.io/"):
            compile_policy(doc)
    assert {d["kind"] for d in docs} <= {"ClusterOverridePolicy"}
    meshes = [d for d in load_documents(path) if d["kind"] == "Mesh"]
    assert err.count("note: ") == len(meshes) - len(docs), err  # each mesh: a policy or a note


def injected(policies: list[dict[str, Any]], context: list[dict[str, Any]]) -> dict[str, Any]:
    pod = load_documents(EXAMPLE / "pod.yaml")[0]
    decision = apply.run(apply.Case(policies=policies, resource=pod, context=context))
    assert decision.allowed, decision.message
    return decision.object


def without_marker(obj: dict[str, Any], policy_name: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    annotations = obj["metadata"].pop("annotations")
    assert annotations == {marker_key(policy_name): f"ClusterOverridePolicy {policy_name}"}
    return obj


def test_the_example_injects_the_app_mesh_sidecar() -> None:
    policies = load_documents(EXAMPLE / "policy.yaml")
    obj = injected(policies, load_documents(EXAMPLE / "configmap.yaml"))
    assert obj == load_documents(EXAMPLE / "expected-pod.yaml")[0]
    envoy = obj["spec"]["containers"][-1]
    env = {e["name"]: e["value"] for e in envoy["env"]}
    assert env["APPMESH_VIRTUAL_NODE_NAME"] == "mesh/shop-mesh/virtualNode/cart"
    assert env["AWS_REGION"] == "us-east-1" and envoy["securityContext"] == {"runAsUser": 1337}
    init = obj["spec"]["initContainers"][0]
    assert init["securityContext"]["capabilities"]["add"] == ["NET_ADMIN"]
    assert {"name": "APPMESH_APP_PORTS", "value": "8080,8443,9100"} in init["env"]


def test_the_converted_supergloo_mesh_injects_the_same_sidecar() -> None:
    ours = injected(load_documents(EXAMPLE / "policy.yaml"), load_documents(EXAMPLE / "configmap.yaml"))
    converted = registry.converted(load_documents(EXAMPLE / "supergloo.yaml"), "supergloo.yaml")
    theirs = injected(converted, [])
    assert without_marker(theirs, "appmesh-supergloo-system-shop-mesh") == without_marker(ours, "appmesh-shop")


def test_apply_converts_the_mesh_on_load() -> None:
    code, out, err = run_cli("apply", "--policy", str(EXAMPLE / "supergloo.yaml"), "--resource",
                             str(EXAMPLE / "pod.yaml"), "-o", "json")
    assert code == 0, err
    assert '"mesh/shop-mesh/virtualNode/cart"' in out



@pytest.mark.parametrize(("app", "field"), [
    ({"injectionSelector": {"labelSelector": {"labelsToMatch": 1}}},
     "spec.awsAppMesh.injectionSelector.labelSelector.labelsToMatch: must map label keys to values"),
    ({"injectionSelector": {"namespaceSelector": {"namespaces": "a"}}},
     "spec.awsAppMesh.injectionSelector.namespaceSelector.namespaces: must be a list of namespace names"),
    ({"sidecarPatchConfigMap": "patch"}, "spec.awsAppMesh.sidecarPatchConfigMap: must name the ConfigMap's"),
])
def test_fields_of_the_wrong_type_are_reported(app: dict[str, Any], field: str) -> None:
    # Found by the fuzz suite (tests/fuzz/test_convert_fuzz.py): these raised instead.
    assert any(p.startswith(f"in.yaml: Mesh sg/m: {field}") for p in problems(mesh(**app)))


def test_a_template_entry_that_is_not_text_is_reported() -> None:
    bad = configmap(GO)
    bad["data"] = {"patch.yaml": 3}
    assert problems(mesh(**REF), bad) == ["in.yaml: Mesh sg/m: ConfigMap sg/patch: data[patch.yaml]: must be the "
                                          "template's text"]
