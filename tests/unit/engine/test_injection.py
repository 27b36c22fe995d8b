"""The inject template: merging into pods and pod templates, conflicts with the pod and between
policies under each onConflict, exclusion, mirror pods, operations, and the marker annotation."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.objects import workloads
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import Mutation, RuleId
from kinitiras_py.engine.running import overriding

Obj = dict[str, Any]
DB_PORT = {"name": "DB_PORT", "value": "6379"}
CACHE_MOUNT = {"name": "cache-volume", "mountPath": "/cache"}
CACHE_VOLUME = {"name": "cache-volume", "emptyDir": {}}
MARK = "policy.kcloudlabs.io/inject-"


def policy(name: str, inject: Obj, *, kind: str = "OverridePolicy", names: list[str] | None = None,
           operations: list[str] | None = None, rv: str = "7",
           kinds: tuple[tuple[str, str], ...] = (), failure_policy: str = "Fail") -> CompiledPolicy:
    template: Obj = {"type": "inject", "inject": inject}
    if names:
        template["containerNames"] = names
    rule: Obj = {"overriders": {"template": template}, "failurePolicy": failure_policy}
    if operations is not None:
        rule["targetOperations"] = operations
    meta: Obj = {"name": name, "resourceVersion": rv}
    if kind == "OverridePolicy":
        meta["namespace"] = "myns"
    selectors = [{"apiVersion": v, "kind": k} for v, k in kinds] or [{"apiVersion": "v1", "kind": "Pod"}]
    return compile_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind, "metadata": meta,
                           "spec": {"resourceSelectors": selectors, "overrideRules": [rule]}})


def pod(**spec: Any) -> Obj:
    spec.setdefault("containers", [{"name": "app", "image": "nginx"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "myns"}, "spec": spec}


def mutate(policies: list[CompiledPolicy], obj: Obj, operation: str = "CREATE") -> Mutation:
    before = json.loads(json.dumps(obj))
    matches = list(PolicyIndex(policies).matching(obj, operation, "myns"))
    result = overriding.mutate(matches, obj, {"request": {"operation": operation}})
    assert obj == before, "the received object was modified"
    if result.failure is None:
        assert jsonpatch.apply_patch(before, result.patch) == result.object
    return result


def containers(obj: Obj) -> list[Obj]:
    return [c for _, _, c in workloads.containers(obj)]


# --- merging ----------------------------------------------------------------------------------------


def test_items_are_appended_to_every_container_and_init_container_and_volumes_once() -> None:
    obj = pod(containers=[{"name": "a", "env": [{"name": "X", "value": "1"}]}, {"name": "b"}],
              initContainers=[{"name": "init"}], volumes=[{"name": "data", "emptyDir": {}}])
    p = policy("db", {"env": [DB_PORT], "volumeMounts": [CACHE_MOUNT], "volumes": [CACHE_VOLUME],
                      "envFrom": [{"configMapRef": {"name": "db-config"}}]})
    result = mutate([p], obj)
    spec = result.object["spec"]
    assert spec["containers"][0]["env"] == [{"name": "X", "value": "1"}, DB_PORT]
    for c in [*spec["containers"], *spec["initContainers"]]:
        assert DB_PORT in c["env"] and c["volumeMounts"] == [CACHE_MOUNT]
        assert c["envFrom"] == [{"configMapRef": {"name": "db-config"}}]
    assert spec["volumes"] == [{"name": "data", "emptyDir": {}}, CACHE_VOLUME]
    assert result.object["metadata"]["annotations"] == {MARK + "db": "7"}
    assert result.warnings == []


def test_container_names_narrow_the_containers_but_volumes_still_go_in() -> None:
    obj = pod(containers=[{"name": "a"}, {"name": "b"}], initContainers=[{"name": "init"}])
    result = mutate([policy("db", {"env": [DB_PORT], "volumes": [CACHE_VOLUME]}, names=["b"])], obj)
    assert [c.get("env") for c in containers(result.object)] == [None, [DB_PORT], None]
    assert result.object["spec"]["volumes"] == [CACHE_VOLUME]


def test_an_equal_item_is_kept_once() -> None:
    obj = pod(containers=[{"name": "a", "env": [DB_PORT], "volumeMounts": [CACHE_MOUNT]}], volumes=[CACHE_VOLUME])
    result = mutate([policy("db", {"env": [DB_PORT], "volumeMounts": [CACHE_MOUNT], "volumes": [CACHE_VOLUME]})], obj)
    assert result.object["spec"] == obj["spec"]
    assert result.patch == [{"op": "add", "path": "/metadata/annotations", "value": {MARK + "db": "7"}}]


def test_two_policies_with_equal_items_add_them_once_envfrom_included() -> None:
    # PodPreset appended envFrom from every preset, so two presets naming one ConfigMap gave it twice.
    shared = {"env": [DB_PORT], "envFrom": [{"configMapRef": {"name": "db-config"}}], "volumes": [CACHE_VOLUME]}
    result = mutate([policy("a", shared), policy("b", {**shared, "volumeMounts": [CACHE_MOUNT]})], pod())
    app = result.object["spec"]["containers"][0]
    assert app["env"] == [DB_PORT]
    assert app["envFrom"] == [{"configMapRef": {"name": "db-config"}}]
    assert app["volumeMounts"] == [CACHE_MOUNT]
    assert result.object["spec"]["volumes"] == [CACHE_VOLUME]
    assert result.object["metadata"]["annotations"] == {MARK + "a": "7", MARK + "b": "7"}


def test_configmap_volumes_are_written_as_the_api_server_defaults_them() -> None:
    volume = {"name": "conf", "configMap": {"name": "c"}}
    result = mutate([policy("c", {"volumes": [volume]})], pod())
    assert result.object["spec"]["volumes"] == [{"name": "conf", "configMap": {"name": "c", "defaultMode": 420}}]
    # ...so a pod that went through the API server (defaultMode written) compares equal: no conflict.
    again = mutate([policy("c", {"volumes": [volume]})], result.object)
    assert again.patch == [] and again.warnings == []


# --- conflicts with the pod --------------------------------------------------------------------------

POD_WITH_OTHER_PORT = pod(containers=[{"name": "app", "env": [{"name": "DB_PORT", "value": "5432"}],
                                       "envFrom": [{"secretRef": {"name": "creds"}}]}])


def test_pod_conflict_skip_leaves_the_pod_unchanged_with_a_warning_naming_policy_and_field() -> None:
    p = policy("db", {"env": [DB_PORT], "volumes": [CACHE_VOLUME], "envFrom": [{"configMapRef": {"name": "x"}}]})
    result = mutate([p], POD_WITH_OTHER_PORT)
    assert result.failure is None
    assert result.patch == [] and result.object == POD_WITH_OTHER_PORT
    assert result.warnings == ["OverridePolicy myns/db: not injected (onConflict Skip): env name DB_PORT "
                               "(the pod holds it with another value), in container app"]


def test_pod_conflict_deny_names_policy_and_field() -> None:
    result = mutate([policy("db", {"env": [DB_PORT], "onConflict": "Deny"})], POD_WITH_OTHER_PORT)
    assert result.failure is not None and not result.failure.ignored
    assert str(result.failure) == ("policy OverridePolicy myns/db, rule 0: inject conflict (onConflict Deny): env "
                                   "name DB_PORT (the pod holds it with another value), in container app")
    assert result.patch == [] and result.object == POD_WITH_OTHER_PORT


def test_pod_conflict_override_replaces_the_pods_item_in_place() -> None:
    result = mutate([policy("db", {"env": [DB_PORT], "onConflict": "Override"})], POD_WITH_OTHER_PORT)
    app = result.object["spec"]["containers"][0]
    assert app["env"] == [DB_PORT]
    assert app["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert result.warnings == []


def test_mount_conflicts_by_mount_path_as_well_as_by_name() -> None:
    obj = pod(containers=[{"name": "app", "volumeMounts": [{"name": "other", "mountPath": "/cache"}]}])
    skipped = mutate([policy("db", {"volumeMounts": [CACHE_MOUNT]})], obj)
    assert skipped.patch == [] and "volumeMounts name cache-volume / mountPath /cache" in skipped.warnings[0]
    replaced = mutate([policy("db", {"volumeMounts": [CACHE_MOUNT], "onConflict": "Override"})], obj)
    assert replaced.object["spec"]["containers"][0]["volumeMounts"] == [CACHE_MOUNT]


def test_override_of_a_mount_clashing_with_two_items_replaces_one_and_removes_the_other() -> None:
    obj = pod(containers=[{"name": "app", "volumeMounts": [{"name": "cache-volume", "mountPath": "/old"},
                                                           {"name": "keep", "mountPath": "/keep"},
                                                           {"name": "other", "mountPath": "/cache"}]}])
    result = mutate([policy("db", {"volumeMounts": [CACHE_MOUNT], "onConflict": "Override"})], obj)
    mounts = result.object["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [CACHE_MOUNT, {"name": "keep", "mountPath": "/keep"}]


def test_envfrom_conflict_never_drops_the_containers_envfrom() -> None:
    # PodPreset set a container's envFrom to nothing when merging it failed.
    obj = pod(containers=[{"name": "app", "envFrom": [{"configMapRef": {"name": "db-config", "optional": True}},
                                                      {"secretRef": {"name": "creds"}}]}])
    result = mutate([policy("db", {"envFrom": [{"configMapRef": {"name": "db-config"}}], "env": [DB_PORT]})], obj)
    assert result.object == obj and result.patch == []
    assert "envFrom configMapRef db-config" in result.warnings[0]


def test_envfrom_of_one_configmap_with_another_prefix_is_another_item() -> None:
    obj = pod(containers=[{"name": "app", "envFrom": [{"configMapRef": {"name": "c"}}]}])
    result = mutate([policy("db", {"envFrom": [{"prefix": "DB_", "configMapRef": {"name": "c"}}]})], obj)
    assert result.object["spec"]["containers"][0]["envFrom"] == [{"configMapRef": {"name": "c"}},
                                                                 {"prefix": "DB_", "configMapRef": {"name": "c"}}]


# --- conflicts between policies ----------------------------------------------------------------------

OTHER_PORT = {"name": "DB_PORT", "value": "5432"}


@pytest.mark.parametrize("modes", [("Skip", "Skip"), ("Skip", "Override"), ("Override", "Skip")])
def test_policy_conflict_skip_leaves_the_pod_unchanged_by_every_policy_involved(modes: tuple[str, str]) -> None:
    a = policy("a", {"env": [DB_PORT], "volumes": [CACHE_VOLUME], "onConflict": modes[0]})
    b = policy("b", {"env": [OTHER_PORT], "onConflict": modes[1]})
    bystander = policy("c", {"env": [{"name": "LOG", "value": "debug"}]})
    result = mutate([a, b, bystander], pod())
    assert result.object["spec"]["containers"][0]["env"] == [{"name": "LOG", "value": "debug"}]
    assert "volumes" not in result.object["spec"]
    assert result.object["metadata"]["annotations"] == {MARK + "c": "7"}
    assert result.warnings == ["OverridePolicy myns/a, OverridePolicy myns/b: not injected (onConflict Skip): env "
                               "name DB_PORT (the policies set different values), in container app"]


@pytest.mark.parametrize("modes", [("Deny", "Skip"), ("Override", "Deny"), ("Deny", "Deny")])
def test_policy_conflict_deny_names_both_policies_and_the_field(modes: tuple[str, str]) -> None:
    a = policy("a", {"env": [DB_PORT], "onConflict": modes[0]})
    b = policy("b", {"env": [OTHER_PORT], "onConflict": modes[1]})
    result = mutate([a, b], pod())
    assert result.failure is not None
    assert result.failure.reason == ("inject conflict (onConflict Deny) between OverridePolicy myns/a, OverridePolicy "
                                     "myns/b: env name DB_PORT (the policies set different values), in container app")


def test_policy_conflict_override_the_later_policy_wins() -> None:
    a = policy("a", {"env": [DB_PORT, {"name": "A", "value": "1"}], "onConflict": "Override"})
    b = policy("b", {"env": [OTHER_PORT], "onConflict": "Override"}, kind="ClusterOverridePolicy")
    # Cluster policies come first, so the namespaced one (a) is the later and wins.
    result = mutate([a, b], pod())
    assert result.object["spec"]["containers"][0]["env"] == [DB_PORT, {"name": "A", "value": "1"}]
    assert result.object["metadata"]["annotations"] == {MARK + "a": "7", "policy.kcloudlabs.io/cluster-inject-b": "7"}
    assert result.warnings == []


def test_inject_rules_run_together_at_the_first_ones_place_after_earlier_rules() -> None:
    label_first = compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "aaa"},
        "spec": {"overrideRules": [{"overriders": {"plaintext": [
            {"op": "add", "path": "/spec/containers/0/env", "value": [OTHER_PORT]}]}}]}})
    result = mutate([label_first, policy("db", {"env": [DB_PORT]})], pod())
    # The plaintext rule ran first, so the inject rule saw its DB_PORT and skipped.
    assert result.object["spec"]["containers"][0]["env"] == [OTHER_PORT]
    assert result.warnings and "OverridePolicy myns/db" in result.warnings[0]


# --- what is left alone --------------------------------------------------------------------------


@pytest.mark.parametrize("annotation", ["podpreset.admission.kubernetes.io/exclude",
                                        "policy.kcloudlabs.io/inject-exclude"])
def test_the_exclude_annotations_leave_pods_and_pod_templates_alone(annotation: str) -> None:
    p = policy("db", {"env": [DB_PORT]}, kinds=(("v1", "Pod"), ("apps/v1", "Deployment")))
    obj = pod()
    obj["metadata"]["annotations"] = {annotation: "true"}
    assert mutate([p], obj).patch == []
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "myns"},
                  "spec": {"template": {"metadata": {"annotations": {annotation: "true"}}, "spec": pod()["spec"]}}}
    assert mutate([p], deployment).patch == []
    obj["metadata"]["annotations"] = {annotation: "false"}
    assert mutate([p], obj).patch != []


def test_mirror_pods_are_never_changed() -> None:
    obj = pod()
    obj["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    result = mutate([policy("db", {"env": [DB_PORT], "onConflict": "Override"})], obj)
    assert result.patch == [] and result.warnings == []


def test_only_create_by_default_and_other_operations_when_asked() -> None:
    assert mutate([policy("db", {"env": [DB_PORT]})], pod(), "UPDATE").patch == []
    assert mutate([policy("db", {"env": [DB_PORT]}, operations=["UPDATE"])], pod(), "UPDATE").patch != []
    assert mutate([policy("db", {"env": [DB_PORT]}, operations=["*"])], pod(), "UPDATE").patch != []


def test_kinds_without_a_pod_spec_are_left_alone() -> None:
    p = policy("db", {"env": [DB_PORT]}, kinds=(("v1", "ConfigMap"),))
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "myns"}}
    assert mutate([p], config_map).patch == []


# --- every pod-bearing kind ---------------------------------------------------------------------------

API_VERSIONS = {"Pod": "v1", "ReplicationController": "v1", "PodTemplate": "v1", "Job": "batch/v1",
                "CronJob": "batch/v1beta1"}


@pytest.mark.parametrize("kind", sorted(workloads.POD_TEMPLATE_PATHS))
def test_every_pod_bearing_kind_gets_its_pod_spec_injected_and_its_pod_template_marked(kind: str) -> None:
    api_version = API_VERSIONS.get(kind, "apps/v1")
    keys = workloads.POD_TEMPLATE_PATHS[kind]
    obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w", "namespace": "myns"}}
    node = obj
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = {"containers": [{"name": "app", "image": "nginx"}]}
    p = policy("db", {"env": [DB_PORT], "volumes": [CACHE_VOLUME]}, kinds=((api_version, kind),))
    result = mutate([p], obj)
    spec = workloads.pod_spec(result.object)
    assert spec is not None
    assert spec["containers"][0]["env"] == [DB_PORT] and spec["volumes"] == [CACHE_VOLUME]
    meta = result.object
    for key in keys[:-1]:
        meta = meta[key]
    assert meta["metadata"]["annotations"] == {MARK + "db": "7"}
    again = mutate([p], result.object)
    assert again.patch == [] and again.object == result.object


# --- idempotency ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Skip", "Deny", "Override"])
def test_reinvocation_changes_nothing(mode: str) -> None:
    policies = [policy("a", {"env": [DB_PORT], "volumeMounts": [CACHE_MOUNT], "volumes": [CACHE_VOLUME],
                             "onConflict": mode}),
                policy("b", {"envFrom": [{"configMapRef": {"name": "c"}}], "volumes": [CACHE_VOLUME],
                             "onConflict": mode})]
    obj = pod(containers=[{"name": "app", "env": [{"name": "X", "value": "1"}]}, {"name": "side"}])
    once = mutate(policies, obj)
    twice = mutate(policies, copy.deepcopy(once.object))
    assert once.patch != [] and twice.patch == [] and twice.object == once.object and twice.failure is None


def test_a_deployments_pods_are_injected_once_when_the_policy_selects_both() -> None:
    p = policy("db", {"env": [DB_PORT], "volumes": [CACHE_VOLUME]},
               kinds=(("apps/v1", "Deployment"), ("v1", "Pod")))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "myns"},
                  "spec": {"template": {"metadata": {"labels": {"app": "d"}}, "spec": pod()["spec"]}}}
    template = mutate([p], deployment).object["spec"]["template"]
    created = {"apiVersion": "v1", "kind": "Pod", "spec": template["spec"],
               "metadata": {**template["metadata"], "name": "d-1", "namespace": "myns"}}
    result = mutate([p], created)
    assert result.patch == []
    assert result.object["spec"]["containers"][0]["env"] == [DB_PORT]


def test_the_marker_follows_the_policys_resource_version() -> None:
    obj = mutate([policy("db", {"env": [DB_PORT]}, rv="7")], pod()).object
    result = mutate([policy("db", {"env": [DB_PORT]}, rv="9")], obj)
    assert result.patch == [{"op": "replace", "path": "/metadata/annotations/policy.kcloudlabs.io~1inject-db",
                             "value": "9"}]


# --- rule errors ------------------------------------------------------------------------------------


def test_a_rule_that_fails_is_decided_by_its_failure_policy() -> None:
    p = policy("db", {"env": [DB_PORT]})
    # A list index beyond what the CEL bounds allow fails the rendered rule; the pod is too large.
    obj = pod(containers=[{"name": "app", "env": [{"name": f"E{i}", "value": "v"} for i in range(1500)]}])
    result = mutate([p], obj)
    assert result.failure is not None and "OverridePolicy myns/db" in str(result.failure)
    ignored = compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "db", "namespace": "myns"},
        "spec": {"overrideRules": [{"failurePolicy": "Ignore", "overriders": {
            "template": {"type": "inject", "inject": {"env": [DB_PORT]}}}}]}})
    skipped = mutate([ignored, policy("ok", {"volumes": [CACHE_VOLUME]})], obj)
    assert skipped.failure is None and "failurePolicy Ignore" in skipped.warnings[0]
    assert skipped.object["spec"]["volumes"] == [CACHE_VOLUME]


def test_large_pods_within_the_documented_bounds_are_injected() -> None:
    # 10 containers of 100 env entries, 3 items: linear loops (`exists`, `in`) keep it within
    # cel-cpp's 10,000 iterations and the cost bound.
    env = [{"name": f"E{i}", "value": "v"} for i in range(100)]
    obj = pod(containers=[{"name": f"c{j}", "env": env} for j in range(10)])
    p = policy("db", {"env": [DB_PORT, {"name": "A", "value": "1"}], "volumes": [CACHE_VOLUME]})
    result = mutate([p], obj)
    assert result.failure is None
    assert all(c["env"][-2:] == [DB_PORT, {"name": "A", "value": "1"}] for c in result.object["spec"]["containers"])


def test_operations_that_do_not_apply_fail_the_first_inject_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinitiras_py.engine.running import injection

    monkeypatch.setattr(injection, "_operations",
                        lambda plans: [{"op": "replace", "path": "/spec/containers/7/env/0", "value": DB_PORT}])
    result = mutate([policy("db", {"env": [DB_PORT]})], pod())
    assert result.failure is not None and result.failure.policy.name == "db"
    assert "does not exist" in result.failure.reason or "out of range" in result.failure.reason
    assert result.patch == [] and result.object == pod()


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_an_inject_rule_whose_conditions_failed_is_decided_by_its_failure_policy(failure_policy: str) -> None:
    good = policy("good", {"env": [DB_PORT]})
    failing = policy("failing", {"volumes": [CACHE_VOLUME]}, failure_policy=failure_policy)
    key = RuleId(failing.identity, 0)
    obj = pod()
    matches = list(PolicyIndex([failing, good]).matching(obj, "CREATE", "myns"))
    result = overriding.mutate(matches, obj, {"request": {"operation": "CREATE"}},
                               lookup_errors={key: "matchConditions: no such key: nope"})
    if failure_policy == "Fail":
        assert result.failure is not None and "no such key: nope" in str(result.failure)
        assert result.object is obj
    else:
        assert result.failure is None
        assert any("no such key: nope" in w for w in result.warnings)
        assert containers(result.object)[0]["env"] == [DB_PORT]
        assert "volumes" not in result.object["spec"]
