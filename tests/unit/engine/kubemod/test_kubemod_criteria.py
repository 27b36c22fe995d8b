"""KubeMod match criteria rendered to CEL: every select operator and every match field, with
KubeMod's semantics (a boolean select decides alone, undefined is no match unless negated,
non-strings compare in Go's printed form, regexes are unanchored)."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.schema import parse
from kinitiras_py.base.errors import CelEvalError, PolicyError
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import criteria
from tests.compiling import render_criterion

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "nginx", "tier": "front"},
                 "annotations": {"inject": "true", "a/b": "slash"}},
    "spec": {
        "replicas": 3, "paused": False,
        "byNumber": {"1": "one"}, "minReadySeconds": 1000000, "ratio": 1.5, "nothing": None,
        "externalIPs": ["10.0.0.1", "10.0.0.2"],
        "template": {"spec": {
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {"name": "app", "image": "nginx:1.14.2", "securityContext": {},
                 "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 8080}]},
                {"name": "side", "image": "busybox", "ports": [{"containerPort": 9090}]},
            ]}}},
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"color": "blue"}}}


def matches(condition: dict[str, Any], obj: dict[str, Any] = DEPLOYMENT) -> Any:
    program = cel.compile_program(render_criterion(condition, "spec.matchConditions[0]"))
    return program.evaluate({"object": obj, "namespaceObject": NAMESPACE})


CASES = [
    # plain paths, bracket keys, indexes
    ({"select": "$.kind", "matchValue": "Deployment"}, True),
    ({"select": "$.kind", "matchValue": "deployment"}, False),  # case-sensitive
    ({"select": "$['kind']", "matchValue": "Deployment"}, True),
    ({"select": '$.metadata.annotations["a/b"]', "matchValue": "slash"}, True),
    ({"select": "$.spec.template.spec.containers[1].name", "matchValue": "side"}, True),
    ({"select": "$.spec.template.spec.containers[2].name"}, False),  # out of range: undefined
    ({"select": "$.spec.template.spec.containers[-1].name"}, False),  # KubeMod: an error, no match
    ({"select": "$.metadata.labels[0]"}, False),
    ({"select": "$.spec.byNumber[1]", "matchValue": "one"}, True),  # [n] of a map: its key "n"
    ({"select": "$.spec.externalIPs[0, 1]", "matchFor": "All", "matchRegex": "^10\\."}, True),
    ({"select": '$.metadata.labels["app", "nope"]', "matchFor": "All", "matchValue": "nginx"}, True),
    # wildcards, filters, recursive descent
    ({"select": "$.spec.template.spec.containers[*].name", "matchValue": "side"}, True),
    ({"select": "$.metadata.labels.*", "matchValue": "front"}, True),
    ({"select": "$.spec.template.spec.containers[*].ports[*].containerPort", "matchValue": "9090"}, True),
    ({"select": "$.spec.template.spec.containers[? @.image =~ 'nginx'].ports[? @.containerPort == 80]"}, True),
    ({"select": "$.spec.template.spec.containers[? @.image =~ 'nginx'].ports[? @.containerPort == 9090]"}, False),
    ({"select": "$.spec.template.spec.containers[? @.name != 'app'].name", "matchValue": "side"}, True),
    ({"select": "$.spec.template.spec.containers[*].ports[? @.containerPort > 8000 && @.containerPort <= 8080]"},
     True),
    ({"select": "$.spec.template.spec.containers[*].ports[? @.containerPort < 80 || @.containerPort >= 9091]"},
     False),
    ({"select": "$.spec.template.spec.containers[? !(@.name == 'app')].name", "matchValue": "side"}, True),
    ({"select": "$.spec.template.spec.containers[? @.image !~ 'nginx'].name", "matchValue": "side"}, True),
    ({"select": "$.spec.template.spec.containers[? isEmpty(@.securityContext)].name", "matchFor": "All",
      "matchValues": ["app", "side"]}, True),
    ({"select": "$.spec.template.spec.containers[? isDefined(@.securityContext) && isEmpty(@.securityContext)]"
                ".name", "matchFor": "All", "matchValue": "app"}, True),
    ({"select": "$.spec.template.spec.containers[? isUndefined(@.securityContext)].name", "matchValue": "side"},
     True),
    ({"select": "$.spec.template.spec.containers[? isNotEmpty(@.ports) && length(@.ports) == 2].name",
      "matchValue": "app"}, True),
    ({"select": "$.spec.template.spec.containers[? @.ports[0].name == 'http'].name", "matchValue": "app"}, True),
    ({"select": "$.spec.template.spec.containers[? @.ports[0].containerPort == $.spec.replicas]"}, False),
    ({"select": "$..image", "matchValue": "busybox"}, True),
    ({"select": "$..image", "matchValue": "nope"}, False),
    ({"select": "$.spec..name", "matchValue": "http"}, False),  # 7 levels below spec: beyond the unrolling
    ({"select": "$.metadata..app", "matchValue": "nginx"}, True),
    # boolean selects decide by themselves
    ({"select": "$.spec.template.spec.securityContext.runAsNonRoot == true"}, True),
    ({"select": "$.spec.template.spec.securityContext.runAsNonRoot == true", "negate": True}, False),
    ({"select": "$.spec.template.spec.securityContext.runAsNonRoot", "matchValue": "ignored"}, True),
    ({"select": "$.spec.paused"}, False),
    ({"select": "$.spec.paused", "negate": True}, True),
    ({"select": "length($.spec.externalIPs) > 0"}, True),
    ({"select": "length($.metadata.name) == 3 && length($.metadata.labels) == 2"}, True),
    ({"select": "length($.missing) == 0 && length($.spec.nothing) == 0"}, True),
    ({"select": "length($.spec.replicas) == 0"}, False),  # a number has no length: an error in KubeMod
    ({"select": "isEmpty($.missing) && isEmpty($.spec.nothing) && isEmpty($.spec.template.spec.containers[0]"
                ".securityContext)"}, True),
    ({"select": "isNotEmpty($.metadata.labels) && !isNotEmpty($.missing)"}, True),
    ({"select": "isDefined($.spec.nothing) && isUndefined($.spec.missing)"}, True),
    ({"select": "$.spec.replicas > 2.5 && $.spec.ratio < 2 && $.spec.ratio >= 1.5"}, True),
    ({"select": "$.kind > 'A' && $.kind < 'E'"}, True),
    ({"select": "$.kind > 2"}, True),  # no number on one side: both printed and compared as text ("D" > "2")
    ({"select": "$.metadata.name =~ '^w'"}, True),
    ({"select": "$.metadata.name =~ 'e'"}, True),  # unanchored
    ({"select": "$.metadata.name !~ 'x'"}, True),
    ({"select": "$.spec.replicas =~ '3'"}, False),  # =~ needs a string
    # undefined: comparisons are false, including !=
    ({"select": "$.a.b.c == 12"}, False),
    ({"select": "$.a.b.c != 12"}, False),
    ({"select": "$.a.b.c > 12 || $.a.b.c < 12"}, False),
    ({"select": "$.a.b.c == true || $.a.b.c == false"}, False),
    ({"select": "!($.a.b.c == 12)"}, True),
    # no result: no match unless negated
    ({"select": "$.missing"}, False),
    ({"select": "$.missing", "negate": True}, True),
    ({"select": "$.spec.nothing"}, False),  # null alone is no value
    ({"select": "$.spec.template.spec.containers[*].missing"}, False),
    ({"select": "$.spec.template.spec.containers[*].missing", "matchFor": "All", "negate": True}, True),
    ({"select": "$.kind.deeper"}, False),  # a step into a string
    # matchValues, matchRegex, matchFor, negate
    ({"select": "$.kind", "matchValues": ["StatefulSet", "Deployment"]}, True),
    ({"select": "$.kind", "matchValues": ["StatefulSet"]}, False),
    ({"select": "$.spec.externalIPs", "matchRegex": "0\\.2$"}, True),  # a list value: its items
    ({"select": "$.spec.externalIPs", "matchFor": "All", "matchRegex": "0\\.2$"}, False),
    ({"select": "$.spec.externalIPs[*]", "matchFor": "All", "matchRegex": "^10\\.0\\.0\\."}, True),
    ({"select": "$.spec.externalIPs[*]", "matchFor": "All", "matchRegex": "^10\\.0\\.0\\.", "negate": True}, False),
    ({"select": "$.spec.externalIPs[*]", "matchRegex": "^10\\.0\\.0\\.2", "negate": True}, False),
    ({"select": "$.metadata.name", "matchRegex": "(?i)WEB"}, True),
    ({"select": "$.metadata.name", "matchValue": "web", "matchRegex": "nothing"}, True),  # matchValue first
    ({"select": "$.metadata.name", "matchValues": ["web"], "matchRegex": "nothing"}, True),  # then matchValues
    # printed forms of non-strings
    ({"select": "$.spec.replicas", "matchValue": "3"}, True),
    ({"select": "$.spec.ratio", "matchValue": "1.5"}, True),
    ({"select": "$.spec.minReadySeconds", "matchValue": "1e+06"}, True),
    ({"select": "$.spec.template.spec.containers[*].ports[*].containerPort", "matchValue": "8080"}, True),
    ({"select": "$.spec.template.spec.securityContext.*", "matchValue": "true"}, True),  # not alone: printed
    ({"select": "$.spec.template.spec.containers[0].ports[0]", "matchValue": "map[containerPort:80 name:http]"},
     False),  # maps have no printed form here
    ({"select": "$.spec.template.spec.containers[0].ports[0]"}, True),  # but they are values
    ({"select": "length($.spec.externalIPs)", "matchValue": "2"}, True),
    # synthetic references: the request's Namespace
    ({"select": "$.syntheticRefs.namespace.metadata.labels.color", "matchValue": "blue"}, True),
    ({"select": "$.syntheticRefs.namespace.metadata.labels.flavor"}, False),
]


@pytest.mark.parametrize(("condition", "expected"), CASES, ids=[c[0]["select"] + str(i) for i, c in enumerate(CASES)])
def test_criterion(condition: dict[str, Any], expected: bool) -> None:
    assert matches(condition) is expected


def test_other_synthetic_references_are_the_policy_value_refs() -> None:
    program = cel.compile_program(render_criterion(
        {"select": "$.syntheticRefs.node.metadata.labels.zone", "matchValue": "b"}, "m"))
    assert program.evaluate({"object": DEPLOYMENT, "params": {"node": {"metadata": {"labels": {"zone": "b"}}}}})
    assert not program.evaluate({"object": DEPLOYMENT, "params": {}})


def test_the_object_without_a_namespace_object() -> None:
    program = cel.compile_program(render_criterion(
        {"select": "$.syntheticRefs.namespace.metadata.name"}, "m"))
    assert program.evaluate({"object": DEPLOYMENT, "namespaceObject": None}) is False


def test_a_select_costing_too_much_for_any_request_is_admitted_for_smaller_ones() -> None:
    # Counting through '..' copies a list at every level: affordable only for short lists, which
    # each request is then measured against before the select runs.
    program = cel.compile_program(render_criterion({"select": "length($..*) > 5"}, "m"))
    assert program.bound.items is not None and program.bound.items < 1000
    assert program.evaluate({"object": {"a": list(range(8))}}) is True
    with pytest.raises(CelEvalError, match="too large for this expression's cost bound"):
        program.evaluate({"object": {"a": list(range(program.bound.items + 1))}})


@pytest.mark.parametrize(("select", "reason"), [
    ("$.a[", "invalid select: at 4"),
    ("$.syntheticRefs", "name a synthetic reference"),
    ("$.syntheticRefs[0]", "name a synthetic reference"),
    ("$.a[*] == 1", "cannot be an operand"),
    ("$.a && $.b[*]", "cannot be a condition"),
])
def test_bad_selects_name_the_field(select: str, reason: str) -> None:
    with pytest.raises(PolicyError) as caught:
        render_criterion({"select": select}, "spec.matchConditions[2]")
    assert caught.value.path == "spec.matchConditions[2].select"
    assert reason in caught.value.reason


def test_render_joins_every_condition() -> None:
    written = [{"name": "is a deployment", "select": "$.kind", "matchValue": "Deployment"},
               {"expression": "object.spec.replicas > 2"}]
    source, errors = criteria.render([parse(MatchCondition, c) for c in written], "spec.matchConditions")
    assert errors == [] and source is not None
    assert "// spec.matchConditions[0]: is a deployment" in source
    program = cel.compile_program(source)
    assert program.evaluate({"object": DEPLOYMENT}) is True
    assert program.evaluate({"object": {**DEPLOYMENT, "spec": {"replicas": 1}}}) is False
    assert criteria.render([], "x") == (None, [])
