"""KubeMod features on our policies: matchConditions, executionTier, fanned-out plaintext,
lenient operations, patchLastApplied and messageTemplate rejections, through compile_policy and
the admission pipeline."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.objects import patching
from kinitiras_py.engine.objects.lastapplied import ANNOTATION
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.render import rendered_sources, with_rendered
from kinitiras_py.offline.static import StaticStore

HEAD = "apiVersion: policy.kcloudlabs.io/v1alpha1\n"


def policy(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(HEAD + text)
    return doc


def deployment(**extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
                           "spec": {"template": {"spec": {"containers": [
                               {"name": "app", "image": "docker.io/nginx:1", "ports": [{"containerPort": 80}]}]}}}}
    obj["metadata"].update(extra)
    return obj


def pipeline(*docs: dict[str, Any], store: list[dict[str, Any]] | None = None) -> Pipeline:
    compiled = [compile_policy(d) for d in docs]
    return Pipeline(PolicyIndex(c for c in compiled if not c.validating),
                    PolicyIndex(c for c in compiled if c.validating), StaticStore(store or []))


LABEL_IF_NGINX = policy("""
kind: OverridePolicy
metadata: {name: label, namespace: shop}
spec:
  matchConditions:
  - select: $.spec.template.spec.containers[*].image
    matchRegex: nginx
  - name: has an app label
    expression: "'app' in object.metadata.labels"
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/labels/web, value: "yes"}]
""")


async def test_match_conditions_decide_after_the_selectors() -> None:
    p = pipeline(LABEL_IF_NGINX)
    mutation = await p.mutate(Request("CREATE", deployment(), namespace="shop"))
    assert mutation.patch == [{"op": "add", "path": "/metadata/labels/web", "value": "yes"}]
    other = deployment()
    other["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox"
    assert (await p.mutate(Request("CREATE", other, namespace="shop"))).patch == []
    unlabelled = deployment(labels={"x": "y"})
    assert (await p.mutate(Request("CREATE", unlabelled, namespace="shop"))).patch == []


async def test_a_failing_condition_is_a_rule_error_under_failure_policy() -> None:
    failing = policy("""
kind: OverridePolicy
metadata: {name: failing, namespace: shop}
spec:
  matchConditions: [{expression: "object.spec.missing.deeper == 1"}]
  overrideRules:
  - failurePolicy: Ignore
    overriders: {plaintext: [{op: add, path: /metadata/labels/x, value: "1"}]}
""")
    mutation = await pipeline(failing).mutate(Request("CREATE", deployment(), namespace="shop"))
    assert mutation.patch == [] and mutation.allowed
    assert "matchConditions could not be evaluated" in mutation.warnings[0]
    failing["spec"]["overrideRules"][0]["failurePolicy"] = "Fail"
    mutation = await pipeline(failing).mutate(Request("CREATE", deployment(), namespace="shop"))
    assert not mutation.allowed and "matchConditions" in str(mutation.failure)


def test_rendered_match_conditions_are_written_back() -> None:
    compiled = compile_policy(LABEL_IF_NGINX)
    [(where, source)] = rendered_sources(compiled)
    assert where == "spec.renderedMatchConditions"
    assert with_rendered(LABEL_IF_NGINX, compiled)["spec"]["renderedMatchConditions"] == source
    assert compiled.rendered_field_ops(with_rendered(LABEL_IF_NGINX, compiled)) == []


@pytest.mark.parametrize(("conditions", "path", "reason"), [
    ([{"select": "$.a["}], "spec.matchConditions[0].select", "invalid select"),
    ([{"select": "$.a"}, {"expression": "object.x +"}], "spec.matchConditions[1].expression", "invalid CEL"),
    ([{"expression": "'text'"}], "spec.matchConditions[0].expression", "must return a bool"),
    ([{"expression": "true", "select": "$.a"}], "spec.matchConditions[0].expression", "exactly one"),
    ([{"expression": "true", "negate": True}], "spec.matchConditions[0].negate", "only for a select"),
    ([{"select": "$.a", "matchFor": "Some"}], "spec.matchConditions[0].matchFor", "Any"),
])
def test_bad_conditions_are_refused_with_their_field(conditions: list[Any], path: str, reason: str) -> None:
    doc = policy("""
kind: ClusterValidatePolicy
metadata: {name: v}
spec:
  validateRules: [{cel: "true"}]
