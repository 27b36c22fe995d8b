"""Label, field and resource selectors: matching and validation."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.api.core import LabelSelector
from kinitiras_py.api.schema import parse
from kinitiras_py.api.selectors import FieldSelector
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.engine.objects.selectors import (
    field_text,
    match_any,
    match_fields,
    match_labels,
    match_resource,
    selector_group,
    selector_problems,
    validate_field_selector,
    validate_label_selector,
)

LS = "spec.resourceSelectors[0].labelSelector"
FS = "spec.resourceSelectors[0].fieldSelector"

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-0",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/name": "web", "tier": "front", "empty": ""},
        "annotations": {"a1.b1/c1": "yes"},
    },
    "spec": {
        "nodeName": "node-1",
        "replicas": 3,
        "ratio": 1.5,
        "whole": 2.0,
        "paused": False,
        "nothing": None,
        "containers": [{"name": "app", "image": "nginx:1"}],
        "tags": ["a", "b"],
    },
}
DEPLOY: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"}},
    "spec": {"replicas": 2},
}
NODE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"zone": "a"}},
}


def messages(errors: list[Any]) -> list[str]:
    return [str(e) for e in errors]


# --- match_labels -------------------------------------------------------------------------

LABELS = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(("sel", "expected"), [
    (None, True),
    ({}, True),
    ({"matchLabels": {}}, True),
    ({"matchLabels": {"app": "web"}}, True),
    ({"matchLabels": {"app": "web", "tier": "front"}}, True),
    ({"matchLabels": {"app": "db"}}, False),
    ({"matchLabels": {"zone": "a"}}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, False),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In"}]}, False),
    # matchLabels AND matchExpressions
    ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
     False),
    ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ({"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, False),
    # malformed selectors match nothing
    ({"matchLabels": ["app"]}, False),
    ({"matchExpressions": {"key": "app"}}, False),
    ({"matchExpressions": ["app"]}, False),
    ({"matchExpressions": [{"operator": "DoesNotExist"}]}, False),
])
def test_match_labels(sel: dict[str, Any] | None, expected: bool) -> None:
    assert match_labels(sel, LABELS) is expected


def test_match_labels_without_labels() -> None:
    assert match_labels({}, None) is True
    not_in = {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}
    assert match_labels(not_in, None) is True
    assert match_labels({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}) is True
    assert match_labels({"matchLabels": {"a": "x"}}, None) is False
    assert match_labels({"matchLabels": {"a": ""}}, {"a": ""}) is True


# --- validate_label_selector --------------------------------------------------------------


def test_valid_label_selectors() -> None:
    assert validate_label_selector({}, LS) == []
    assert validate_label_selector({
        "matchLabels": {"app.kubernetes.io/name": "web", "tier": "", "a_b.c-d": "A.b_c-9"},
        "matchExpressions": [
            {"key": "example.com/Tier", "operator": "In", "values": ["front", "back"]},
            {"key": "zone", "operator": "NotIn", "values": [""]},
            {"key": "x", "operator": "Exists"},
            {"key": "y", "operator": "DoesNotExist", "values": []},
        ],
    }, LS) == []
    assert validate_label_selector({"matchLabels": {"a" * 63: "b" * 63, f"{'p' * 253}/n": "v"}}, LS) == []


CHARSET = ("must consist of alphanumeric characters, '-', '_' or '.', "
           "and must start and end with an alphanumeric character")
PREFIX = "prefix part must be a lowercase DNS subdomain of at most 253 characters (e.g. 'example.com')"


@pytest.mark.parametrize(("key", "problem"), [
    ("bad key", f"name part {CHARSET}"),
    ("-a", f"name part {CHARSET}"),
    ("a-", f"name part {CHARSET}"),
    ("", "name part must not be empty"),
    ("x" * 64, "name part must be no more than 63 characters"),
    ("example.com/", "name part must not be empty"),
    ("/name", "prefix part must not be empty"),
    ("Example.com/name", PREFIX),
    ("a..b/name", PREFIX),
    ("-a.com/name", PREFIX),
    (f"{'p' * 254}/n", PREFIX),
    ("a/b/c", "must be a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
])
def test_invalid_label_keys(key: str, problem: str) -> None:
    assert messages(validate_label_selector({"matchLabels": {key: "v"}}, LS)) == [
        f"{LS}.matchLabels: invalid label key {key!r}: {problem}",
    ]
    exprs = {"matchExpressions": [{"key": key, "operator": "Exists"}]}
    assert messages(validate_label_selector(exprs, LS)) == [
        f"{LS}.matchExpressions[0].key: invalid label key {key!r}: {problem}",
    ]


@pytest.mark.parametrize(("value", "problem"), [
    ("bad value", CHARSET),
    ("-a", CHARSET),
    ("v" * 64, "must be no more than 63 characters"),
    (1, "must be a string, got int"),
    (True, "must be a string, got bool"),
])
def test_invalid_label_values(value: Any, problem: str) -> None:
    assert messages(validate_label_selector({"matchLabels": {"app": value}}, LS)) == [
        f"{LS}.matchLabels: invalid value {value!r} for label 'app': {problem}",
    ]
    exprs = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["ok", value]}]}
    assert messages(validate_label_selector(exprs, LS)) == [
        f"{LS}.matchExpressions[0].values[1]: invalid label value {value!r}: {problem}",
    ]


def test_label_selector_operator_errors() -> None:
    sel = {"matchExpressions": [
        {"key": "a", "operator": "In", "values": ["x"]},
        {"key": "a", "operator": "In", "values": []},
        {"key": "a", "operator": "NotIn"},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "DoesNotExist", "values": ["x"]},
        {"key": "a", "operator": "Gt", "values": ["1"]},
        {"key": "a"},
        {"key": "a", "operator": "In", "values": "x"},
        "a",
    ]}
    assert messages(validate_label_selector(sel, LS)) == [
        f"{LS}.matchExpressions[1].values: must be non-empty when operator is In",
        f"{LS}.matchExpressions[2].values: must be non-empty when operator is NotIn",
        f"{LS}.matchExpressions[3].values: must be empty when operator is Exists",
        f"{LS}.matchExpressions[4].values: must be empty when operator is DoesNotExist",
        f"{LS}.matchExpressions[5].operator: unknown operator 'Gt' (want In, NotIn, Exists or DoesNotExist)",
        f"{LS}.matchExpressions[6].operator: unknown operator None (want In, NotIn, Exists or DoesNotExist)",
        f"{LS}.matchExpressions[7].values: must be a list",
        f"{LS}.matchExpressions[8]: must be an object",
    ]


def test_label_selector_shape_errors() -> None:
    assert messages(validate_label_selector("app=web", LS)) == [f"{LS}: must be an object"]  # type: ignore[arg-type]
    assert messages(validate_label_selector({"matchLabels": ["a"], "matchExpressions": {}}, LS)) == [
        f"{LS}.matchLabels: must be an object",
        f"{LS}.matchExpressions: must be a list",
    ]
    assert messages(validate_label_selector({"matchExpressions": [{"operator": "Exists"}]}, LS)) == [
        f"{LS}.matchExpressions[0].key: invalid label key None: must be a string, got NoneType",
    ]


# --- field selectors ----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    ("x", "x"), (3, "3"), (1.5, "1.5"), (2.0, "2.0"), (True, "true"), (False, "false"),
    (None, "null"), (2**70, "1180591620717411303424"), ({"b": 1, "a": [1]}, '{"a":[1],"b":1}'),
])
def test_field_text(value: Any, text: str) -> None:
    assert field_text(value) == text


@pytest.mark.parametrize(("fields", "expected"), [
    ({"spec.nodeName": "node-1"}, True),
    ({"spec.nodeName": "node-2"}, False),
    ({"spec.replicas": "3"}, True),
    ({"spec.replicas": 3}, True),
    ({"spec.ratio": "1.5"}, True),
    ({"spec.whole": "2.0"}, True),
    ({"spec.whole": "2"}, False),
    ({"spec.paused": "false"}, True),
    ({"spec.paused": False}, True),
    ({"spec.paused": "False"}, False),
    ({"spec.containers[0].image": "nginx:1"}, True),
    ({"/spec/containers/0/image": "nginx:1"}, True),
    ({"metadata.labels.app.kubernetes.io/name": "web"}, True),
    ({"metadata.labels['app.kubernetes.io/name']": "web"}, True),
    ({"metadata.annotations.a1.b1/c1": "yes"}, True),
    ({"metadata.labels.empty": ""}, True),
    ({"spec.missing": ""}, False),
    ({"spec.nothing": "null"}, False),
    ({"spec.tags": '["a","b"]'}, True),
    ({"spec.nodeName": "node-1", "spec.replicas": "4"}, False),
    ({"a..b": "x"}, False),
])
def test_match_fields_match_fields(fields: dict[str, Any], expected: bool) -> None:
    assert match_fields({"matchFields": fields}, POD) is expected


@pytest.mark.parametrize(("expr", "expected"), [
    ({"field": "spec.nodeName", "operator": "In", "value": ["node-1", "node-2"]}, True),
    ({"field": "spec.nodeName", "operator": "In", "value": ["node-2"]}, False),
    ({"field": "spec.missing", "operator": "In", "value": ["x"]}, False),
    ({"field": "spec.replicas", "operator": "In", "value": [3]}, True),
    ({"field": "spec.paused", "operator": "In", "value": ["false"]}, True),
    ({"field": "spec.nodeName", "operator": "NotIn", "value": ["node-2"]}, True),
    ({"field": "spec.nodeName", "operator": "NotIn", "value": ["node-1"]}, False),
    ({"field": "spec.missing", "operator": "NotIn", "value": ["x"]}, True),
    ({"field": "spec.nothing", "operator": "NotIn", "value": ["null"]}, True),
    ({"field": "spec.nodeName", "operator": "Exists"}, True),
    ({"field": "spec.missing", "operator": "Exists"}, False),
    ({"field": "spec.nothing", "operator": "Exists"}, False),
    ({"field": "spec.paused", "operator": "Exists"}, True),
    ({"field": "spec.missing", "operator": "DoesNotExist"}, True),
    ({"field": "spec.nothing", "operator": "DoesNotExist"}, True),
    ({"field": "spec.nodeName", "operator": "DoesNotExist"}, False),
    ({"field": "metadata.labels.app.kubernetes.io/name", "operator": "In", "value": ["web"]}, True),
    ({"field": "spec.nodeName", "operator": "Gt", "value": ["a"]}, False),
    ({"field": "spec.nodeName", "operator": "In"}, False),
    ({"field": "a[", "operator": "DoesNotExist"}, False),
    ({"operator": "DoesNotExist"}, False),
])
def test_match_fields_expressions(expr: dict[str, Any], expected: bool) -> None:
    assert match_fields({"matchExpressions": [expr]}, POD) is expected


def test_match_fields_combines_with_and() -> None:
    assert match_fields(None, POD) is True
    assert match_fields({}, POD) is True
    sel = {"matchFields": {"spec.nodeName": "node-1"},
           "matchExpressions": [{"field": "spec.replicas", "operator": "In", "value": ["3"]}]}
    assert match_fields(sel, POD) is True
    sel["matchExpressions"] = [{"field": "spec.replicas", "operator": "In", "value": ["4"]}]
    assert match_fields(sel, POD) is False
    assert match_fields({"matchFields": "spec.nodeName=node-1"}, POD) is False
    assert match_fields("spec.nodeName=node-1", POD) is False  # type: ignore[arg-type]
    assert match_labels("app=web", LABELS) is False  # type: ignore[arg-type]


def test_valid_field_selector() -> None:
    assert validate_field_selector({}, FS) == []
    assert validate_field_selector({
        "matchFields": {"spec.nodeName": "node-1", "spec.replicas": 3, "metadata.labels.a.b/c": True},
        "matchExpressions": [
            {"field": "spec.containers[0].image", "operator": "In", "value": ["nginx", 1]},
            {"field": "/spec/x", "operator": "NotIn", "value": ["a"]},
            {"field": "spec.x", "operator": "Exists"},
            {"field": "spec.y", "operator": "DoesNotExist", "value": []},
        ],
    }, FS) == []


def test_field_selector_errors() -> None:
    sel = {
        "matchFields": {"a..b": "x", "spec.c": None, "spec.d": ["x"]},
        "matchExpressions": [
            {"field": "a[", "operator": "In", "value": ["x"]},
            {"field": "a", "operator": "Exists", "value": ["x"]},
            {"field": "a", "operator": "NotIn"},
            {"field": "a", "operator": "In", "value": []},
            {"field": "a", "operator": "Gt", "value": ["1"]},
            {"operator": "In", "value": [{}]},
            {"field": 3, "operator": "In", "value": "x"},
            None,
        ],
    }
    assert messages(validate_field_selector(sel, FS)) == [
        f"{FS}.matchFields: invalid field path 'a..b': empty key at offset 2",
        f"{FS}.matchFields: value for 'spec.c' must be a string, number or boolean",
        f"{FS}.matchFields: value for 'spec.d' must be a string, number or boolean",
        f"{FS}.matchExpressions[0].field: invalid field path 'a[': unclosed '[' at offset 1",
        f"{FS}.matchExpressions[1].value: must be empty when operator is Exists",
        f"{FS}.matchExpressions[2].value: must be non-empty when operator is NotIn",
        f"{FS}.matchExpressions[3].value: must be non-empty when operator is In",
        f"{FS}.matchExpressions[4].operator: unknown operator 'Gt' (want In, NotIn, Exists or DoesNotExist)",
        f"{FS}.matchExpressions[5].field: a field path is required",
        f"{FS}.matchExpressions[5].value[0]: must be a string, number or boolean",
        f"{FS}.matchExpressions[6].field: field path must be a string, got int",
        f"{FS}.matchExpressions[6].value: must be a list",
        f"{FS}.matchExpressions[7]: must be an object",
    ]


def test_field_selector_shape_errors() -> None:
    assert messages(validate_field_selector([], FS)) == [f"{FS}: must be an object"]  # type: ignore[arg-type]
    assert messages(validate_field_selector({"matchFields": "a=b", "matchExpressions": "x"}, FS)) == [
        f"{FS}.matchFields: must be an object",
        f"{FS}.matchExpressions: must be a list",
    ]


# --- resource selectors -------------------------------------------------------------------


@pytest.mark.parametrize(("api_version", "group"), [
    ("*", None), ("", None), ("v1", ""), ("v2beta1", ""), ("v1alpha3", ""),
    ("apps/v1", "apps"), ("apps/*", "apps"), ("apps", "apps"), ("networking.k8s.io", "networking.k8s.io"),
    ("v1beta", "v1beta"),
])
def test_selector_group(api_version: str, group: str | None) -> None:
    assert selector_group(api_version) == group


@pytest.mark.parametrize(("api_version", "obj_version", "expected"), [
    ("v1", "v1", True),
    ("v1", "apps/v1", False),
    ("v2", "v1", False),
    ("apps/v1", "apps/v1", True),
    ("apps/v1", "apps/v1beta1", False),
    ("apps/*", "apps/v1beta2", True),
    ("apps/*", "v1", False),
    ("apps/*", "batch/v1", False),
    ("apps", "apps/v1", True),
    ("apps", "apps/v2alpha1", True),
    ("apps", "v1", False),
    ("apps", "appsx/v1", False),
    ("*", "batch/v1", True),
    ("*", "v1", True),
])
def test_match_resource_api_version(api_version: str, obj_version: str, expected: bool) -> None:
    obj = {"apiVersion": obj_version, "kind": "Thing", "metadata": {"name": "t"}}
    assert match_resource({"apiVersion": api_version, "kind": "Thing"}, obj) is expected


@pytest.mark.parametrize(("sel", "expected"), [
    ({"apiVersion": "v1", "kind": "Pod"}, True),
    ({"apiVersion": "v1", "kind": "pod"}, False),
    ({"apiVersion": "v1", "kind": "Service"}, False),
    ({"apiVersion": "v1", "kind": "*"}, True),
    ({"kind": "Pod"}, True),
    ({}, True),
    ({"apiVersion": "v1", "kind": "Pod", "namespace": "team-a"}, True),
    ({"apiVersion": "v1", "kind": "Pod", "namespace": "team-b"}, False),
    ({"apiVersion": "v1", "kind": "Pod", "name": "web-0"}, True),
    ({"apiVersion": "v1", "kind": "Pod", "name": "web-1"}, False),
    # A name decides alone: label and field selectors are ignored.
    ({"apiVersion": "v1", "kind": "Pod", "name": "web-0", "labelSelector": {"matchLabels": {"tier": "back"}},
      "fieldSelector": {"matchFields": {"spec.nodeName": "other"}}}, True),
    ({"apiVersion": "v1", "kind": "Pod", "namespace": "team-b", "name": "web-0"}, False),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"tier": "front"}}}, True),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"tier": "back"}}}, False),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {}}, True),
    ({"kind": "Pod", "fieldSelector": {"matchFields": {"spec.nodeName": "node-1"}}}, True),
    ({"kind": "Pod", "fieldSelector": {"matchFields": {"spec.nodeName": "node-2"}}}, False),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"tier": "front"}},
      "fieldSelector": {"matchFields": {"spec.nodeName": "node-2"}}}, False),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"tier": "back"}},
      "fieldSelector": {"matchFields": {"spec.nodeName": "node-1"}}}, False),
    ({"apiVersion": "v1", "kind": "Pod", "labelSelector": {"matchLabels": {"tier": "front"}},
      "fieldSelector": {"matchFields": {"spec.nodeName": "node-1"}}}, True),
])
def test_match_resource(sel: dict[str, Any], expected: bool) -> None:
    assert match_resource(sel, POD) is expected


def test_cluster_scoped_objects_never_match_a_namespace() -> None:
    assert match_resource({"apiVersion": "v1", "kind": "Node"}, NODE) is True
    assert match_resource({"apiVersion": "v1", "kind": "Node", "namespace": "team-a"}, NODE) is False
    assert match_resource({"apiVersion": "v1", "kind": "Node", "namespace": ""}, NODE) is True


def test_match_any() -> None:
    assert match_any(None, POD) is True
    assert match_any([], POD) is True
    assert match_any([{"apiVersion": "apps/v1", "kind": "Deployment"}], POD) is False
    selectors = [{"apiVersion": "apps/v1", "kind": "Deployment"}, {"apiVersion": "v1", "kind": "Pod"}]
    assert match_any(selectors, POD) is True
    assert match_any(selectors, DEPLOY) is True
    assert match_any(selectors, NODE) is False


# --- from the models the compiler reads ----------------------------------------------------

MODEL_LABEL_SELECTORS: list[dict[str, Any]] = [
    {},
    {"matchLabels": {"bad key!": "v", "ok": "-bad-"}},
    {"matchExpressions": [{"key": "a/b/c", "operator": "In", "values": []},
                          {"key": "x", "operator": "Exists", "values": ["y"]},
                          {"key": "z", "operator": "NotIn", "values": ["ok", "not ok"]}]},
]
MODEL_FIELD_SELECTORS: list[dict[str, Any]] = [
    {},
    {"matchFields": {"a..b": "x", "spec.c": "y"}},
    {"matchExpressions": [{"field": "a[", "operator": "In", "value": ["x"]},
                          {"field": "spec.x", "operator": "DoesNotExist", "value": ["y"]},
                          {"field": "spec.y", "operator": "In"}]},
]


def _said(errors: list[PolicyError]) -> list[tuple[str, str]]:
    return [(e.path, e.reason) for e in errors]


@pytest.mark.parametrize("written", MODEL_LABEL_SELECTORS)
def test_a_label_selector_model_is_checked_as_written(written: dict[str, Any]) -> None:
    assert (_said(selector_problems(parse(LabelSelector, written), LS))
            == _said(validate_label_selector(written, LS)))


@pytest.mark.parametrize("written", MODEL_FIELD_SELECTORS)
def test_a_field_selector_model_is_checked_as_written(written: dict[str, Any]) -> None:
    assert (_said(selector_problems(parse(FieldSelector, written), FS))
            == _said(validate_field_selector(written, FS)))


def test_the_models_problems_name_each_field() -> None:
    label = selector_problems(parse(LabelSelector, MODEL_LABEL_SELECTORS[2]), LS)
    field = selector_problems(parse(FieldSelector, MODEL_FIELD_SELECTORS[2]), FS)
    assert [e.path for e in label] == [f"{LS}.matchExpressions[0].key", f"{LS}.matchExpressions[0].values",
                                       f"{LS}.matchExpressions[1].values", f"{LS}.matchExpressions[2].values[1]"]
    assert [e.path for e in field] == [f"{FS}.matchExpressions[0].field", f"{FS}.matchExpressions[1].value",
                                       f"{FS}.matchExpressions[2].value"]
