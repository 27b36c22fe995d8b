"""CUE programs of the supported subset, each with the objects it is run on, for the differential
tests: the same program and input through real CUE and through the compiled CEL must agree.

The first four are kinitiras' documented custom-cue examples (twice: as we wrote them in
tests/data/examples, and as the behaviour reference describes them) (annotate a Pod on CREATE; refuse the
DELETE of a labelled Namespace), written from their documented behaviour. The rest cover the
subset construct by construct, with objects that make each one succeed and fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from kinitiras_py.base.typedefs import Obj

EXAMPLES = Path(__file__).resolve().parent.parent / "data" / "examples"


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # override or validate
    program: str
    objects: tuple[Obj, ...]
    old: Obj | None = None
    """The oldObject of an UPDATE (validate only); None means CREATE."""
    template: bool = False
    """Run under kinitiras' template contract: the one input is ``data`` (the program as a template renders it)."""
    params: Obj | None = None
    """``data.extraParams`` of a template program: the values of its references."""


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-1", "namespace": "team-a", "labels": {"app": "web", "gpu": "true"},
                    "annotations": {"owned-by": "old"}},
       "spec": {"restartPolicy": "Always", "replicas": 3,
                "containers": [{"name": "app", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                               {"name": "side", "image": "envoy"}]}}
BARE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": {"containers": []}}
NS = {"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "team-a", "labels": {"kinitiras.kcloudlabs.io/webhook": "enabled"}}}
NS_OTHER = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-b", "labels": {"kinitiras.kcloudlabs.io/webhook": "off"}}}
ODD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd", "labels": "not-a-map"},
       "spec": {"replicas": "three", "containers": [{"name": 7}]}}

NULLS = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nulls", "labels": {"app": None}}}

_OBJ = "object: _ @tag(object)\n"


def _example(name: str) -> str:
    """The ``cue`` text of the first rule of one of our kinitiras-shaped examples."""
    spec = yaml.safe_load((EXAMPLES / name).read_text())["spec"]
    rules = spec.get("overrideRules") or spec["validateRules"]
    return str(rules[0].get("overriders", rules[0])["cue"])