""")
    doc["spec"]["matchConditions"] = conditions
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(doc)
    assert any(e.path == path and reason in e.reason for e in caught.value.errors), caught.value.errors


TIER_1 = policy("""
kind: OverridePolicy
metadata: {name: z-move-images, namespace: shop}
spec:
  executionTier: 1
  overrideRules:
  - overriders:
      plaintext:
      - op: replace
        select: '$.spec.template.spec.containers[? @.image =~ "^docker.io/"].image'
        path: /spec/template/spec/containers/#0/image
        valueTemplate: "{{ regexReplaceAll('^docker.io/(.*)', selectedItem, 'registry.example/${1}') }}"
""")
TIER_2 = policy("""
kind: OverridePolicy
metadata: {name: a-pull-secret, namespace: shop}
spec:
  executionTier: 2
  matchConditions:
  - select: $.spec.template.spec.containers[*].image
    matchRegex: ^registry\\.example/
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /spec/template/spec/imagePullSecrets/-1, value: {name: reg}, lenient: true}]
""")


async def test_later_tiers_match_what_earlier_tiers_made() -> None:
    # a-pull-secret sorts first by name, but its tier runs second and sees the moved image.
    mutation = await pipeline(TIER_2, TIER_1).mutate(Request("CREATE", deployment(), namespace="shop"))
    final = mutation.object["spec"]["template"]["spec"]
    assert final["containers"][0]["image"] == "registry.example/nginx:1"
    assert final["imagePullSecrets"] == [{"name": "reg"}]
    assert patching.apply_patch(deployment(), mutation.patch) == mutation.object
    assert [str(r.policy) for r in mutation.applied] == ["OverridePolicy shop/z-move-images",
                                                         "OverridePolicy shop/a-pull-secret"]
    # In one tier, a-pull-secret would run first and find no private image.
    same_tier = policy(yaml.safe_dump(TIER_2).replace("executionTier: 2", "executionTier: 1"))
    mutation = await pipeline(same_tier, TIER_1).mutate(Request("CREATE", deployment(), namespace="shop"))
    assert "imagePullSecrets" not in mutation.object["spec"]["template"]["spec"]


async def test_a_failing_tier_leaves_the_object_untouched() -> None:
    broken = policy("""
kind: OverridePolicy
metadata: {name: broken, namespace: shop}
spec:
  executionTier: 5
  overrideRules:
  - overriders: {plaintext: [{op: replace, path: /spec/nothing/0, value: 1}]}
""")
    request = Request("CREATE", deployment(), namespace="shop")
    mutation = await pipeline(TIER_1, broken).mutate(request)
    assert not mutation.allowed and mutation.object is request.object and mutation.patch == []


async def test_last_applied_configuration_follows_the_patch() -> None:
    recorded = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "docker.io/nginx:1"}]}}}}
    obj = deployment(annotations={ANNOTATION: json.dumps(recorded) + "\n"})
    doc = yaml.safe_load(yaml.safe_dump(TIER_1))
    doc["spec"]["overrideRules"][0]["patchLastApplied"] = True
    doc["spec"]["overrideRules"][0]["overriders"]["plaintext"].append(
        {"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort",
         "value": 81})
    mutation = await pipeline(doc).mutate(Request("CREATE", obj, namespace="shop"))
    annotation = mutation.object["metadata"]["annotations"][ANNOTATION]
    assert annotation.endswith("\n")
    # The image moved in both; the port list the annotation lacks was skipped there.
    assert json.loads(annotation)["spec"]["template"]["spec"]["containers"] == [
        {"name": "app", "image": "registry.example/nginx:1"}]
    assert mutation.object["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 81}]
    assert patching.apply_patch(obj, mutation.patch) == mutation.object
    without = await pipeline(TIER_1).mutate(Request("CREATE", obj, namespace="shop"))
    assert without.object["metadata"]["annotations"][ANNOTATION] == json.dumps(recorded) + "\n"


def test_fanned_out_operations_store_their_cel() -> None:
    compiled = compile_policy(TIER_1)
    [(where, source)] = rendered_sources(compiled)
    assert where == "spec.overrideRules[0].overriders.plaintext[0].renderedCel"
    assert "regexReplaceAll" in source


REJECT = policy("""
kind: ValidatePolicy
metadata: {name: ips, namespace: shop}
spec:
  matchConditions:
  - {select: $.kind, matchValue: Service}
  - {select: '$.spec.externalIPs[*]', matchFor: All, matchRegex: '^10\\.', negate: true}
  validateRules:
  - messageTemplate: "not allowed: {{ target.spec.externalIPs }} in {{ namespace }}"
