"""Fuzz: SuperGloo Mesh documents with any field type-confused, against the App Mesh converter.

Invariant: converting either gives policies that the policy checker accepts or refuses by field,
or reports problems that each name a field; it never raises.
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
    app = {"region": draw(maybe(st.just("us-east-1"))), "enableAutoInject": draw(maybe(st.just(True))),
           "virtualNodeLabel": draw(maybe(st.sampled_from(["vn", "app.kubernetes.io/name", "bad label"]))),
           "injectionSelector": selector}
    if draw(st.booleans()):
        app["sidecarPatchConfigMap"] = draw(maybe(st.just({"name": "p", "namespace": "sg"})))
    mesh = {"apiVersion": "supergloo.solo.io/v1", "kind": "Mesh",
            "metadata": draw(maybe(st.just({"name": "m", "namespace": "sg"}))),
            "spec": draw(maybe(st.just({"awsAppMesh": draw(maybe(st.just(app)))})))}
    data = draw(maybe(st.dictionaries(st.sampled_from(["patch.yaml", "other"]), st.sampled_from(GO) | JUNK,
                                      min_size=1, max_size=2)))
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "namespace": "sg"}, "data": data}
    return [mesh, configmap] if draw(st.booleans()) else [mesh]


@given(meshes())
def test_meshes_convert_or_report_by_field(docs: list[Any]) -> None:
    result = registry.convert_all(docs, "in.yaml")
    for problem in result.problems:
        assert problem.field and problem.reason, problem
    if not result.problems:
        for doc in result.documents:
            if doc.get("kind") == "ClusterOverridePolicy":
                check(doc)