CASES: tuple[Case, ...] = (
    Case("doc-addanno", "override", _OBJ + """patches: [
    if object.metadata.annotations == _|_ {
        op: "add", path: "/metadata/annotations", value: {}
    },
    {op: "add", path: "/metadata/annotations/added-by", value: "cue"},
]""", (POD, BARE)),
    Case("doc-deletens", "validate", _OBJ + """reject: object.metadata.labels != null && \
object.metadata.labels["kinitiras.kcloudlabs.io/webhook"] == "enabled"
validate: {
    if reject {
        reason: "operation rejected"
        valid: false
    }
    if !reject {
        valid: true
    }
}""", (NS, NS_OTHER, BARE)),
    Case("example-addanno-cop", "override", _example("addanno-cop.yaml"), (POD, BARE)),
    Case("example-deletens-cvp", "validate", _example("deletens-cvp.yaml"), (NS, NS_OTHER, BARE)),
    Case("struct-nested", "override", _OBJ + 'patches: [{op: "add", path: "/metadata/labels", '
         'value: {team: "a", tier: {name: "web", level: 2}}}]', (BARE,)),
    Case("label-shorthand", "override", _OBJ + 'patches: [{op: "replace", path: "/spec", value: a: b: "c"}]',
         (BARE,)),
    Case("selector-quoted", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.metadata.annotations."owned-by"}]', (POD, BARE)),
    Case("index-list", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.spec.containers[1].image}]', (POD, BARE)),
    Case("index-string", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.metadata.labels["app"]}]', (POD, ODD)),
    Case("index-out-of-range", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.spec.containers[5]}]', (POD,)),
    Case("top-input-unset", "validate", "object: _\noldObject: _ @tag(oldObject)\n"
         'validate: {valid: oldObject.spec == _|_}', (POD,)),
    Case("old-object-update", "validate", _OBJ + "oldObject: _\n"
         'validate: {valid: oldObject.spec.replicas <= object.spec.replicas, reason: "no scale down"}',
         (POD,), old={"spec": {"replicas": 5}}),
    Case("old-object-create-error", "validate", _OBJ + "oldObject: _\n"
         'validate: {valid: oldObject.spec.replicas <= 3}', (POD,)),
    Case("hidden-field", "override", _OBJ + '_app: object.metadata.labels.app\n'
         'patches: [{op: "add", path: "/metadata/annotations/app", value: _app}]', (POD, BARE)),
    Case("definition", "override", _OBJ + '#Anno: "policy.kcloudlabs.io/owner"\n'
         'patches: [{op: "add", path: "/metadata/annotations/x", value: #Anno}]', (BARE,)),
    Case("let", "override", _OBJ + 'let n = len(object.spec.containers)\n'
         'patches: [{op: "add", path: "/metadata/annotations/n", value: "\\(n)"}]', (POD, BARE)),
    Case("unused-constant", "override", _OBJ + '_unused: {a: 1, b: [true, null]}\n'
         'kind: object.kind\npatches: []', (POD,)),
    Case("if-nested", "override", _OBJ + """patches: [
    if object.metadata.labels != _|_ {
        if object.metadata.labels.app != _|_ {
            {op: "add", path: "/metadata/annotations/app", value: object.metadata.labels.app}
        }
    },
]""", (POD, BARE)),
    Case("if-multi-clause", "override", _OBJ + """patches: [
    if object.spec.containers != _|_ if len(object.spec.containers) > 1 {
        {op: "add", path: "/metadata/annotations/many", value: "yes"}
    },
]""", (POD, BARE)),
    Case("for-value", "override", _OBJ + """patches: [for c in object.spec.containers {
    op: "add", path: "/metadata/annotations/image-\\(c.name)", value: c.image
}]""", (POD, BARE, ODD)),
    Case("for-index", "override", _OBJ + """patches: [for i, c in object.spec.containers {
    op: "replace", path: "/spec/containers/\\(i)/imagePullPolicy", value: "Always"
}]""", (POD,)),
    Case("for-if", "override", _OBJ + """patches: [for i, c in object.spec.containers if c.name != "side" {
    op: "add", path: "/spec/containers/\\(i)/imagePullPolicy", value: "Always"
}]""", (POD,)),
    Case("for-nested", "override", _OBJ + """patches: [for c in ["web", object.kind] if c != "x" for n in [
    "a", "b"] if n != "a" {
    "\\(c)-\\(n)"
}]""", (POD,)),
    Case("for-embed", "override", _OBJ + 'names: [for c in object.spec.containers {c.name}]\n'
         'patches: [{op: "add", path: "/metadata/annotations/names", value: names}]', (POD,)),
    Case("interpolation-kinds", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: "\\(object.metadata.name)-\\(object.spec.replicas)-\\(true)"}]', (POD, BARE)),
    Case("interpolation-struct-error", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: "\\(object.metadata)"}]', (POD,)),
    Case("arith-int", "override", _OBJ + 'patches: [{op: "replace", path: "/spec/replicas", '
         'value: object.spec.replicas * 2 + 1 - 3}]', (POD, ODD)),
    Case("arith-float-literal", "validate", _OBJ + 'validate: {valid: object.spec.replicas > 2.5}', (POD,)),
    Case("string-concat", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.metadata.name + "-" + object.kind}]', (POD,)),
    Case("string-int-mismatch", "override", _OBJ + 'patches: [{op: "add", path: "/x", '
         'value: object.metadata.name + 1}]', (POD,)),
    Case("list-concat", "override", _OBJ + 'patches: [{op: "add", path: "/x", value: [1] + '
         '[object.kind, "\\t\\/\\r\\n"]}]', (POD,)),
    Case("list-concat-mismatch", "override", _OBJ + 'patches: [{op: "add", path: "/x", value: [1] + "a"}]',
         (POD,)),
    Case("strings-tests", "validate", 'import "strings"\n' + _OBJ + 'validate: {valid: '
         'strings.HasPrefix(object.spec.containers[0].image, "nginx") && strings.HasSuffix(object.metadata.name, "-1")'
         ' && !strings.Contains(object.metadata.name, "x"), reason: "image"}', (POD, BARE, ODD)),
    Case("strings-join", "override", 'import (\n    "strings"\n    "list"\n)\n' + _OBJ + 'patches: [{op: "add", '
         'path: "/x", value: strings.Join([for c in object.spec.containers {c.name}], ",")}]', (POD, ODD)),
    Case("list-contains", "validate", 'import "list"\n' + _OBJ + 'validate: {valid: !list.Contains(["web", "api"], '
         'object.metadata.labels.app) && list.Contains([1, "a"], 1) && !list.Contains([1], 1.0) && '
         '!list.Contains([1], "1")}', (POD, NULLS)),
    Case("list-contains-template-in", "validate", 'import "list"\n' + _OBJ + """validate: {
    if object.metadata.annotations."owned-by" != _|_ if list.Contains(["test", "old"],
        object.metadata.annotations."owned-by") {
        valid: false, reason: "owned by a protected team"
    }
}""", (POD, BARE)),
    Case("compare-strings", "validate", _OBJ + 'validate: {valid: object.metadata.name < "x"}', (POD,)),
    Case("compare-kinds-error", "validate", _OBJ + 'validate: {valid: object.spec.replicas == "3"}', (POD,)),
    Case("compare-null", "validate", _OBJ + 'validate: {valid: object.metadata.labels != null}', (POD, ODD)),
    Case("compare-null-value", "validate", _OBJ + 'validate: {valid: object.metadata.labels.app == "web" '
         '&& object.metadata.labels.app != 1}', (POD, NULLS)),
    Case("compare-order-bool-null", "validate", _OBJ + 'validate: {valid: object.spec.replicas <= true || '
         'object.spec.replicas > null}', (POD, BARE)),
    Case("compare-lists", "validate", _OBJ + 'validate: {valid: [1, 2] == [1, 2]}', (POD,)),
    Case("regex", "validate", _OBJ + 'validate: {valid: object.spec.containers[0].image =~ "^nginx:", '
         'reason: "only nginx"}', (POD, BARE)),
    Case("regex-not", "validate", _OBJ + 'validate: {valid: object.metadata.name !~ "^web-[0-9]+$"}', (POD,)),
    Case("and-or-not", "validate", _OBJ + 'validate: {valid: !(object.kind == "Pod" && '
         '(object.metadata.name == "web-1" || object.metadata.name == "x"))}', (POD, BARE)),
    Case("and-no-short-circuit", "validate", _OBJ + 'validate: {valid: object.metadata.labels != _|_ && '
         'object.metadata.labels.gpu == "true"}', (POD, BARE)),
    Case("gpu-incomplete", "override", _OBJ + """patches: [
    if object.metadata.labels.gpu == "true" {op: "add", path: "/metadata/annotations/gpu", value: "yes"},
]""", (POD, BARE)),
    Case("and-or-deciding-left", "validate", _OBJ + 'validate: {valid: (false && 3) || (true || "x"), '
         'reason: "\\(object.kind == "Pod" || 1)"}', (POD, NS)),
    Case("struct-every-condition", "validate", _OBJ + """validate: {
    if object.metadata.labels.gpu == "x" {}
    if true { valid: false }
}""", (POD, BARE)),
    Case("bool-operand-error", "validate", _OBJ + 'validate: {valid: object.metadata.name && true}', (POD,)),
    Case("if-non-bool", "override", _OBJ + 'patches: [if object.metadata.name {op: "add", path: "/x", '
         'value: 1}]', (POD,)),
    Case("len-kinds", "override", _OBJ + 'patches: [{op: "add", path: "/x", value: [len("héllo"), '
         'len(object.metadata.labels), len(object.spec.containers)]}]', (POD, ODD)),
    Case("default", "override", _OBJ + '_policy: *"Always" | "IfNotPresent"\n'
         'patches: [{op: "add", path: "/x", value: _policy}]', (POD,)),
    Case("disjunction-no-default", "override", _OBJ + '_p: "a" | "b"\n'
         'patches: [{op: "add", path: "/x", value: _p}]', (POD,)),
    Case("unify-equal", "override", _OBJ + 'patches: [{op: "add", path: "/x", value: object.kind & "Pod"}]',
         (POD, NS)),
    Case("struct-conditional-fields", "validate", _OBJ + """validate: {
    valid: true
    if object.metadata.labels.app == "web" { valid: false, reason: "web pods are frozen" }
}""", (POD,)),
    Case("struct-conflict", "validate", _OBJ + """validate: {
    valid: false
    if object.kind == "Pod" { valid: true }
}""", (POD, NS)),
    Case("validate-missing-output", "validate", _OBJ + 'validate: {}', (POD,)),
    Case("validate-reason-type", "validate", _OBJ + 'validate: {valid: false, reason: 3}', (POD,)),
    Case("bottom-literal", "override", _OBJ + 'patches: [if object.kind == "Pod" {_|_}]', (POD, NS)),
    Case("unary-minus", "override", _OBJ + 'patches: [{op: "add", path: "/x", value: -object.spec.replicas}]',
         (POD,)),
    Case("patches-not-list", "override", _OBJ + 'patches: {op: "add"}', (POD,)),
    Case("top-in-output", "override", _OBJ + '_t: _\npatches: [{op: "add", path: "/x", value: _t}]', (POD,)),
    Case("empty-patch-struct", "override", _OBJ + 'patches: [{}]', (POD,)),
)
