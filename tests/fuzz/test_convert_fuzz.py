"""Fuzz: SuperGloo Mesh documents with any field type-confused, against the App Mesh converter,
and PodPresets with any name and resourceVersion, against the PodPreset converter.

Invariant: converting either gives policies that the policy checker accepts or refuses by field,
reports problems that each name a field, or leaves a mesh the injector ignores out with a note;
it never raises.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.convert import registry
from tests.fuzz.test_policies_fuzz import JUNK, check

GO = ['containers: [{name: envoy, image: e, env: [{name: N, value: "{{ .MeshName }}/{{ .VirtualNodeName }}"}]}]',
      'initContainers: [{name: i, image: "{{- .AwsRegion -}}", env: [{name: P, value: "{{.AppPort}}"}]}]',
      "containers: [{name: a, image: '{{ if .X }}'}]", "volumes: [{name: v}]", "{% x %}", "", "- a"]


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually ``strategy``, now and then anything else."""
    return st.integers(0, 5).flatmap(lambda n: JUNK if n == 0 else strategy)


@st.composite
def meshes(draw: st.DrawFn) -> list[Any]:
    selector = draw(st.sampled_from([
        {"labelSelector": {"labelsToMatch": draw(maybe(st.dictionaries(st.sampled_from(["app", "a/b"]),
                                                                       st.sampled_from(["x", ""]), max_size=2)))}},
        {"namespaceSelector": {"namespaces": draw(maybe(st.lists(st.sampled_from(["a", "b", ""]), max_size=2)))}},
        {"upstreamSelector": {}}, {}, draw(JUNK)]))
    app = {"region": draw(maybe(st.just("us-east-1"))),
           "enableAutoInject": draw(maybe(st.sampled_from([True, True, False, None]))),
           "virtualNodeLabel": draw(maybe(st.sampled_from(["vn", "app.kubernetes.io/name", "bad label"]))),
           "injectionSelector": selector}
    if draw(st.booleans()):
        app["sidecarPatchConfigMap"] = draw(maybe(st.just({"name": "p", "namespace": "sg"})))
    mesh = {"apiVersion": "supergloo.solo.io/v1", "kind": "Mesh",
            "metadata": draw(maybe(st.just({"name": "m", "namespace": "sg"}))),
            "spec": draw(maybe(st.sampled_from([{"awsAppMesh": draw(maybe(st.just(app)))},
                                                {"istio": {"installationNamespace": "istio-system"}}, {}])))}
    data = draw(maybe(st.dictionaries(st.sampled_from(["patch.yaml", "other"]), st.sampled_from(GO) | JUNK,
                                      min_size=1, max_size=2)))
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": "sg"}, "data": data}
    return [mesh, configmap] if draw(st.booleans()) else [mesh]


@given(meshes())
def test_meshes_convert_or_report_by_field(docs: list[Any]) -> None:
    result = registry.convert_all(docs, "in.yaml")
    for problem in result.problems:
        assert problem.field and problem.reason, problem
    for note in result.notes:  # a mesh left out is named, and never also converted or reported
        assert note.startswith("in.yaml: Mesh ") and "skipped" in note, note
        assert not result.problems and not any(d.get("kind") == "ClusterOverridePolicy" for d in result.documents)
    if not result.problems:
        for doc in result.documents:
            if doc.get("kind") == "ClusterOverridePolicy":
                check(doc)


@st.composite
def podpresets(draw: st.DrawFn) -> Any:
    """PodPresets whose name and resourceVersion (what the converted marker is made of) are any
    text, length or type."""
    meta = {"name": draw(maybe(st.sampled_from(["db", "p" * 53, "p" * 54, "a.b", "A", ""]) | st.text(max_size=70))),
            "namespace": "shop"}
    if draw(st.booleans()):
        meta["resourceVersion"] = draw(maybe(st.sampled_from(["4711", "", "0"]) | st.text(max_size=8)))
    return {"apiVersion": "settings.k8s.io/v1alpha1", "kind": "PodPreset", "metadata": draw(maybe(st.just(meta))),
            "spec": {"env": [{"name": "DB_HOST", "value": "db"}]}}


@given(podpresets())
def test_podpresets_convert_with_their_marker_or_report_by_field(doc: Any) -> None:
    result = registry.convert_all([doc], "in.yaml")
    for problem in result.problems:
        assert problem.field and problem.reason, problem
    for policy in result.documents:
        check(policy)
        marker = policy["spec"]["overrideRules"][0]["overriders"]["template"]["inject"]["marker"]
        assert marker["key"] == f"podpreset.admission.kubernetes.io/podpreset-{doc['metadata']['name']}"
        assert marker.get("value", "") == (doc["metadata"].get("resourceVersion") or "")
