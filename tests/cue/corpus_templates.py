"""The CUE kinitiras' own templates render, for the worked examples of the behaviour reference
(§6.1, §6.2 and §13): written by us from the documented shape (imports, ``data: _ @tag(data)``,
``object: data.object``, ``unFlattenPatches`` flattened into ``patches``, ``validate: {...}``) and
the documented patches and verdicts, run under the template contract (the one input is ``data``).

``TEMPLATE_CASES`` compile and agree with real CUE. ``TEMPLATE_DIFFERENCES`` compile but compute
on decimals (``valueProcess``): there real CUE gives a value and the compiled program fails as
unsupported (docs/cue.md), never giving another value. ``OVERSELL`` (resourcesOversell) is refused:
its long paths inside nested calls compile to CEL deeper than CEL's parser accepts, and it computes
on decimals anyway.
"""

from __future__ import annotations

from tests.cue.corpus import Case

_OVERRIDE = """import (
    "strings"
    "strconv"
    "math"
    "list"
)

data:      _ @tag(data)
object:    data.object
kind:      object.kind
oldObject: data.oldObject
"""
_VALIDATE = """import "list"

data:      _ @tag(data)
object:    data.object
oldObject: data.oldObject
"""
_FLATTEN = "\npatches: list.FlattenN(unFlattenPatches, -1)\n"


def _override(body: str, refs: str = "") -> str:
    return _OVERRIDE + refs + "\nunFlattenPatches: [\n" + body + "]" + _FLATTEN


def _meta_prelude(field: str) -> str:
    return f"""    if object.metadata.{field} == _|_ {{
        op:    "replace"
        path:  "/metadata/{field}"
        value: {{}}
    }},
"""


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-1-abc", "namespace": "default", "annotations": {"xxx-id": "42", "owned-by": "old"},
                    "labels": {"app": "web", "xxx-id": "7"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1"}]},
       "spec": {"restartPolicy": "Always", "containers": [{"name": "app", "image": "nginx"}],
                "tolerations": [{"key": "no-cpu", "operator": "Exists", "effect": "NoSchedule"},
                                {"key": "other", "operator": "Equal", "value": "x"}]}}
POD_BARE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-2-def", "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "nginx"}]}}
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
    "name": "web-1", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]}}


def _deployment(name: str, resources: dict[str, object] | None) -> dict[str, object]:
    container: dict[str, object] = {"name": "app", "image": "nginx"}
    if resources is not None:
        container["resources"] = resources
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [container]}}}}


DEPLOY = _deployment("with-requests", {"requests": {"cpu": "500m", "memory": "1Gi"}})
DEPLOY_BARE = _deployment("without-resources", None)
DEPLOY_LIMITS = _deployment("limits", {"limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"},
                                       "requests": {"cpu": "2", "memory": "4Gi"}})
DEPLOY_MILLI = _deployment("milli", {"limits": {"cpu": "1500m", "memory": "1000M"}})
DEPLOY_NO_CPU = _deployment("no-cpu", {"limits": {"memory": "3Gi"}})
DEPLOY_NO_MEMORY = _deployment("no-memory", {"limits": {"cpu": "1"}})

NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
    "name": "team-a", "annotations": {"owned-by": "test", "no-delete": "true", "integer": "13", "float": "1.4"}}}
NS_OTHER = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-b", "annotations": {"owned-by": "other"}}}
NS_PLAIN = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}}


def _const(op: str, field: str, key: str, value: str) -> str:
    return f"""    {{
        op:    "{op}"
        path:  "/metadata/{field}/{key}"
        value: "{value}"
    }},
"""


def _ref(field: str, key: str, var: str, path: str) -> str:
    return f"""    if {var}.{path} != _|_ {{
        op:    "replace"
        path:  "/metadata/{field}/{key}"
        value: {var}.{path}
    }},
"""


def _remove(field: str, key: str) -> str:
    return f"""    if object.metadata.{field}."{key}" != _|_ {{
        op:   "remove"
        path: "/metadata/{field}/{key}"
    }},
"""