""")


async def test_a_rule_of_only_a_message_template_rejects_what_the_conditions_select() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "shop"},
               "spec": {"externalIPs": ["10.0.0.1", "1.2.3.4"]}}
    verdict = await pipeline(REJECT).validate(Request("CREATE", service, namespace="shop"))
    assert not verdict.allowed
    assert verdict.message == 'ValidatePolicy shop/ips: not allowed: ["10.0.0.1","1.2.3.4"] in shop'
    service["spec"]["externalIPs"] = ["10.0.0.1"]
    assert (await pipeline(REJECT).validate(Request("CREATE", service, namespace="shop"))).allowed


def test_message_template_belongs_to_condition_only_rules() -> None:
    doc = yaml.safe_load(yaml.safe_dump(REJECT))
    doc["spec"]["validateRules"][0]["cel"] = "true"
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(doc)
    assert caught.value.errors[0].path == "spec.validateRules[0].messageTemplate"


NODE_ZONE = policy("""
kind: ClusterOverridePolicy
metadata: {name: zone}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  valueRefs:
    node: {from: k8s, k8s: {apiVersion: v1, kind: Node, name: "{{metadata.annotations['node']}}"}}
  matchConditions:
  - select: $.syntheticRefs.node.metadata.labels.zone
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/labels/zone, valueTemplate: '"{{ params.node.metadata.labels.zone }}"'}]
""")
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "b"}}}


def pod(**annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop",
                                                            "annotations": annotations}}


async def test_policy_value_refs_serve_conditions_and_rules() -> None:
    p = pipeline(NODE_ZONE, store=[NODE])
    mutation = await p.mutate(Request("CREATE", pod(node="n1"), namespace="shop"))
    assert mutation.patch == [{"op": "add", "path": "/metadata/labels", "value": {"zone": "b"}}]
    # No annotation: no node, the condition does not hold.
    assert (await p.mutate(Request("CREATE", pod(), namespace="shop"))).patch == []
    # A node that does not exist: a rule error under the rule's failurePolicy.
    failed = await p.mutate(Request("CREATE", pod(node="gone"), namespace="shop"))
    assert not failed.allowed and "valueRefs" in str(failed.failure)


@pytest.mark.parametrize(("change", "path", "reason"), [
    ({"valueRefs": {"node": {"from": "current", "path": "/x"}}}, "spec.valueRefs.node.from", "only k8s"),
    ({"valueRefs": {"namespace": NODE_ZONE["spec"]["valueRefs"]["node"]}}, "spec.valueRefs.namespace", "already"),
    ({"valueRefs": {}}, "spec.matchConditions[0].select", "neither the namespace nor"),
])
def test_value_ref_mistakes(change: dict[str, Any], path: str, reason: str) -> None:
    doc = yaml.safe_load(yaml.safe_dump(NODE_ZONE))
    doc["spec"].update(change)
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(doc)
    assert any(e.path == path and reason in e.reason for e in caught.value.errors), caught.value.errors


@pytest.mark.parametrize(("op", "before", "after"), [
    ({"op": "add", "path": "/l/-1", "value": 9}, {"l": [1, 2]}, {"l": [1, 2, 9]}),
    ({"op": "add", "path": "/l/-2", "value": 9}, {"l": [1, 2]}, {"l": [1, 9, 2]}),
    ({"op": "replace", "path": "/l/-1", "value": 9}, {"l": [1, 2]}, {"l": [1, 9]}),
    ({"op": "remove", "path": "/l/-2"}, {"l": [1, 2]}, {"l": [2]}),
    ({"op": "remove", "path": "/l/-1/x"}, {"l": [{"x": 1}]}, {"l": [{}]}),
    ({"op": "add", "path": "/m/l/-1", "value": 9}, {}, {"m": {"l": [9]}}),
    ({"op": "add", "path": "/m/l/-", "value": 9}, {}, {"m": {"l": [9]}}),
    ({"op": "remove", "path": "/nothing/0"}, {"l": []}, {"l": []}),
])
def test_lenient_operations(op: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    assert patching.apply_patch(before, [{**op, "lenient": True}]) == after


def test_without_lenient_negative_indexes_are_errors() -> None:
    with pytest.raises(patching.PatchError):
        patching.apply_patch({"l": [1]}, [{"op": "add", "path": "/l/-1", "value": 2}])
    with pytest.raises(patching.PatchError, match="out of range"):
        patching.apply_patch({"l": [1]}, [{"op": "add", "path": "/l/-3", "value": 2, "lenient": True}])
