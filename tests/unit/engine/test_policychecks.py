"""Policy checks at admission: ``compile_policy`` refuses malformed policies naming each field.

Every case asserts the exact field path and a substring of the reason. A policy with several
problems gets them all at once, each once, and the message names the policy. Problems that do
not stop a policy from working (inline credentials, selectors that cannot match) are warnings.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.policies.compiling import compile_policy
from tests.jsonpaths import json_paths

DATA = Path(__file__).resolve().parents[2] / "data"
API = "policy.kcloudlabs.io/v1alpha1"
R0 = "spec.overrideRules[0]"
OV = f"{R0}.overriders"
T = f"{OV}.template"
V0 = "spec.validateRules[0]"
C = f"{V0}.template.condition"
SEL = "spec.resourceSelectors[0]"


# --- builders ----------------------------------------------------------------------------------


def op(overriders: Any = None, selectors: list[Any] | None = None, **rule: Any) -> dict[str, Any]:
    """OverridePolicy default/x with one rule."""
    spec: dict[str, Any] = {"overrideRules": [{"overriders": overriders if overriders is not None else {"cel": "[]"},
                                               **rule}]}
    if selectors is not None:
        spec["resourceSelectors"] = selectors
    return {"apiVersion": API, "kind": "OverridePolicy", "metadata": {"name": "x", "namespace": "default"},
            "spec": spec}


def tmpl(**template: Any) -> dict[str, Any]:
    """OverridePolicy with one template overrider."""
    return op({"template": template})


def labels(**extra: Any) -> dict[str, Any]:
    return tmpl(type="labels", operation="add", path="team", **extra)


def oversell(**factors: Any) -> dict[str, Any]:
    return tmpl(type="resourcesOversell", operation="replace", resourcesOversell=factors)


def cvp(**rule: Any) -> dict[str, Any]:
    """ClusterValidatePolicy v with one rule."""
    return {"apiVersion": API, "kind": "ClusterValidatePolicy", "metadata": {"name": "v"},
            "spec": {"validateRules": [rule]}}


def cond(**condition: Any) -> dict[str, Any]:
    """ClusterValidatePolicy with one condition template (dataRef defaults to the replicas)."""
    condition.setdefault("dataRef", {"from": "current", "path": "/spec/replicas"})
    return cvp(template={"type": "condition", "condition": condition})


def selector(**sel: Any) -> dict[str, Any]:
    return op(selectors=[{"apiVersion": "v1", "kind": "Pod", **sel}])


def ref(**r: Any) -> dict[str, Any]:
    """A labels template whose value comes from a valueRef."""
    return labels(valueRef=r)


def nested(levels: int) -> dict[str, Any]:
    """An object whose containers nest ``levels`` levels below it."""
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def errors_of(obj: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(obj)
    return [(e.path, e.reason) for e in caught.value.errors]


def with_(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


RES_PAIR = [{"type": "resourceRequirements", "operation": "replace", "containerCount": 0,
             "resourceRequirements": {"limits": {"cpu": "1"}}},
            {"type": "resourceOversell", "operation": "replace", "containerCount": 0,
             "resourcesOversell": {"requests": {"cpu": "0.5"}}}]

# (id, policy, exact field path, reason substring)
CASES: list[tuple[str, Any, str, str]] = [
    # template types and their payloads
    ("unknown-template-type", tmpl(type="annotation", operation="add", path="a", value={"string": "b"}),
     f"{T}.type", 'unsupported value "annotation"'),
    ("labels-without-value", labels(), f"{T}.value", "needs value or valueRef"),
    ("annotations-without-value", tmpl(type="annotations", operation="replace", path="a"),
     f"{T}.value", "annotations replace needs value or valueRef"),
    ("labels-without-key", tmpl(type="labels", operation="add", value={"string": "b"}), f"{T}.path",
     "key is required"),
    ("resources-without-resources", tmpl(type="resources", operation="replace"), f"{T}.resources",
     "needs resources.requests or resources.limits"),
    ("resources-bad-quantity", tmpl(type="resources", operation="replace", resources={"limits": {"cpu": "lots"}}),
     f"{T}.resources.limits[cpu]", "lots"),
    ("oversell-without-factors", tmpl(type="resourcesOversell", operation="replace"), f"{T}.resourcesOversell",
     "needs cpuFactor, memoryFactor or diskFactor"),
    ("tolerations-without-tolerations", tmpl(type="tolerations", operation="add"), f"{T}.tolerations",
     "type tolerations needs tolerations"),
    ("affinity-without-affinity", tmpl(type="affinity", operation="add"), f"{T}.affinity",
     "type affinity needs affinity"),
    ("condition-without-condition", cvp(template={"type": "condition"}), f"{V0}.template.condition",
     "required field is missing"),
    ("validate-template-pab", cvp(template={"type": "pab", "condition": {"cond": "Exist", "dataRef": {
        "from": "current", "path": "/a"}}}), f"{V0}.template.type", 'unsupported value "pab"'),
    ("template-bad-operation", tmpl(type="labels", operation="merge", path="a", value={"string": "b"}),
     f"{T}.operation", 'unsupported value "merge"'),
    # oversell factors
    ("factor-zero", oversell(cpuFactor="0"), f"{T}.resourcesOversell.cpuFactor", "greater than 0 and at most 1"),
    ("factor-above-one", oversell(memoryFactor="1.01"), f"{T}.resourcesOversell.memoryFactor",
     "greater than 0 and at most 1"),
    ("factor-negative", oversell(diskFactor="-0.5"), f"{T}.resourcesOversell.diskFactor",
     "greater than 0 and at most 1"),
    ("factor-not-a-number", oversell(cpuFactor="abc"), f"{T}.resourcesOversell.cpuFactor",
     '"abc" is not a decimal number'),
    ("factor-nan", oversell(cpuFactor="NaN"), f"{T}.resourcesOversell.cpuFactor", '"NaN" is not a decimal number'),
    ("factor-as-json-number", oversell(cpuFactor=0.5), f"{T}.resourcesOversell.cpuFactor",
     "must be of type string, got number"),
    # CEL
    ("cel-syntax-override", op({"cel": "object.metadata."}), f"{OV}.cel", "Syntax error"),
    ("cel-syntax-validate", cvp(cel="object.metadata.name =="), f"{V0}.cel", "Syntax error"),
    ("cel-type-error", op({"cel": "1 + 'a'"}), f"{OV}.cel", "found no matching overload for '_+_'"),
    ("cel-undeclared", cvp(cel="objects.metadata.name == 'a'"), f"{V0}.cel", "undeclared reference"),
    ("cel-override-not-a-list", op({"cel": "1"}), f"{OV}.cel", "evaluates to INT"),
    ("cel-validate-not-bool", cvp(cel="'yes'"), f"{V0}.cel", "evaluates to STRING"),
    # conditions
    ("regex-bad-pattern", cond(cond="Regex", dataRef={"from": "current", "path": "/metadata/name"},
                               value={"string": "a("}), f"{C}.value.string", "invalid regular expression"),
    ("regex-without-pattern", cond(cond="Regex", value={"integer": 3}), f"{C}.value.string",
     "Regex needs the pattern"),
    ("cond-unknown", cond(cond="Like", value={"string": "a"}), f"{C}.cond", 'unsupported value "Like"'),
    ("cond-without-value", cond(cond="Equal"), f"{C}.value", "cond Equal needs value or valueRef"),
    ("cond-without-dataref", cvp(template={"type": "condition", "condition": {"cond": "Exist"}}),
     f"{C}.dataRef", "required field is missing"),
    ("affect-mode-unknown", cond(cond="Exist", affectMode="deny"), f"{C}.affectMode", 'unsupported value "deny"'),
    ("in-with-a-scalar", cond(cond="In", value={"string": "a"}), f"{C}.value", "In needs a list"),
    ("ordering-with-a-list", cond(cond="Gt", value={"integerSlice": [1, 2]}), f"{C}.value",
     "Gt compares a number or a string"),
    ("value-process-bad-operation", cond(cond="Lt", value={"integer": 3},
                                         valueProcess={"operation": "%", "operationWith": 2}),
     f"{C}.valueProcess.operation", 'unsupported value "%"'),
    ("value-process-bad-operand", cond(cond="Lt", value={"integer": 3},
                                       valueProcess={"operation": "*", "operationWith": "half"}),
     f"{C}.valueProcess.operationWith", "not a number or a percentage"),
    ("integer-slice-beyond-int64", cond(cond="In", value={"integerSlice": [2 ** 63, 13]}), f"{C}.value.integerSlice[0]",
     "9223372036854775808 is out of the range of a 64-bit integer"),
    ("float-slice-beyond-float64", cond(cond="In", value={"floatSlice": ["1e400", "1.4"]}), f"{C}.value.floatSlice[0]",
     "1e400 is beyond the range of a 64-bit float"),
    ("integer-below-int64", cond(cond="Gt", value={"integer": -(2 ** 63) - 1}), f"{C}.value.integer",
     "out of the range of a 64-bit integer"),
    ("value-process-on-in", cond(cond="In", value={"integerSlice": [1]}, valueProcess={"operation": "*",
                                                                                     "operationWith": 2}),
     f"{C}.valueProcess", "valueProcess applies to Equal, NotEqual, Gt, Gte, Lt, Lte only"),
    ("value-process-on-a-string", cond(cond="Equal", value={"string": "abc"},
                                       valueProcess={"operation": "+", "operationWith": 1}),
     f"{C}.value", "valueProcess needs a number"),
    # selectors
    ("label-selector-bad-key", selector(labelSelector={"matchLabels": {"bad key!": "x"}}),
     f"{SEL}.labelSelector.matchLabels", "invalid label key 'bad key!'"),
    ("label-selector-bad-value", selector(labelSelector={"matchLabels": {"app": "-x-"}}),
     f"{SEL}.labelSelector.matchLabels", "invalid value '-x-' for label 'app'"),
    ("label-expression-bad-key", selector(labelSelector={"matchExpressions": [
        {"key": "a/b/c", "operator": "Exists"}]}), f"{SEL}.labelSelector.matchExpressions[0].key",
     "invalid label key 'a/b/c'"),
    ("label-in-without-values", selector(labelSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
     f"{SEL}.labelSelector.matchExpressions[0].values", "must be non-empty when operator is In"),
    ("label-exists-with-values", selector(labelSelector={"matchExpressions": [
        {"key": "a", "operator": "Exists", "values": ["x"]}]}),
     f"{SEL}.labelSelector.matchExpressions[0].values", "must be empty when operator is Exists"),
    ("label-unknown-operator", selector(labelSelector={"matchExpressions": [
        {"key": "a", "operator": "Equals", "values": ["x"]}]}),
     f"{SEL}.labelSelector.matchExpressions[0].operator", 'unsupported value "Equals"'),
    ("field-selector-bad-path", selector(fieldSelector={"matchExpressions": [
        {"field": "metadata..name", "operator": "Exists"}]}),
     f"{SEL}.fieldSelector.matchExpressions[0].field", "invalid field path 'metadata..name'"),
    ("field-selector-in-without-value", selector(fieldSelector={"matchExpressions": [
        {"field": "spec.nodeName", "operator": "NotIn"}]}),
     f"{SEL}.fieldSelector.matchExpressions[0].value", "must be non-empty when operator is NotIn"),
    ("field-selector-bad-match-fields-path", selector(fieldSelector={"matchFields": {"spec[": "x"}}),
     f"{SEL}.fieldSelector.matchFields", "unclosed '['"),
    ("selector-without-kind", op(selectors=[{"apiVersion": "v1"}]), f"{SEL}.kind", "required field is missing"),
    # CUE
    ("cue-outside-subset", op({"cue": 'import "net"\npatches: []'}), f"{OV}.cue",
     "CUE outside the supported subset at line 1, column 8: package 'net' is not supported"),
    ("cue-without-output", cvp(cue="object: _\nx: 1"), f"{V0}.cue", "no `validate` field"),
    ("cue-not-text", op({"cue": 3}), f"{OV}.cue", "must be of type string"),
    # plaintext
    ("plaintext-bad-op", op({"plaintext": [{"op": "move", "path": "/a", "value": 1}]}),
     f"{OV}.plaintext[0].op", 'unsupported value "move"'),
    ("plaintext-relative-path", op({"plaintext": [{"op": "add", "path": "metadata/labels/a", "value": "b"}]}),
     f"{OV}.plaintext[0].path", '"metadata/labels/a" is not a JSON pointer'),
    ("plaintext-add-without-value", op({"plaintext": [{"op": "add", "path": "/metadata/labels/a"}]}),
     f"{OV}.plaintext[0].value", "op add needs a value"),
    ("plaintext-replace-without-value", op({"plaintext": [{"op": "replace", "path": "/spec/replicas"}]}),
     f"{OV}.plaintext[0].value", "op replace needs a value"),
    ("plaintext-without-path", op({"plaintext": [{"op": "remove"}]}), f"{OV}.plaintext[0].path",
     "required field is missing"),
    # origin (engine/rules/origin.validate_origin)
    ("origin-without-payload", op({"origin": [{"type": "labels", "operation": "add"}]}), f"{OV}.origin[0].labels",
     "required for type 'labels' with operation 'add'"),
    ("origin-same-container-twice", op({"origin": RES_PAIR}), f"{OV}.origin[1].containerCount",
     "may not target the same container"),
    ("origin-unknown-type", op({"origin": [{"type": "hostPID", "operation": "add"}]}), f"{OV}.origin[0].type",
     'unsupported value "hostPID"'),
    # value references
    ("ref-k8s-without-k8s", ref(**{"from": "k8s", "path": "/metadata/name"}), f"{T}.valueRef.k8s",
     'required when from is "k8s"'),
    ("ref-http-without-http", ref(**{"from": "http", "path": "body.x"}), f"{T}.valueRef.http",
     'required when from is "http"'),
    ("ref-http-without-url", ref(**{"from": "http", "path": "body.x", "http": {"method": "GET"}}),
     f"{T}.valueRef.http.url", "required field is missing"),
    ("ref-bad-path", ref(**{"from": "current", "path": "metadata..name"}), f"{T}.valueRef.path",
     "invalid field path"),
    ("ref-bad-pointer-escape", cond(cond="Exist", dataRef={"from": "current", "path": "/metadata/a~2b"}),
     f"{C}.dataRef.path", "bad escape in pointer token"),
    ("ref-unknown-source", ref(**{"from": "parent", "path": "/a"}), f"{T}.valueRef.from",
     'unsupported value "parent"'),
    ("ref-http-bad-method", ref(**{"from": "http", "path": "body.x", "http": {"url": "https://e.x", "method": "PUT"}}),
     f"{T}.valueRef.http.method", 'unsupported value "PUT"'),
    ("ref-http-bad-expire-duration", ref(**{"from": "http", "path": "body.x", "http": {
        "url": "https://e.x", "auth": {"authUrl": "https://e.x/t", "expireDuration": "ten minutes"}}}),
     f"{T}.valueRef.http.auth.expireDuration", "is not a duration"),
    # metadata keys and values the API server would refuse on the patched object
    ("label-key-invalid", tmpl(type="labels", operation="add", path="-team", value={"string": "a"}),
     f"{T}.path", "invalid label key '-team'"),
    ("label-value-invalid", labels(value={"string": "not a label value"}), f"{T}.value",
     "invalid label value 'not a label value'"),
    ("annotation-key-invalid", tmpl(type="annotations", operation="add", path="a/b/c", value={"string": "x"}),
     f"{T}.path", "invalid annotation key 'a/b/c'"),
    # validationActions
    ("actions-deny-and-warn", cvp(cel="true", validationActions=["Deny", "Warn"]), f"{V0}.validationActions",
     "Deny and Warn together"),
    ("actions-duplicate", cvp(cel="true", validationActions=["Audit", "Audit"]), f"{V0}.validationActions[1]",
     "duplicate action 'Audit'"),
    ("actions-unknown", cvp(cel="true", validationActions=["Deny", "Block"]), f"{V0}.validationActions[1]",
     'unsupported value "Block"'),
    ("actions-empty", cvp(cel="true", validationActions=[]), f"{V0}.validationActions", "at least 1 item"),
    # structure: unknown fields, wrong types, missing fields, envelope
    ("unknown-field-in-overriders", op({"cel": "[]", "patches": []}), f"{OV}.patches", "unknown field"),
    ("unknown-field-in-rule", cvp(cel="true", action="Deny"), f"{V0}.action", "unknown field"),
    ("unknown-top-level-field", {**op(), "data": {}}, "data", "unknown field"),
    ("wrong-type-rules", with_(op(), ("spec", "overrideRules"), {"a": 1}), "spec.overrideRules",
     "must be of type array, got object"),
    ("wrong-type-cel", op({"cel": True}), f"{OV}.cel", "must be of type string, got boolean"),
    ("wrong-type-target-operations", op(targetOperations="CREATE"), f"{R0}.targetOperations",
     "must be of type array, got string"),
    ("unknown-target-operation", op(targetOperations=["CREATE", "PATCH"]), f"{R0}.targetOperations[1]",
     'unsupported value "PATCH"'),
    ("unknown-failure-policy", op(failurePolicy="Retry"), f"{R0}.failurePolicy", 'unsupported value "Retry"'),
    ("wrong-type-metadata-name", with_(op(), ("metadata", "name"), 7), "metadata.name",
     "must be of type string, got integer"),
    ("missing-overriders", with_(op(), ("spec", "overrideRules"), [{"targetOperations": ["CREATE"]}]),
     f"{R0}.overriders", "required field is missing"),
    ("missing-override-rules", with_(op(), ("spec",), {}), "spec.overrideRules", "required field is missing"),
    ("empty-override-rules", with_(op(), ("spec", "overrideRules"), []), "spec.overrideRules", "at least 1 item"),
    ("cop-without-spec", {"apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "c"}},
     "spec", "required field is missing"),
    ("wrong-kind", {**op(), "kind": "OverridePolicies"}, "kind", 'unsupported value "OverridePolicies"'),
    ("wrong-api-version", {**op(), "apiVersion": "policy.kcloudlabs.io/v1"}, "apiVersion",
     'unsupported value "policy.kcloudlabs.io/v1"'),
    ("not-an-object", ["a", "list"], "", "must be an object"),
    ("rule-without-overrider", op({}), OV, "no overrider: set template, cel, javascript, plaintext or origin"),
    ("validate-rule-without-check", cvp(message="nothing to check"), V0, "no check: set template, cel or javascript"),
    # values that can never work (issue 10, item 5)
    ("resources-negative-quantity", tmpl(type="resources", operation="add", resources={"limits": {"cpu": "-1"}}),
     f"{T}.resources.limits[cpu]", "-1 is negative"),
    ("resources-absurd-exponent", tmpl(type="resources", operation="add", resources={"requests": {"cpu": "1e400"}}),
     f"{T}.resources.requests[cpu]", "1e400 is too large"),
    ("origin-absurd-quantity", op({"origin": [{
        "type": "resourceRequirements", "operation": "replace",
        "resourceRequirements": {"limits": {"memory": "99999999999999999999999999Ei"}}}]}),
     f"{OV}.origin[0].resourceRequirements.limits[memory]", "is too large"),
    ("operand-nan", cond(cond="Equal", value={"integer": 2}, valueProcess={"operation": "*", "operationWith": "NaN"}),
     f"{C}.valueProcess.operationWith", '"NaN" is not a number or a percentage'),
    ("operand-division-by-zero", cond(cond="Equal", value={"integer": 2},
                                      valueProcess={"operation": "/", "operationWith": "0%"}),
     f"{C}.valueProcess.operationWith", "division by zero"),
    ("negative-expire-duration", ref(**{"from": "http", "path": "body.team", "http": {
        "url": "https://teams.example/api", "auth": {"authUrl": "https://auth.example/t", "username": "u",
                                                     "password": "p", "expireDuration": "-1m"}}}),
     f"{T}.valueRef.http.auth.expireDuration", '"-1m" is not a duration'),
    ("http-file-url", ref(**{"from": "http", "path": "body.team", "http": {"url": "file:///etc/passwd"}}),
     f"{T}.valueRef.http.url", "'file:///etc/passwd' is not an absolute http or https URL"),
    ("http-not-a-url", cond(cond="Exist", dataRef={"from": "http", "path": "body.x", "http": {"url": "not a url"}}),
     f"{C}.dataRef.http.url", "'not a url' is not an absolute http or https URL"),
    ("http-auth-url", ref(**{"from": "http", "path": "body.team", "http": {
        "url": "https://teams.example/{{metadata.namespace}}", "auth": {"authUrl": "/token"}}}),
     f"{T}.valueRef.http.auth.authUrl", "'/token' is not an absolute http or https URL"),
    ("plaintext-bad-pointer-escape", op({"plaintext": [{"op": "add", "path": "/metadata/~2", "value": 1}]}),
     f"{OV}.plaintext[0].path", '"/metadata/~2" is not a JSON pointer'),
    ("ref-path-too-long", cond(cond="Exist", dataRef={"from": "current", "path": "/a" * 300}),
     f"{C}.dataRef.path", "the path has 300 parts; at most 24"),
    ("ref-path-huge-index", cond(cond="Exist", dataRef={"from": "current",
                                                        "path": "/spec/containers/12345678901234567890/name"}),
     f"{C}.dataRef.path", "a list index must be at most"),
    ("cel-constant-op-without-path", op({"cel": '[{"op": "add", "value": {"team": "a"}}]'}), f"{OV}.cel",
     "reads no input and always returns invalid JSON patch operations: [0] (add) has no path"),
    ("cel-constant-failure", op({"cel": '[{"op": "add", "path": "/a", "value": 1 / 0}]'}), f"{OV}.cel",
     "reads no input and fails on every request: divide by zero"),
    # what fuzzing found admitted that fails on every object (issue 25, item 6)
    ("plaintext-path-253-segments", op({"plaintext": [{"op": "add", "path": "/a" * 253, "value": 1}]}),
     f"{OV}.plaintext[0].path", "the path has 253 segments; no object may nest deeper than 200 levels"),
    ("plaintext-remove-path-253-segments", op({"plaintext": [{"op": "remove", "path": "/a" * 253}]}),
     f"{OV}.plaintext[0].path", "the path has 253 segments"),
    ("plaintext-value-too-deep-there", op({"plaintext": [{"op": "add", "path": "/a" * 190,
                                                          "value": nested(11)}]}),
     f"{OV}.plaintext[0].value", "the value nests more than 10 levels, too deep at a path of 190 segments"),
    ("plaintext-index-beyond-any-list", op({"plaintext": [{"op": "add", "path": "/spec/containers/99999999999999999999",
                                                           "value": {"name": "c"}}]},
                                           selectors=[{"apiVersion": "v1", "kind": "Pod"}]),
     f"{OV}.plaintext[0].path", "index 99999999999999999999 of /spec/containers is beyond the length of any list"),
    ("plaintext-template-index-beyond-any-list",
     op({"plaintext": [{"op": "replace", "path": "/spec/template/spec/initContainers/1572864/image", "value": "i"}]},
        selectors=[{"apiVersion": "apps/v1", "kind": "Deployment"}, {"apiVersion": "batch/v1", "kind": "Job"}]),
     f"{OV}.plaintext[0].path", "index 1572864 of /spec/template/spec/initContainers"),
    ("plaintext-finalizer-index-beyond-any-list",
     op({"plaintext": [{"op": "add", "path": "/metadata/finalizers/12345678901234567890", "value": "f"}]}),
     f"{OV}.plaintext[0].path", "index 12345678901234567890 of /metadata/finalizers"),
    ("cel-constant-op-too-deep", op({"cel": "[{'op': 'add', 'path': '" + "/a" * 201 + "', 'value': 1}]"}),
     f"{OV}.cel", "always returns invalid JSON patch operations: [0] (add): the path has 201 segments"),
    ("cel-request-bogus", op({"cel": "request.bogus"}), f"{OV}.cel",
     "invalid CEL: request has no field 'bogus'; it has operation, namespace, userInfo, dryRun"),
    ("cel-params-without-value-ref", cvp(cel="params.x == 'a'"), f"{V0}.cel",
     "invalid CEL: params has no 'x': the rule's parameters (its references and the policy's spec.valueRefs) "
     "are none"),
    ("cel-params-other-value-ref", with_(cvp(cel="params.x == 'a'"), ("spec", "valueRefs"),
                                         {"y": {"from": "k8s", "k8s": {"apiVersion": "v1", "kind": "ConfigMap",
                                                                       "name": "c"}}}),
     f"{V0}.cel", "params has no 'x'"),
    ("cel-namespace-object-of-cluster-scoped-kinds",
     with_(cvp(cel="namespaceObject.metadata.name != 'kube-system'"), ("spec", "resourceSelectors"),
           [{"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "PersistentVolume"}]),
     f"{V0}.cel", "invalid CEL: namespaceObject is null for every object the policy selects"),
    ("cel-constant-index", cvp(cel="object.metadata.name == [][0]"), f"{V0}.cel",
     "invalid CEL: the constant ([])[0] fails on every evaluation: Index error: index=0 size=0"),
    ("cel-constant-quantity", op({"cel": "[{'op': 'add', 'path': '/a', 'value': "
                                         "quantity(object.metadata.name).add(quantity('x')).asInteger()}]"}),
     f"{OV}.cel", "invalid CEL: the constant quantity(\"x\") fails on every evaluation: invalid quantity 'x'"),
    ("match-condition-request-bogus", with_(op(), ("spec", "matchConditions"),
                                            [{"name": "a", "expression": "request.name == 'x'"}]),
     "spec.matchConditions[0].expression", "invalid CEL: request has no field 'name'"),
    ("operation-with-beyond-double", cond(cond="Gt", value={"integer": 3},
                                          valueProcess={"operation": "*", "operationWith": "1e400"}),
     f"{C}.valueProcess.operationWith", "'1e400' is beyond what a double holds"),
    ("operation-with-percent-below-double", cond(cond="Gt", value={"integer": 3},
                                                 valueProcess={"operation": "*", "operationWith": "1e-400%"}),
     f"{C}.valueProcess.operationWith", "'1e-400%' is beyond what a double holds"),
    # regular expressions as RE2 (what CEL's matches runs) sees them (item 4)
    *[(f"regex-{name}", cond(cond="Regex", dataRef={"from": "current", "path": "/metadata/name"},
                             value={"string": pattern}), f"{C}.value.string", reason)
      for name, pattern, reason in [("lookahead", "(?=a)b", "invalid perl operator: (?="),
                                    ("backreference", r"(a)\1", r"invalid escape sequence: \1"),
                                    ("repeat-1001", "a{1001}", "invalid repetition size: {1001}"),
                                    ("capital-z", r"\Z", r"invalid escape sequence: \Z"),
                                    ("lookbehind", "(?<=a)b", "invalid perl operator: (?<=")]],
]


@pytest.mark.parametrize(("policy", "path", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_policy_is_refused_naming_the_field(policy: Any, path: str, reason: str) -> None:
    found = errors_of(policy)
    assert any(p == path and reason in r for p, r in found), found


def test_a_cel_overrider_reading_the_object_is_not_evaluated_at_admission() -> None:
    compile_policy(op({"cel": 'object.metadata.name == "" ? [{"op": "add"}] : []'}))


@pytest.mark.parametrize(("name", "allowed"), [("abc", True), ("été", True), ("a1", False)])
def test_re2_syntax_python_lacks_is_accepted_and_runs(name: str, allowed: bool) -> None:
    from kinitiras_py.offline.apply import Case, run

    policy = cond(cond="Regex", affectMode="allow", dataRef={"from": "current", "path": "/metadata/name"},
                  value={"string": r"^\pL+$"}, message="letters only")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}
    assert run(Case(policies=[policy], resource=pod)).allowed is allowed


@pytest.mark.parametrize("kind", ["OverridePolicy", "ClusterOverridePolicy", "ValidatePolicy", "ClusterValidatePolicy"])
@pytest.mark.parametrize("spec", [{}, {"spec": None}])
def test_every_kind_needs_a_spec(kind: str, spec: dict[str, Any]) -> None:
    """A policy without a spec has no rules: refused for all four kinds alike (kinitiras refused
    only the ClusterOverridePolicy)."""
    policy = {"apiVersion": API, "kind": kind, "metadata": {"name": "p", "namespace": "d"}, **spec}
    assert errors_of(policy) == [("spec", "required field is missing")]


def test_there_are_at_least_45_distinct_cases() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 45
    assert len({c[2] + "|" + c[3] for c in CASES}) == len(CASES)


def test_cel_errors_carry_the_compilers_caret_diagram() -> None:
    [(path, reason)] = errors_of(op({"cel": "object.metadata."}))
    assert path == f"{OV}.cel"
    assert reason.startswith("invalid CEL: ")
    assert " | object.metadata.\n | ................^" in reason


def test_cue_is_compiled_and_its_cel_written_beside_it() -> None:
    compiled = compile_policy(op({"cue": 'object: _\npatches: [{op: "add", path: "/a", value: object.kind}]'}))
    [(pointer, source)] = compiled.rendered_fields
    assert pointer == "/spec/overrideRules/0/overriders/cueCel"
    assert compiled.rules[0].cue is not None and compiled.rules[0].cue.source == source
    validating = compile_policy(cvp(cue="object: _\nvalidate: {valid: object.kind != \"Pod\"}"))
    assert validating.rendered_fields[0][0] == "/spec/validateRules/0/cueCel"


def test_refused_cue_beside_a_template_both_reported() -> None:
    policy = op({"cue": "patches: [1 / 2]", "template": {"type": "labels", "operation": "add", "path": "a"}})
    found = errors_of(policy)
    assert [p for p, _ in found] == [f"{OV}.cue", f"{T}.value"]
    assert "line 1, column 13: `/` is not supported" in found[0][1]


def test_every_problem_in_one_policy_is_reported() -> None:
    policy = {
        "apiVersion": API, "kind": "OverridePolicy", "metadata": {"name": "x", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod", "labelSelector": {
                "matchLabels": {"bad key!": "x"},
                "matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Nope"}]}}],
            "overrideRules": [
                {"overriders": {"cel": "object.", "plaintext": [{"op": "add", "path": "a"}], "extra": 1}},
                {"overriders": {"template": {"type": "resourcesOversell", "operation": "add",
                                             "resourcesOversell": {"cpuFactor": "2"}}}},
                {"targetOperations": ["PATCH"], "overriders": {"cue": "x: 1"}},  # no patches
            ],
        },
    }
    found = errors_of(policy)
    assert sorted(p for p, _ in found) == sorted([
        f"{SEL}.labelSelector.matchExpressions[1].operator",  # model: enum
        f"{SEL}.labelSelector.matchLabels",                   # semantic: key syntax
        f"{SEL}.labelSelector.matchExpressions[0].values",    # semantic: In without values
        f"{OV}.extra",                                        # model: unknown field
        f"{OV}.cel",                                          # CEL syntax
        f"{OV}.plaintext[0].path",                            # relative path
        f"{OV}.plaintext[0].value",                           # add without value
        "spec.overrideRules[1].overriders.template.resourcesOversell.cpuFactor",
        "spec.overrideRules[2].targetOperations[0]",          # model: enum
        "spec.overrideRules[2].overriders.cue",               # CUE refused
    ])


def test_a_problem_is_reported_once_even_when_model_and_checks_both_see_it() -> None:
    found = errors_of(selector(labelSelector={"matchExpressions": [{"key": "a", "operator": "Equals"}]}))
    assert found == [(f"{SEL}.labelSelector.matchExpressions[0].operator",
                      'unsupported value "Equals": must be one of In, NotIn, Exists, DoesNotExist')]
    found = errors_of(ref(**{"from": "k8s", "path": "/a"}))
    assert [p for p, _ in found] == [f"{T}.valueRef.k8s"]


@pytest.mark.parametrize(("policy", "name"), [
    (op({"cel": "1 +"}), "policy OverridePolicy default/x: "),
    (cvp(cel="1 +"), "policy ClusterValidatePolicy v: "),
    ({"apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "c"}},
     "policy ClusterOverridePolicy c: "),
    ({**cvp(cel="1 +"), "kind": "ValidatePolicy", "metadata": {"name": "w", "namespace": "team-a"}},
     "policy ValidatePolicy team-a/w: "),
])
def test_messages_name_the_policy(policy: dict[str, Any], name: str) -> None:
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(policy)
    assert str(caught.value).startswith(name)
    assert caught.value.policy == name.removeprefix("policy ").removesuffix(": ")


def test_invalid_data_files_name_their_field() -> None:
    files = sorted((DATA / "invalid").glob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text()
        wanted = text.splitlines()[0].removeprefix("# must-name: ").strip()
        assert wanted in [p for p, _ in errors_of(yaml.safe_load(text))], path.name


# --- what compiles ---------------------------------------------------------------------------


def test_examples_compile_without_warnings() -> None:
    for path in sorted((DATA / "examples").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert compile_policy(doc).warnings == (), path.name


@pytest.mark.parametrize("policy", [
    oversell(cpuFactor="1"), oversell(cpuFactor="0.001", memoryFactor=".5"),
    cond(cond="Lt", valueRef={"from": "old", "path": "/spec/replicas"},
         valueProcess={"operation": "*", "operationWith": "50%"}),
    cond(cond="Gte", value={"string": "3"}, valueProcess={"operation": "+", "operationWith": 1}),
    cond(cond="In", valueRef={"from": "current", "path": "/metadata/annotations/allowed"}),
    cond(cond="Exist", dataRef={"from": "owner", "path": "/metadata/name"}),
    cvp(cel="object.metadata.name == 'a' ? {'valid': false, 'reason': 'no a'} : {'valid': true}"),
    cvp(cel="dyn(object.spec).replicas > 1"),
    op({"cel": "object.metadata.name == 'a' ? [] : [{'op': 'remove', 'path': '/spec/x'}]"}),
    op(targetOperations=["*"]),
    # A digit key where the kind has a map, or where any kind could: not a list index.
    op({"plaintext": [{"op": "add", "path": "/metadata/labels/99999999999999999999", "value": "x"}]},
       selectors=[{"apiVersion": "v1", "kind": "Pod"}]),
    op({"plaintext": [{"op": "add", "path": "/spec/containers/99999999999999999999", "value": {}}]},
       selectors=[{"apiVersion": "example.com/v1", "kind": "Pod"}]),
    op({"plaintext": [{"op": "add", "path": "/spec/containers/99999999999999999999", "value": {}}]}),
    op({"plaintext": [{"op": "remove", "path": "/spec/containers/99999999999999999999"}]},
       selectors=[{"apiVersion": "v1", "kind": "Pod"}]),
    op({"plaintext": [{"op": "add", "path": "/a" * 190, "value": nested(10)}]}),
    cond(cond="Gt", value={"integer": 3}, valueProcess={"operation": "*", "operationWith": "1.7e308"}),
    # CEL that can succeed on some object, however it reads its variables
    with_(cvp(cel="params.x == 'a' && has(request.bogus)"), ("spec", "valueRefs"),
          {"x": {"from": "k8s", "k8s": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}}),
    op({"template": {"type": "labels", "operation": "add", "path": "team",
                     "valueRef": {"from": "k8s", "path": "/data/team",
                                  "k8s": {"apiVersion": "v1", "kind": "ConfigMap", "name": "t"}}},
        "cel": "[{'op': 'add', 'path': '/metadata/labels/copy', 'value': params.valueRef}]"}),
    cvp(cel="namespaceObject.metadata.name != 'kube-system'"),
    with_(cvp(cel="namespaceObject == null || namespaceObject.metadata.name != 'a'"), ("spec", "resourceSelectors"),
          [{"apiVersion": "v1", "kind": "Node"}]),
    cvp(cel="has(object.a) ? [][0] == 1 : true"),
], ids=["factor-one", "factors-small", "process-percent", "process-numeric-string", "in-ref", "owner-dataref",
        "cel-map", "cel-dyn", "cel-list", "star-operation", "digit-label-key", "digit-key-of-a-custom-kind",
        "digit-key-of-any-kind", "remove-beyond-a-list", "value-200-levels-deep", "operation-with-large",
        "cel-declared-params", "cel-rule-params", "cel-namespace-object-of-any-kind", "cel-namespace-object-tested",
        "cel-constant-failure-in-a-branch"])
def test_well_formed_policies_compile(policy: dict[str, Any]) -> None:
    compiled = compile_policy(policy)
    assert len(compiled.rules) == 1


# --- warnings ----------------------------------------------------------------------------------


def http_ref(**auth: Any) -> dict[str, Any]:
    return {"from": "http", "path": "body.team", "http": {"url": "https://cmdb.example/t", "auth": auth}}


@pytest.mark.parametrize(("policy", "path"), [
    (ref(**http_ref(username="u", password="hunter2", authUrl="https://cmdb.example/token")),
     f"{T}.valueRef.http.auth.password"),
    (ref(**http_ref(staticToken="s3cr3t")), f"{T}.valueRef.http.auth.staticToken"),
    (cond(cond="Equal", dataRef=http_ref(staticToken="s3cr3t"), value={"string": "a"}),
     f"{C}.dataRef.http.auth.staticToken"),
    (cond(cond="Equal", valueRef=http_ref(password="p", username="u", authUrl="https://a.example"),
          dataRef={"from": "current", "path": "/metadata/name"}),
     f"{C}.valueRef.http.auth.password"),
])
def test_inline_http_secrets_compile_with_a_warning(policy: dict[str, Any], path: str) -> None:
    compiled = compile_policy(policy)
    [warning] = compiled.warnings
    assert path in warning
    assert "secretRef" in warning and "inline" in warning
    assert "hunter2" not in warning and "s3cr3t" not in warning
    assert warning.startswith(("OverridePolicy default/x: ", "ClusterValidatePolicy v: "))


def test_both_inline_secrets_are_each_warned_about() -> None:
    compiled = compile_policy(ref(**http_ref(staticToken="t", password="p", username="u")))
    assert [w.split(": ")[1] for w in compiled.warnings] == [f"{T}.valueRef.http.auth.password",
                                                              f"{T}.valueRef.http.auth.staticToken"]


def test_secret_ref_and_username_alone_give_no_warning() -> None:
    policy = ref(**http_ref(username="u", authUrl="https://a.example/t", secretRef={"name": "creds"}))
    assert compile_policy(policy).warnings == ()


def test_inline_authorization_header_is_warned_about() -> None:
    policy = ref(**{"from": "http", "path": "body.x", "http": {"url": "https://e.x", "header": {
        "Authorization": "Bearer abc"}}})
    [warning] = compile_policy(policy).warnings
    assert f"{T}.valueRef.http.header.Authorization" in warning and "secretRef" in warning


def test_selector_warnings() -> None:
    ignored = selector(name="web", labelSelector={"matchLabels": {"a": "b"}})
    [warning] = compile_policy(ignored).warnings
    assert SEL in warning and "ignored when name is set" in warning
    elsewhere = selector(namespace="team-b")
    [warning] = compile_policy(elsewhere).warnings
    assert f"{SEL}.namespace" in warning and "never matches" in warning
    cluster = with_(selector(namespace="team-b"), ("kind",), "ClusterOverridePolicy")
    del cluster["metadata"]["namespace"]
    assert compile_policy(cluster).warnings == ()


def test_warnings_do_not_hide_errors() -> None:
    policy = ref(**http_ref(staticToken="t"))
    policy["spec"]["overrideRules"][0]["overriders"]["cel"] = "1 +"
    assert [p for p, _ in errors_of(policy)] == [f"{OV}.cel"]


# --- robustness: any damage to a valid policy is reported, never a crash ---------------------------

EXAMPLE_DOCS = [doc for path in sorted((DATA / "examples").rglob("*.yaml"))
                for doc in yaml.safe_load_all(path.read_text())]
JUNK = [None, 0, -1, 1.5, "", "x", "a..b", "/a", True, [], {}, [1], {"a": 1}, ["x"], "NaN", "*",
        {"from": "k8s"}, [{"op": "add"}], "1 +"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_policies_are_refused_with_distinct_errors_or_compile(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(EXAMPLE_DOCS)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(json_paths(doc)))
        doc = with_(doc, path, copy.deepcopy(data.draw(st.sampled_from(JUNK))))
    try:
        compile_policy(doc)
    except PolicyErrors as e:
        found = [(err.path, err.reason) for err in e.errors]
        assert found and len(set(found)) == len(found)