_ANNOTATIONS = _meta_prelude("annotations")
_LABELS = _meta_prelude("labels")
_OWNER_REF = 'otherObject: data.extraParams."otherObject"\n'


def _resources(prefix: str, kind_test: str, body: str) -> str:
    path = {"/spec": "object.spec.containers[0]",
            "/spec/template/spec": "object.spec.template.spec.containers[0]"}[prefix]
    prelude = "".join(f"""            if {path}.{sub} == _|_ {{
                op:    "replace"
                path:  "{prefix}/containers/0/{sub.replace('.', '/')}"
                value: {{}}
            }},
""" for sub in ("resources", "resources.requests", "resources.limits"))
    return f"""    if {kind_test} {{
        [
{prelude}{body.format(c=path, p=prefix)}        ]
    }},
"""


_LIMITS = """            {{
                op:    "replace"
                path:  "{p}/containers/0/resources/limits/cpu"
                value: "100"
            }},
            {{
                op:    "replace"
                path:  "{p}/containers/0/resources/limits/memory"
                value: "4398046511104"
            }},
"""
_REMOVE_REQUESTS = "".join(f"""            if {{c}}.resources.requests."{key}" != _|_ {{{{
                op:   "remove"
                path: "{{p}}/containers/0/resources/requests/{key}"
            }}}},
""" for key in ("cpu", "ephemeral-storage", "memory"))
_MILLI = 'strconv.Atoi(strings.TrimSuffix({c}.resources.limits.cpu, "m"))'
_GI = 'strconv.Atoi(strings.TrimSuffix({c}.resources.limits.memory, "Gi"))'
_OVERSELL = """            if {c}.resources.limits.cpu == _|_ {{
                op:    "replace"
                path:  "{p}/containers/0/resources/requests/cpu"
                value: "0m"
            }},
            if {c}.resources.limits.cpu != _|_ if strings.HasSuffix({c}.resources.limits.cpu, "m") {{
                op:    "replace"
                path:  "{p}/containers/0/resources/requests/cpu"
                value: "\\(strconv.FormatInt(math.Round(""" + _MILLI + """ * 0.001 * 0.5 * 1000), 10))m"
            }},
            if {c}.resources.limits.cpu != _|_ if !strings.HasSuffix({c}.resources.limits.cpu, "m") {{
                op:    "replace"
                path:  "{p}/containers/0/resources/requests/cpu"
                value: "\\(strconv.FormatInt(math.Round(strconv.Atoi({c}.resources.limits.cpu) * 0.5 * 1000), 10))m"
            }},
            {{
                op:    "replace"
                path:  "{p}/containers/0/resources/requests/memory"
                value: [
                    if strings.HasSuffix({c}.resources.limits.memory, "Gi") {{
                        math.Round(""" + _GI + """ * 1073741824 * 0.2)
                    }},
                    if strings.HasSuffix({c}.resources.limits.memory, "M") {{
                        math.Round(strconv.Atoi(strings.TrimSuffix({c}.resources.limits.memory, "M")) * 1000000 * 0.2)
                    }},
                    0,
                ][0]
            }},
"""


def _workload(body: str) -> str:
    return (_resources("/spec", 'kind == "Pod"', body)
            + _resources("/spec/template/spec", 'kind != "Pod"', body))


_TOLERATIONS = """[{key: "no-cpu", operator: "Exists", effect: "NoExecute", tolerationSeconds: 500}, \
{key: "no-xxx", operator: "Exists", effect: "NoExecute", tolerationSeconds: 500}]"""
_TOLERATION_REPLACE = "".join(f"""    if object.spec.tolerations != _|_ {{
        [for i, t in object.spec.tolerations if t.key != _|_ if t.key == "{key}" {{
            op:    "replace"
            path:  "/spec/tolerations/\\(i)"
            value: {{key: "{key}", operator: "Exists", effect: "NoExecute", tolerationSeconds: 500}}
        }}]
    }},
""" for key in ("no-cpu", "no-xxx"))
_AFFINITY = """{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: \
[{key: "test", operator: "In", values: ["abc"]}]}]}}}"""
AFFINITY_POD = {**POD_BARE, "metadata": {"name": "affine"}, "spec": {
    "containers": [{"name": "app"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "required", "operator": "In", "values": ["zzc"]}]}]}}}}}
