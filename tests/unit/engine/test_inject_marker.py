"""The inject rule's ``marker``: a rule's own annotation key and value (what a converted PodPreset
writes), ours by default, and none on a pod the rule skips."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.base.errors import PolicyErrors
from tests.unit.engine.test_injection import CACHE_MOUNT, CACHE_VOLUME, DB_PORT, MARK, mutate, pod, policy

PRESET_KEY = "podpreset.admission.kubernetes.io/podpreset-db"


def annotations(result: Any) -> dict[str, str]:
    found: dict[str, str] = result.object["metadata"].get("annotations", {})
    return found


def test_a_rules_own_marker_is_written_instead_of_ours() -> None:
    marked = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "4711"}})
    result = mutate([marked], pod())
    assert annotations(result) == {PRESET_KEY: "4711"}


def test_a_marker_without_value_carries_the_policys_resource_version() -> None:
    marked = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY}}, rv="88")
    assert annotations(mutate([marked], pod())) == {PRESET_KEY: "88"}


def test_without_a_marker_native_policies_keep_ours() -> None:
    plain = policy("db", {"env": [DB_PORT]}, rv="9")
    cluster = policy("wide", {"volumes": [CACHE_VOLUME]}, kind="ClusterOverridePolicy", rv="3")
    assert annotations(mutate([plain, cluster], pod())) == {MARK + "db": "9",
                                                            "policy.kcloudlabs.io/cluster-inject-wide": "3"}


def test_a_skipped_rule_writes_no_marker_and_the_others_write_theirs() -> None:
    # (the pod holds DB_PORT with another value: "db" is skipped, "cache" is not involved)
    db = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "1"}})
    cache = policy("cache", {"volumes": [CACHE_VOLUME], "marker": {"key": "example.com/cache", "value": "2"}})
    result = mutate([db, cache], pod(containers=[{"name": "app", "env": [{"name": "DB_PORT", "value": "5432"}]}]))
    assert annotations(result) == {"example.com/cache": "2"}
    assert result.warnings and "not injected (onConflict Skip)" in result.warnings[0]


def test_a_pod_that_already_has_every_item_is_still_marked() -> None:
    # PodPreset marked every pod it applied to, whether or not the pod already had the items.
    marked = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "5"}})
    result = mutate([marked], pod(containers=[{"name": "app", "env": [DB_PORT]}]))
    assert result.patch == [{"op": "add", "path": "/metadata/annotations", "value": {PRESET_KEY: "5"}}]


def test_a_marked_pod_is_not_patched_again() -> None:
    marked = policy("db", {"env": [DB_PORT], "volumeMounts": [CACHE_MOUNT], "volumes": [CACHE_VOLUME],
                           "marker": {"key": PRESET_KEY, "value": "5"}})
    once = mutate([marked], pod()).object
    assert mutate([marked], once).patch == []


def test_an_excluded_pod_gets_no_marker() -> None:
    marked = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "5"}})
    excluded = pod()
    excluded["metadata"]["annotations"] = {"podpreset.admission.kubernetes.io/exclude": "true"}
    assert mutate([marked], excluded).patch == []


def test_a_pod_templates_marker_is_the_rules_own() -> None:
    marked = policy("db", {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "5"}},
                    kinds=(("apps/v1", "Deployment"),))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "myns"},
                  "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "app"}]}}}}
    result = mutate([marked], deployment)
    assert result.object["spec"]["template"]["metadata"]["annotations"] == {PRESET_KEY: "5"}
    assert "annotations" not in result.object["metadata"]


@pytest.mark.parametrize(("marker", "field", "reason"), [
    ({"key": "a/b/c"}, "marker.key", "invalid annotation key 'a/b/c'"),
    ({"key": "example.com/" + "x" * 64}, "marker.key", "name part must be no more than 63 characters"),
    ({"value": "1"}, "marker.key", "required"),
    ({"key": "example.com/a", "value": 1}, "marker.value", "must be of type string"),
    ({"key": "example.com/a", "other": 1}, "marker.other", "unknown field"),
])
def test_a_marker_that_cannot_be_written_is_refused_at_its_field(marker: dict[str, Any], field: str,
                                                                 reason: str) -> None:
    with pytest.raises(PolicyErrors) as caught:
        policy("db", {"env": [DB_PORT], "marker": marker})
    where = f"spec.overrideRules[0].overriders.template.inject.{field}"
    assert any(e.path == where and reason in e.reason for e in caught.value.errors), str(caught.value)


def test_a_name_too_long_for_our_marker_is_fine_with_an_own_marker() -> None:
    name = "n" * 60  # "inject-" + 60 characters would pass the 63 of an annotation's name part
    with pytest.raises(PolicyErrors, match="shorten the policy name"):
        policy(name, {"env": [DB_PORT]})
    marked = policy(name, {"env": [DB_PORT], "marker": {"key": PRESET_KEY, "value": "1"}})
    assert annotations(mutate([marked], pod())) == {PRESET_KEY: "1"}
