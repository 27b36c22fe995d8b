"""Parsing policies: every example parses, every problem is reported with its exact field path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.api import policies
from kinitiras_py.api.policies import (
    KINDS,
    ClusterOverridePolicy,
    ClusterValidatePolicy,
    OverridePolicy,
    ValidatePolicy,
    is_policy,
    parse_policy,
    policy_ref,
)
from kinitiras_py.api.values import ConstantValue
from kinitiras_py.base.errors import PolicyErrors

DATA = Path(__file__).resolve().parents[2] / "data"
EXAMPLES = sorted((DATA / "examples").rglob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def errors_of(obj: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyErrors) as caught:
        parse_policy(obj)
    return [(e.path, e.reason) for e in caught.value.errors]


def minimal_op(**rule: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.kcloudlabs.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"overrideRules": [{"overriders": {"cel": "[]"}, **rule}]},
    }


def minimal_cvp(**rule: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.kcloudlabs.io/v1alpha1",
        "kind": "ClusterValidatePolicy",
        "metadata": {"name": "v"},
        "spec": {"validateRules": [{"cel": "true", **rule}]},
    }


# --- examples ----------------------------------------------------------------------------------


def test_there_is_one_example_per_kinitiras_shape_plus_ours() -> None:
    names = {str(p.relative_to(DATA / "examples")) for p in EXAMPLES}
    assert names == {
        "addanno-cop.yaml", "addanno-op.yaml", "deletens-cvp.yaml",
        "templates/override-affinity.yaml", "templates/override-anno.yaml",
        "templates/override-labels.yaml", "templates/override-resources.yaml",
        "templates/override-resourcesoversell.yaml", "templates/override-tolerations.yaml",
        "templates/validate-multi.yaml",
        "extended/cop-http-secret.yaml", "extended/override-cel-origin.yaml",
        "extended/validate-warn-cel.yaml", "extended/override-javascript.yaml",
        "extended/validate-javascript.yaml", "extended/override-sidecar.yaml",
        "kubemod/sidecar-injection.yaml", "kubemod/container-ports.yaml", "kubemod/namespace-label.yaml",
        "kubemod/reject-external-ips.yaml", "kubemod/tiers-1-private-registry.yaml",
        "kubemod/tiers-2-pull-secret.yaml",
        "extended/override-inject.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_parses(path: Path) -> None:
    obj = load(path)
    policy = parse_policy(obj)
    assert type(policy).INFO.kind == obj["kind"]
    assert policy.raw is obj
    assert policy.rules


def test_override_anno_example_models() -> None:
    policy = parse_policy(load(DATA / "examples/templates/override-anno.yaml"))
    assert isinstance(policy, OverridePolicy)
    assert policy.ref == "OverridePolicy default/override-anno-op-template"
    assert policy.metadata.labels == {"kinitiras.kcloudlabs.io/webhook": "enabled"}
    selector = policy.selectors[0]
    assert (selector.api_version, selector.kind) == ("v1", "Pod")
    assert selector.label_selector is not None
    assert selector.label_selector.match_labels == {"kinitiras.kcloudlabs.io/webhook": "enabled"}
    templates = [rule.overriders.template for rule in policy.rules]
    assert [(t.type, t.operation, t.path) for t in templates if t] == [
        ("annotations", "remove", "xxx-id"),
        ("annotations", "replace", "owned-by"),
        ("annotations", "replace", None),
        ("annotations", "replace", "restartPolicy"),
        ("annotations", "replace", "deployment-name"),
        ("annotations", "replace", "deployment-name-2"),
    ]
    assert policy.rules[0].target_operations == ["UPDATE", "CREATE"]
    last = templates[5]
    assert last is not None and last.value_ref is not None and last.value_ref.k8s is not None
    assert last.value_ref.from_ == "k8s"
    assert last.value_ref.k8s.label_selector is not None
    assert last.value_ref.k8s.label_selector.match_labels == {"app": "{{metadata.labels.app}}"}
    assert last.value_ref.raw == {"from": "k8s", "path": "/metadata/name", "k8s": last.value_ref.k8s.raw}


def test_override_resources_and_oversell_keep_quantities_and_factors_as_written() -> None:
    resources = parse_policy(load(DATA / "examples/templates/override-resources.yaml"))
    assert isinstance(resources, OverridePolicy)
    template = resources.rules[0].overriders.template
    assert template is not None and template.resources is not None
    assert template.resources.limits == {"cpu": 100, "memory": "4096Gi"}
    oversell = parse_policy(load(DATA / "examples/templates/override-resourcesoversell.yaml"))
    assert isinstance(oversell, OverridePolicy)
    oversell_template = oversell.rules[0].overriders.template
    assert oversell_template is not None
    rule = oversell_template.resources_oversell
    assert rule is not None
    assert (rule.cpu_factor, rule.memory_factor, rule.disk_factor) == ("0.5", "0.2", "0.1")


def test_validate_multi_conditions() -> None:
    policy = parse_policy(load(DATA / "examples/templates/validate-multi.yaml"))
    assert isinstance(policy, ClusterValidatePolicy)
    conditions = [rule.template.condition for rule in policy.rules if rule.template]
    assert [c.cond for c in conditions] == ["Exist", "Equal", "Equal", "Gte", "In", "In", "In", "NotIn"]
    assert {c.affect_mode for c in conditions} == {"reject"}  # defaulted
    http = conditions[2].data_ref.http
    assert http is not None
    assert (http.url, http.method, http.params) == (
        "https://deletion-approver.example.invalid/check", "GET", {"name": "{{metadata.name}}"})
    assert [c.value.value() if c.value else None for c in conditions[4:]] == [
        ["test", "ecp", "oam", "leap"], [12, 13, 15], ["1.2", "1.4", "1.54"], ["test", "leap", "ecp"]]


def test_extended_examples_use_the_new_fields() -> None:
    vp = parse_policy(load(DATA / "examples/extended/validate-warn-cel.yaml"))
    assert isinstance(vp, ValidatePolicy)
    assert [(r.cel is not None, r.failure_policy, r.validation_actions) for r in vp.rules] == [
        (True, "Ignore", ["Warn"]), (False, "Fail", ["Deny", "Audit"])]
    assert vp.rules[1].target_operations == ["*"]
    op = parse_policy(load(DATA / "examples/extended/override-cel-origin.yaml"))
    assert isinstance(op, OverridePolicy)
    assert [o.type for o in op.rules[1].overriders.origin] == [
        "nodeSelector", "tolerations", "resourceOversell", "topologySpreadConstraints"]
    oversell = op.rules[1].overriders.origin[2]
    assert (oversell.container_count, oversell.replace) == (0, False)
    assert oversell.resources_oversell is not None
    assert oversell.resources_oversell.requests == {"cpu": "0.5", "memory": "0.8"}
    template = op.rules[2].overriders.template
    assert template is not None and template.container_names == ["worker"]
    cop = parse_policy(load(DATA / "examples/extended/cop-http-secret.yaml"))
    assert isinstance(cop, ClusterOverridePolicy)
    cop_template = cop.rules[0].overriders.template
    assert cop_template is not None
    ref = cop_template.value_ref
    assert ref is not None and ref.http is not None and ref.http.auth is not None
    assert ref.http.body == {"namespace": "{{metadata.name}}", "fields": ["costCenter"], "strict": True}
    assert ref.http.auth.secret_ref is not None
    assert (ref.http.auth.secret_ref.name, ref.http.auth.secret_ref.namespace) == (
        "cmdb-credentials", "kinitiras-system")


# --- invalid fixtures --------------------------------------------------------------------------

EXPECTED_INVALID = {
    "bad-cond.yaml": [
        ("spec.validateRules[0].template.condition.cond",
         'unsupported value "Contains": must be one of Equal, NotEqual, Exist, NotExist, In, NotIn, '
         "Gt, Gte, Lt, Lte, Regex")],
    "bad-operation.yaml": [
        ("spec.overrideRules[0].overriders.plaintext[0].op",
         'unsupported value "move": must be one of add, replace, remove')],
    "bad-target-operation.yaml": [
        ("spec.overrideRules[0].targetOperations[1]",
         'unsupported value "PATCH": must be one of CREATE, UPDATE, DELETE, CONNECT, *')],
    "bad-template-type.yaml": [
        ("spec.overrideRules[1].overriders.template.type",
         'unsupported value "annotation": must be one of annotations, labels, resources, '
         "resourcesOversell, tolerations, affinity, sidecar, inject")],
    "bad-validation-actions.yaml": [
        ("spec.validateRules[0].validationActions[1]",
         'unsupported value "Block": must be one of Deny, Warn, Audit')],
    "cop-missing-override-rules.yaml": [("spec.overrideRules", "required field is missing")],
    "cop-missing-spec.yaml": [("spec", "required field is missing")],
    "empty-override-rules.yaml": [("spec.overrideRules", "must have at least 1 item")],
    "empty-validation-actions.yaml": [
        ("spec.validateRules[0].validationActions", "must have at least 1 item")],
    "validate-pab.yaml": [
        ("spec.validateRules[0].template.type", 'unsupported value "pab": must be one of condition'),
        ("spec.validateRules[0].template.podAvailableBadge", "unknown field"),
        ("spec.validateRules[0].template.condition", "required field is missing"),
    ],
}


def must_name(path: Path) -> str:
    """The field named by the fixture's ``# must-name:`` comment."""
    for line in path.read_text().splitlines():
        if line.startswith("# must-name:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{path.name} has no '# must-name:' line")