AFFINITY_POD_NO_NA = {**POD_BARE, "metadata": {"name": "pod-affine"}, "spec": {
    "containers": [{"name": "app"}], "affinity": {"podAffinity": {}}}}


def _validate(body: str, refs: str = "") -> str:
    return _VALIDATE + refs + "\nvalidate: {\n" + body + "}\n"


def _reject(test: str, reason: str) -> str:
    return f"""    if {test} {{
        valid:  false
        reason: "{reason}"
    }}
"""


_D = 'object.metadata.annotations."{}"'


def _in(key: str, values: str, negate: bool = False) -> str:
    d = _D.format(key)
    return _validate(_reject(f"{d} != _|_ if {'!' if negate else ''}list.Contains({values}, {d})", "denied by list"))


TEMPLATE_CASES: tuple[Case, ...] = (
    Case("tmpl-annotations-remove", "override", _override(_ANNOTATIONS + _remove("annotations", "xxx-id")),
         (POD, POD_BARE), template=True),
    Case("tmpl-annotations-const", "override", _override(_ANNOTATIONS + _const("replace", "annotations", "owned-by",
                                                                               "cue")), (POD, POD_BARE), template=True),
    Case("tmpl-annotations-stringmap", "override", _override(
        _ANNOTATIONS + _const("replace", "annotations", "key1", "value1")
        + _const("replace", "annotations", "key2", "value2")), (POD,), template=True),
    Case("tmpl-annotations-ref-current", "override", _override(
        _ANNOTATIONS + _ref("annotations", "restartPolicy", "object", "spec.restartPolicy")), (POD, POD_BARE),
        template=True),
    Case("tmpl-annotations-ref-owner", "override", _override(
        _ANNOTATIONS + _ref("annotations", "deployment-name", "otherObject", "metadata.ownerReferences[0].name"),
        _OWNER_REF), (POD,), template=True, params={"otherObject": OWNER}),
    Case("tmpl-annotations-ref-owner-missing", "override", _override(
        _ANNOTATIONS + _ref("annotations", "deployment-name", "otherObject", "metadata.ownerReferences[0].name"),
        _OWNER_REF), (POD,), template=True, params={"otherObject": {"metadata": {"name": "orphan"}}}),
    Case("tmpl-labels-ref-current", "override", _override(
        _LABELS + _ref("labels", "restartPolicy", "object", "spec.restartPolicy")), (POD, POD_BARE), template=True),
    Case("tmpl-labels-remove", "override", _override(_LABELS + _remove("labels", "xxx-id")), (POD, POD_BARE),
         template=True),
    Case("tmpl-annotations-integer", "override", _override(_ANNOTATIONS + _const("add", "annotations", "n", "5")),
         (POD,), template=True),
    Case("tmpl-annotations-slash-key", "override", _override(
        _ANNOTATIONS + _const("replace", "annotations", "example.com.team", "a")), (POD,), template=True),
    Case("tmpl-resources-replace", "override", _override(_workload(_LIMITS)), (DEPLOY, DEPLOY_BARE, POD),
         template=True),
    Case("tmpl-resources-remove", "override", _override(_workload(_REMOVE_REQUESTS)), (DEPLOY, DEPLOY_LIMITS),
         template=True),
    Case("tmpl-tolerations-replace", "override", _override(f"""    if object.spec.tolerations == _|_ {{
        op:    "replace"
        path:  "/spec/tolerations"
        value: {_TOLERATIONS}
    }},
    if object.spec.tolerations != _|_ if len(object.spec.tolerations) == 0 {{
        op:    "replace"
        path:  "/spec/tolerations"
        value: {_TOLERATIONS}
    }},
""" + _TOLERATION_REPLACE), (POD, POD_BARE, {**POD_BARE, "spec": {"tolerations": []}}), template=True),
    Case("tmpl-affinity-add", "override", _override(f"""    if object.spec.affinity == _|_ {{
        op:    "replace"
        path:  "/spec/affinity"
        value: {_AFFINITY}
    }},
    if object.spec.affinity != _|_ if object.spec.affinity.nodeAffinity == _|_ {{
        op:    "replace"
        path:  "/spec/affinity/nodeAffinity"
        value: {_AFFINITY}.nodeAffinity
    }},
    if object.spec.affinity != _|_ if object.spec.affinity.nodeAffinity != _|_ {{
        op:    "add"
        path:  "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0"
        value: {_AFFINITY}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]
    }},
"""), (POD_BARE, AFFINITY_POD, AFFINITY_POD_NO_NA), template=True),
    Case("tmpl-validate-exist", "validate", _validate(_reject(_D.format("no-delete") + " != _|_",
                                                              "cannot delete this ns")),
         (NS, NS_OTHER, NS_PLAIN), template=True),
    Case("tmpl-validate-not-exist", "validate", _validate(_reject(_D.format("owned-by") + " == _|_", "unowned")),
         (NS, NS_PLAIN), template=True),
    Case("tmpl-validate-equal", "validate", _validate(_reject(
        f'{_D.format("owned-by")} != _|_ if {_D.format("owned-by")} == "test"', "owned by test")),
        (NS, NS_OTHER, NS_PLAIN), template=True),
    Case("tmpl-validate-in-strings", "validate", _in("owned-by", '["test", "ecp", "oam", "leap"]'),
         (NS, NS_OTHER, NS_PLAIN), template=True),
    Case("tmpl-validate-in-integers", "validate", _in("integer", "[12, 13, 15]"), (NS, NS_PLAIN), template=True),
    Case("tmpl-validate-in-floats", "validate", _in("float", '["1.2", "1.4", "1.54"]'), (NS,), template=True),
    Case("tmpl-validate-not-in", "validate", _in("owned-by", '["test", "leap", "ecp"]', negate=True),
         (NS, NS_OTHER), template=True),
    Case("tmpl-validate-gte-k8s", "validate", _validate(_reject(
        "object.spec.replicas != _|_ if otherObject.spec.replicas != _|_ if object.spec.replicas >= "
        "otherObject.spec.replicas", "too many replicas"), _OWNER_REF),
        (DEPLOY, DEPLOY_BARE), template=True, params={"otherObject": {"spec": {"replicas": 2}}}),
    Case("tmpl-validate-http", "validate", _validate(_reject(
        "http.body.result.reject != _|_ if http.body.result.reject == true", "rejected by http"),
        'http: data.extraParams."http"\n'), (NS,), template=True,
        params={"http": {"body": {"result": {"reject": True}}, "header": {}, "trailer": {}}}),
    Case("tmpl-validate-lt-update-create", "validate", _validate(_reject(
        "object.spec.replicas != _|_ if oldObject.spec.replicas != _|_ if object.spec.replicas < "
        "(oldObject.spec.replicas * 0.5)", "scaled down too far")), (DEPLOY,), template=True),
)

TEMPLATE_CASES += tuple(
    Case(c.name.replace("tmpl-", "tmpl-as-rule-"), c.kind, c.program, c.objects[:1])
    for c in TEMPLATE_CASES if c.name in ("tmpl-annotations-const", "tmpl-annotations-ref-current",
                                          "tmpl-resources-replace", "tmpl-validate-not-exist"))
"""The same programs as `cue` rules: `data` is not given, so every path below it is `_|_`."""

TEMPLATE_DIFFERENCES: tuple[Case, ...] = (
    Case("tmpl-validate-lt-value-process", "validate", _validate(_reject(
        "object.spec.replicas != _|_ if oldObject.spec.replicas != _|_ if object.spec.replicas < "
        "(oldObject.spec.replicas * 0.5)", "scaled down too far")), (DEPLOY,), old={"spec": {"replicas": 10}},
        template=True),
)

OVERSELL = Case("tmpl-oversell", "override", _override(_workload(_OVERSELL)),
                (DEPLOY_LIMITS, DEPLOY_MILLI, DEPLOY_NO_CPU, DEPLOY_NO_MEMORY), template=True)
