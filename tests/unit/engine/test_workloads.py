"""Where the pod spec lives for each pod-bearing kind, and container enumeration."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.engine.objects import workloads

# (apiVersion, kind, expected path, expected pointer)
POD_BEARING = [
    ("v1", "Pod", ("spec",), "/spec"),
    ("apps/v1", "Deployment", ("spec", "template", "spec"), "/spec/template/spec"),
    ("apps/v1", "StatefulSet", ("spec", "template", "spec"), "/spec/template/spec"),
    ("apps/v1", "DaemonSet", ("spec", "template", "spec"), "/spec/template/spec"),
    ("apps/v1", "ReplicaSet", ("spec", "template", "spec"), "/spec/template/spec"),
    ("v1", "ReplicationController", ("spec", "template", "spec"), "/spec/template/spec"),
    ("batch/v1", "Job", ("spec", "template", "spec"), "/spec/template/spec"),
    ("v1", "PodTemplate", ("template", "spec"), "/template/spec"),
    ("batch/v1", "CronJob", ("spec", "jobTemplate", "spec", "template", "spec"),
     "/spec/jobTemplate/spec/template/spec"),
    ("batch/v1beta1", "CronJob", ("spec", "jobTemplate", "spec", "template", "spec"),
     "/spec/jobTemplate/spec/template/spec"),
    ("extensions/v1beta1", "Deployment", ("spec", "template", "spec"), "/spec/template/spec"),
    ("extensions/v1beta1", "DaemonSet", ("spec", "template", "spec"), "/spec/template/spec"),
    ("apps/v1beta2", "StatefulSet", ("spec", "template", "spec"), "/spec/template/spec"),
]

NOT_POD_BEARING = [
    {"apiVersion": "v1", "kind": "ConfigMap"},
    {"apiVersion": "v1", "kind": "Service"},
    {"apiVersion": "example.com/v1", "kind": "Deployment"},  # a CRD named like a built-in
    {"apiVersion": "apps/v1", "kind": "Pod"},
    {"apiVersion": "v1", "kind": "Job"},
    {"apiVersion": "extensions/v1beta1", "kind": "StatefulSet"},
    {"apiVersion": "v1"},
    {"apiVersion": "v1", "kind": 3},
    {"kind": "Deployment"},
    {},
]


def nest(path: tuple[str, ...], leaf: Any) -> Any:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


def workload(api_version: str, kind: str, path: tuple[str, ...], spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, **nest(path, spec)}


@pytest.mark.parametrize(("api_version", "kind", "path", "pointer"), POD_BEARING)
def test_pod_bearing_kinds(api_version: str, kind: str, path: tuple[str, ...], pointer: str) -> None:
    spec = {"containers": [{"name": "app"}]}
    obj = workload(api_version, kind, path, spec)
    assert workloads.pod_spec_path(obj) == path
    assert workloads.is_pod_bearing(obj) is True
    assert workloads.pod_spec_pointer(obj) == pointer
    assert workloads.pod_spec(obj) is spec


@pytest.mark.parametrize("obj", NOT_POD_BEARING)
def test_kinds_without_pod_spec(obj: dict[str, Any]) -> None:
    assert workloads.pod_spec_path(obj) is None
    assert workloads.is_pod_bearing(obj) is False
    assert workloads.pod_spec_pointer(obj) is None
    assert workloads.pod_spec(obj) is None
    assert workloads.pod_spec(obj, create=True) is None
    assert workloads.containers(obj) == []


def test_pod_template_paths_table() -> None:
    assert workloads.POD_TEMPLATE_PATHS == {
        "Pod": ("spec",),
        "Deployment": ("spec", "template", "spec"),
        "StatefulSet": ("spec", "template", "spec"),
        "DaemonSet": ("spec", "template", "spec"),
        "ReplicaSet": ("spec", "template", "spec"),
        "ReplicationController": ("spec", "template", "spec"),
        "Job": ("spec", "template", "spec"),
        "PodTemplate": ("template", "spec"),
        "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    }


@pytest.mark.parametrize("obj", [
    {"apiVersion": "apps/v1", "kind": "Deployment"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "spec": None},
    {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": None}}},
])
def test_missing_levels_give_none_or_are_created(obj: dict[str, Any]) -> None:
    assert workloads.pod_spec(obj) is None
    created = workloads.pod_spec(obj, create=True)
    assert created == {}
    assert obj["spec"]["template"]["spec"] is created


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Pod", "spec": "not an object"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": []}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": 1}}},
])
def test_non_object_levels_give_none(obj: dict[str, Any]) -> None:
    before = repr(obj)
    assert workloads.pod_spec(obj) is None
    assert workloads.pod_spec(obj, create=True) is None
    assert repr(obj) == before
    assert workloads.containers(obj) == []


def test_pod_spec_pointer_does_not_need_the_spec() -> None:
    assert workloads.pod_spec_pointer({"apiVersion": "batch/v1", "kind": "Job"}) == "/spec/template/spec"


SPEC: dict[str, Any] = {
    "initContainers": [{"name": "init-a"}, {"name": "init-b"}],
    "containers": [{"name": "app"}, "not a container", {"name": "sidecar"}],
    "ephemeralContainers": [{"name": "debug"}],
}


@pytest.mark.parametrize(("api_version", "kind", "path", "pointer"), POD_BEARING)
def test_containers_every_kind(api_version: str, kind: str, path: tuple[str, ...], pointer: str) -> None:
    obj = workload(api_version, kind, path, SPEC)
    assert workloads.containers(obj) == [
        ("containers", 0, {"name": "app"}),
        ("containers", 2, {"name": "sidecar"}),
        ("initContainers", 0, {"name": "init-a"}),
        ("initContainers", 1, {"name": "init-b"}),
    ]


def test_containers_are_the_dicts_inside_the_object() -> None:
    obj = workload("v1", "Pod", ("spec",), SPEC)
    found = workloads.containers(obj)
    assert found[0][2] is SPEC["containers"][0]
    assert found[2][2] is SPEC["initContainers"][0]


def test_containers_without_init() -> None:
    obj = workload("apps/v1", "Deployment", ("spec", "template", "spec"), SPEC)
    assert workloads.containers(obj, include_init=False) == [
        ("containers", 0, {"name": "app"}),
        ("containers", 2, {"name": "sidecar"}),
    ]


def test_containers_by_name() -> None:
    obj = workload("batch/v1", "Job", ("spec", "template", "spec"), SPEC)
    assert workloads.containers(obj, names=["sidecar", "init-b", "debug", "absent"]) == [
        ("containers", 2, {"name": "sidecar"}),
        ("initContainers", 1, {"name": "init-b"}),
    ]
    assert workloads.containers(obj, include_init=False, names=["init-a"]) == []
    assert workloads.containers(obj, names=[]) == []


@pytest.mark.parametrize("spec", [
    {},
    {"containers": None},
    {"containers": "app", "initContainers": {"name": "x"}},
])
def test_containers_tolerates_missing_or_malformed_lists(spec: dict[str, Any]) -> None:
    assert workloads.containers({"apiVersion": "v1", "kind": "Pod", "spec": spec}) == []