def test_every_invalid_fixture_is_listed() -> None:
    assert {p.name for p in INVALID} == set(EXPECTED_INVALID)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_fixture_is_refused_naming_the_field(path: Path) -> None:
    expected = EXPECTED_INVALID[path.name]
    assert errors_of(load(path)) == expected
    assert must_name(path) == expected[0][0]


def test_errors_name_the_policy() -> None:
    with pytest.raises(PolicyErrors) as caught:
        parse_policy(load(DATA / "invalid/bad-template-type.yaml"))
    assert caught.value.policy == "OverridePolicy default/bad-template-type"
    assert str(caught.value).startswith(
        "policy OverridePolicy default/bad-template-type: spec.overrideRules[1].overriders.template.type: "
        'unsupported value "annotation"')


# --- unknown fields, types, nulls --------------------------------------------------------------


def test_unknown_fields_are_reported_at_every_level() -> None:
    obj = minimal_op(targetOperation=["CREATE"])
    obj["specs"] = {}
    obj["spec"]["overrideRules"][0]["overriders"]["templates"] = {}
    obj["spec"]["resourceSelector"] = []
    assert errors_of(obj) == [
        ("specs", "unknown field"),
        ("spec.overrideRules[0].overriders.templates", "unknown field"),
        ("spec.overrideRules[0].targetOperation", "unknown field"),
        ("spec.resourceSelector", "unknown field"),
    ]


def test_metadata_and_status_shapes() -> None:
    obj = minimal_op()
    obj["metadata"].update(uid="u-1", generation=3, resourceVersion="42",
                           creationTimestamp="2024-01-01T00:00:00Z", managedFields=[{"manager": "kubectl"}])
    obj["status"] = {"ruleCount": 1, "conditions": [
        {"type": "Ready", "status": "True", "reason": "Rendered", "observedGeneration": 3,
         "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    policy = parse_policy(obj)
    assert (policy.metadata.name, policy.metadata.namespace, policy.metadata.uid,
            policy.metadata.generation, policy.metadata.resource_version) == ("p", "default", "u-1", 3, "42")
    assert policy.metadata.raw["managedFields"] == [{"manager": "kubectl"}]
    assert policy.status is not None and policy.status.rule_count == 1
    conditions = policy.status.conditions
    assert [(c.type, c.status, c.observed_generation) for c in conditions] == [("Ready", "True", 3)]
    obj["status"]["conditions"][0]["status"] = "Yes"
    obj["metadata"]["generation"] = "3"
    assert errors_of(obj) == [
        ("metadata.generation", "must be of type integer, got string"),
        ("status.conditions[0].status", 'unsupported value "Yes": must be one of True, False, Unknown'),
    ]


@pytest.mark.parametrize(("rule", "expected"), [
    ({"targetOperations": "CREATE"},
     [("spec.overrideRules[0].targetOperations", "must be of type array, got string")]),
    ({"overriders": {"plaintext": [{"op": "add", "path": 5}]}},
     [("spec.overrideRules[0].overriders.plaintext[0].path", "must be of type string, got integer")]),
    ({"overriders": {"plaintext": [{"op": "add"}]}},
     [("spec.overrideRules[0].overriders.plaintext[0].path", "required field is missing")]),
    ({"overriders": {"origin": [{"type": "hostNetwork", "operation": "replace", "hostNetwork": "yes"}]}},
     [("spec.overrideRules[0].overriders.origin[0].hostNetwork", "must be of type boolean, got string")]),
    ({"overriders": {"origin": [{"type": "labels", "operation": "add", "containerCount": True}]}},
     [("spec.overrideRules[0].overriders.origin[0].containerCount", "must be of type integer, got boolean")]),
    ({"overriders": {"template": {"type": "resources", "operation": "add",
                                  "resources": {"limits": {"cpu": 0.5, "memory": "2 gigs"}}}}},
     [("spec.overrideRules[0].overriders.template.resources.limits[cpu]",
       "must be an integer or a string, got number"),
      ("spec.overrideRules[0].overriders.template.resources.limits[memory]",
       '"2 gigs" is not a quantity such as 500m, 2, 1.5Gi or 1e3')]),
    ({"overriders": {"template": {"type": "resourcesOversell", "operation": "add",
                                  "resourcesOversell": {"cpuFactor": 0.5, "memoryFactor": "half"}}}},
     [("spec.overrideRules[0].overriders.template.resourcesOversell.cpuFactor",
       "must be of type string, got number"),
      ("spec.overrideRules[0].overriders.template.resourcesOversell.memoryFactor",
       '"half" is not a decimal number written as a string, e.g. "0.5"')]),
    ({"overriders": {"template": {"type": "tolerations", "operation": "add",
                                  "tolerations": [{"key": "k", "operator": "In", "effect": "NoExecute"}]}}},
     [("spec.overrideRules[0].overriders.template.tolerations[0].operator",
       'unsupported value "In": must be one of Exists, Equal')]),
    ({"failurePolicy": "Retry"},
     [("spec.overrideRules[0].failurePolicy", 'unsupported value "Retry": must be one of Fail, Ignore')]),
    ({"overriders": {"template": {"type": "labels", "operation": "add", "path": "team",
                                  "valueRef": {"from": "http", "path": "body.team"}}}},
     [("spec.overrideRules[0].overriders.template.valueRef.http", 'required when from is "http"')]),
    ({"overriders": {"template": {"type": "labels", "operation": "add", "path": "team",
                                  "valueRef": {"from": "k8s", "path": "/metadata/name"}}}},
     [("spec.overrideRules[0].overriders.template.valueRef.k8s", 'required when from is "k8s"')]),
    ({"overriders": {"template": {"type": "labels", "operation": "add", "path": "team", "valueRef": {
        "from": "http", "http": {"url": "https://x.invalid", "auth": {"expireDuration": "ten minutes"}}}}}},
     [("spec.overrideRules[0].overriders.template.valueRef.http.auth.expireDuration",
       '"ten minutes" is not a duration such as 90s, 10m or 1h30m (not negative)')]),
], ids=["array", "string", "required", "boolean", "bool-is-not-int", "quantity", "decimal", "toleration",
        "failure-policy", "http-needs-http", "k8s-needs-k8s", "duration"])
def test_wrong_shapes_are_reported_with_their_path(rule: dict[str, Any],
                                                   expected: list[tuple[str, str]]) -> None:
    assert errors_of(minimal_op(**rule)) == expected


def test_every_problem_is_reported_at_once() -> None:
    obj = minimal_cvp(validationActions=["Warn", "Nope"], failurePolicy="Maybe",
                      template={"type": "condition", "condition": {"cond": "Exist"}})
    obj["spec"]["resourceSelectors"] = [{"kind": "Pod"}]
    assert errors_of(obj) == [
        ("spec.validateRules[0].validationActions[1]",
         'unsupported value "Nope": must be one of Deny, Warn, Audit'),
        ("spec.validateRules[0].failurePolicy", 'unsupported value "Maybe": must be one of Fail, Ignore'),
        ("spec.validateRules[0].template.condition.dataRef", "required field is missing"),
        ("spec.resourceSelectors[0].apiVersion", "required field is missing"),
    ]


def test_nulls_count_as_absent() -> None:
    # The API server prunes null fields; a required one that is null is missing.
    policy = parse_policy(minimal_op(targetOperations=None, failurePolicy=None))
    assert policy.rules[0].target_operations == []
    assert policy.rules[0].failure_policy == "Fail"
    assert errors_of(minimal_op(overriders=None)) == [
        ("spec.overrideRules[0].overriders", "required field is missing")]


# --- defaults ----------------------------------------------------------------------------------


def test_defaults_are_applied_and_raw_is_untouched() -> None:
    op = parse_policy(minimal_op())
    assert isinstance(op, OverridePolicy)
    assert op.rules[0].failure_policy == "Fail"
    assert "failurePolicy" not in op.rules[0].raw
    cvp_obj = minimal_cvp(template={"type": "condition", "condition": {
        "cond": "Exist", "dataRef": {"from": "current", "path": "/metadata/name"}}})
    before = copy.deepcopy(cvp_obj)
    cvp = parse_policy(cvp_obj)
    assert isinstance(cvp, ClusterValidatePolicy)
    rule = cvp.rules[0]
    assert (rule.failure_policy, rule.validation_actions) == ("Fail", ["Deny"])
    assert rule.template is not None and rule.template.condition.affect_mode == "reject"
    assert cvp_obj == before
    first, second = parse_policy(minimal_cvp()), parse_policy(minimal_cvp())
    assert isinstance(first, ClusterValidatePolicy) and isinstance(second, ClusterValidatePolicy)
    first.rules[0].validation_actions.append("Warn")
    assert second.rules[0].validation_actions == ["Deny"]  # no shared default


def test_absent_optional_fields() -> None:
    policy = parse_policy(minimal_op())
    assert isinstance(policy, OverridePolicy)
    overriders = policy.rules[0].overriders
    assert (overriders.plaintext, overriders.origin, overriders.template) == ([], [], None)
    assert overriders.cue is None
    assert overriders.cel == "[]"
    with pytest.raises(PolicyErrors, match="spec: required field is missing"):
        parse_policy({**minimal_cvp(), "spec": None})  # null is absent, and every kind needs a spec


# --- dispatch and naming -----------------------------------------------------------------------


def test_dispatch_refuses_unknown_kinds_and_versions() -> None:
    obj = {"apiVersion": "policy.kcloudlabs.io/v1", "kind": "Policy", "metadata": {"name": "x"}}
    assert errors_of(obj) == [
        ("apiVersion",
         'unsupported value "policy.kcloudlabs.io/v1": must be one of policy.kcloudlabs.io/v1alpha1'),
        ("kind", "unsupported value \"Policy\": must be one of OverridePolicy, ClusterOverridePolicy, "
                 "ClusterValidatePolicy, ValidatePolicy"),
    ]
    assert errors_of(["not", "an", "object"]) == [("", "a policy must be an object, got array")]


def test_kinds() -> None:
    assert {k: (i.plural, i.singular, i.short_name, i.scope) for k, i in KINDS.items()} == {
        "OverridePolicy": ("overridepolicies", "overridepolicy", "op", "Namespaced"),
        "ClusterOverridePolicy": ("clusteroverridepolicies", "clusteroverridepolicy", "cop", "Cluster"),
        "ClusterValidatePolicy": ("clustervalidatepolicies", "clustervalidatepolicy", "cvp", "Cluster"),
        "ValidatePolicy": ("validatepolicies", "validatepolicy", "vp", "Namespaced"),
    }
    assert (policies.GROUP, policies.VERSION) == ("policy.kcloudlabs.io", "v1alpha1")


def test_is_policy() -> None:
    assert is_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ValidatePolicy"})
    assert is_policy({"apiVersion": "policy.kcloudlabs.io/v2", "kind": "OverridePolicy"})
    assert not is_policy({"apiVersion": "v1", "kind": "Pod"})
    assert not is_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "Other"})
    assert not is_policy("OverridePolicy")


def test_policy_ref() -> None:
    assert policy_ref({"kind": "OverridePolicy", "metadata": {"name": "foo", "namespace": "default"}}) == \
        "OverridePolicy default/foo"
    # a namespace on a cluster-scoped kind is ignored, as the API server does
    assert policy_ref({"kind": "ClusterOverridePolicy", "metadata": {"name": "foo", "namespace": "x"}}) == \
        "ClusterOverridePolicy foo"
    assert policy_ref({"kind": "ValidatePolicy"}) == "ValidatePolicy <unnamed>"
    assert policy_ref(parse_policy(minimal_cvp())) == "ClusterValidatePolicy v"


def test_constant_value_first_set_field_wins() -> None:
    assert ConstantValue(string="a", integer=1).value() == "a"
    assert ConstantValue(integer=0, boolean=True).value() == 0
    assert ConstantValue(string_slice=[], string_map={"k": "v"}).value() == {"k": "v"}
    assert ConstantValue().value() is None


def test_the_inject_example_parses_into_the_core_shapes() -> None:
    cop = parse_policy(load(DATA / "examples/extended/override-inject.yaml"))
    assert isinstance(cop, ClusterOverridePolicy)
    template = cop.rules[0].overriders.template
    assert template is not None and template.inject is not None and template.operation is None
    inject = template.inject
    assert inject.on_conflict == "Override" and template.container_names == ["app", "init"]
    assert [e.name for e in inject.env] == ["DB_PORT", "POD_NAME", "CPU_LIMIT", "DB_USER", "DB_HOST"]
    assert inject.env[1].value_from is not None and inject.env[1].value_from.field_ref is not None
    assert [(m.name, m.read_only, m.sub_path) for m in inject.volume_mounts] == [
        ("cache", None, None), ("settings", True, "conf"), ("podinfo", None, None)]
    assert inject.volumes[0].raw == {"name": "cache", "emptyDir": {"medium": "Memory"}}
    assert inject.env_from[1].prefix == "DB_" and inject.env_from[1].secret_ref is not None
