"""Policies' selectors → webhook rules: resolution, wildcards, exclusions, merging, unknown kinds."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.registration import builder, rules
from kinitiras_py.registration.rules import compute_rules, merge, parse_api_version

R = Resource
SERVED = [
    R("", "v1", "configmaps", True, "ConfigMap"), R("", "v1", "pods", True, "Pod"),
    R("", "v1", "events", True, "Event"), R("", "v1", "namespaces", False, "Namespace"),
    R("apps", "v1", "deployments", True, "Deployment"), R("apps", "v1", "replicasets", True, "ReplicaSet"),
    R("coordination.k8s.io", "v1", "leases", True, "Lease"),
    R("coordination.k8s.io", "v1beta1", "leases", True, "Lease"),
    R("events.k8s.io", "v1", "events", True, "Event"),
    R("networking.k8s.io", "v1", "ingresses", True, "Ingress"),
    R("extensions", "v1beta1", "ingresses", True, "Ingress"),
    R("policy.kcloudlabs.io", "v1alpha1", "clusteroverridepolicies", False, "ClusterOverridePolicy"),
    R("example.com", "v1", "widgets", True, "Widget"), R("example.com", "v2", "widgets", True, "Widget"),
    R("example.com", "v2", "gadgets", True, "Gadget"),
]


class FakeCatalog:
    """Discovery from a fixed list; ``broken`` groups fail as an unreachable API server would."""

    def __init__(self, served: list[Resource] = SERVED, broken: frozenset[str] = frozenset()) -> None:
        self.served = served
        self.broken = broken
        self.calls: list[str] = []

    async def resolve(self, api_version: str, kind: str) -> Resource:
        self.calls.append(f"resolve {api_version} {kind}")
        group, _, version = api_version.rpartition("/")
        if group in self.broken:
            raise LookupError(f"discovery of {api_version} failed: 503 Service Unavailable")
        for res in self.served:
            if (res.group, res.version, res.kind) == (group, version, kind):
                return res
        raise LookupError(f"unknown kind {kind} in {api_version}")

    async def groups(self) -> list[str]:
        self.calls.append("groups")
        return sorted({r.group for r in self.served} | {"authentication.k8s.io"})  # virtual resources only

    async def group_resources(self, group: str) -> list[Resource]:
        self.calls.append(f"resources {group}")
        if group in self.broken:
            raise LookupError(f"discovery of /apis/{group} failed: 503")
        return [r for r in self.served if r.group == group]


def rule(group: str, version: str, *resources: str) -> Obj:
    return {"apiGroups": [group], "apiVersions": [version], "resources": list(resources), "scope": "*"}


async def compute(*policies: list[Obj], catalog: FakeCatalog | None = None) -> rules.RuleSet:
    return await compute_rules(list(policies), catalog or FakeCatalog())


def test_parse_api_version_forms() -> None:
    assert parse_api_version("apps/v1") == ("apps", "v1")
    assert parse_api_version("apps/*") == ("apps", None)
    assert parse_api_version("apps") == ("apps", None)
    assert parse_api_version("v1") == ("", "v1")
    assert parse_api_version("v2beta1") == ("", "v2beta1")
    assert parse_api_version("*") == (None, None)
    assert parse_api_version("") == (None, None)
    assert parse_api_version("*/v1") == (None, "v1")


async def test_exact_kinds_resolve_and_merge_per_group_version() -> None:
    result = await compute(
        [{"apiVersion": "apps/v1", "kind": "Deployment"}, {"apiVersion": "v1", "kind": "Pod"}],
        [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}, {"apiVersion": "apps/v1", "kind": "Deployment"}],
    )
    assert result.rules == [rule("", "v1", "configmaps", "pods"), rule("apps", "v1", "deployments")]
    assert result.skipped == [] and not result.retry and not result.incomplete


async def test_no_policies_means_no_rules() -> None:
    result = await compute()
    assert result.rules == [] and result.skipped == []


async def test_kind_wildcard_in_a_plain_group_stays_a_wildcard() -> None:
    catalog = FakeCatalog()
    result = await compute([{"apiVersion": "apps/v1", "kind": "*"}, {"apiVersion": "apps/v1", "kind": "Deployment"}],
                           catalog=catalog)
    assert result.rules == [rule("apps", "v1", "*")]
    assert not any(c.startswith("resources") for c in catalog.calls)


async def test_group_only_and_group_star_mean_every_version() -> None:
    for api_version in ("apps", "apps/*"):
        result = await compute([{"apiVersion": api_version, "kind": "Deployment"}])
        assert result.rules == [rule("apps", "*", "deployments")], api_version
        result = await compute([{"apiVersion": api_version}])
        assert result.rules == [rule("apps", "*", "*")], api_version


async def test_all_versions_absorb_specific_versions() -> None:
    result = await compute([{"apiVersion": "example.com/v1", "kind": "Widget"},
                            {"apiVersion": "example.com/v2", "kind": "Gadget"},
                            {"apiVersion": "example.com", "kind": "Widget"}])
    assert result.rules == [rule("example.com", "*", "widgets"), rule("example.com", "v2", "gadgets")]
    result = await compute([{"apiVersion": "example.com/v2", "kind": "Gadget"}, {"apiVersion": "example.com/*"}])
    assert result.rules == [rule("example.com", "*", "*")]


async def test_kind_in_any_group_finds_every_group_serving_it() -> None:
    result = await compute([{"apiVersion": "*", "kind": "Ingress"}])
    assert result.rules == [rule("extensions", "*", "ingresses"), rule("networking.k8s.io", "*", "ingresses")]
    result = await compute([{"kind": "Widget"}])
    assert result.rules == [rule("example.com", "*", "widgets")]


async def test_leases_events_and_policies_are_never_registered_explicitly() -> None:
    result = await compute([{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
                            {"apiVersion": "v1", "kind": "Event"}, {"apiVersion": "*", "kind": "Event"},
                            {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy"},
                            {"apiVersion": "v1", "kind": "Pod"}])
    assert result.rules == [rule("", "v1", "pods")]
    assert any("leases.coordination.k8s.io is never sent" in s for s in result.skipped)
    assert any("events is never sent" in s for s in result.skipped)
    assert any("events.events.k8s.io is never sent" in s for s in result.skipped)
    assert not result.retry  # an exclusion is final


async def test_wildcards_over_groups_with_excluded_resources_are_expanded() -> None:
    result = await compute([{"apiVersion": "v1", "kind": "*"}, {"apiVersion": "coordination.k8s.io"},
                            {"apiVersion": "events.k8s.io/v1"}])
    assert result.rules == [rule("", "v1", "configmaps", "namespaces", "pods")]


async def test_everything_expands_only_where_it_must() -> None:
    expected = [rule("", "*", "configmaps", "namespaces", "pods"), rule("apps", "*", "*"),
                rule("example.com", "*", "*"), rule("extensions", "*", "*"), rule("networking.k8s.io", "*", "*")]
    assert (await compute([])).rules == expected  # a policy without selectors
    assert (await compute([{"apiVersion": "*", "kind": "*"}])).rules == expected
    assert (await compute([{}], [{"apiVersion": "apps/v1", "kind": "Deployment"}])).rules == expected
    versioned = await compute([{"apiVersion": "*/v1"}])
    assert rule("", "v1", "configmaps", "namespaces", "pods") in versioned.rules
    assert rule("apps", "v1", "*") in versioned.rules


async def test_unknown_kinds_are_skipped_with_a_reason_and_retried() -> None:
    result = await compute([{"apiVersion": "example.com/v1", "kind": "Sprocket"},
                            {"apiVersion": "nothere.io", "kind": "Thing"},
                            {"apiVersion": "v1", "kind": "Pod"}])
    assert result.rules == [rule("", "v1", "pods")]
    assert result.retry and not result.incomplete
    assert len(result.skipped) == 2
    assert any("Sprocket" in s for s in result.skipped) and any("Thing" in s for s in result.skipped)


async def test_discovery_failure_marks_the_result_incomplete() -> None:
    broken = FakeCatalog(broken=frozenset({"example.com"}))
    result = await compute([{"apiVersion": "example.com/v1", "kind": "Widget"},
                            {"apiVersion": "v1", "kind": "Pod"}], catalog=broken)
    assert result.incomplete and result.retry
    assert result.rules == [rule("", "v1", "pods")]
    broken_core = FakeCatalog(broken=frozenset({""}))
    result = await compute([{"apiVersion": "v1"}], catalog=broken_core)
    assert result.incomplete and result.rules == []


async def test_malformed_selectors_are_ignored() -> None:
    result = await compute(["not a selector", {"apiVersion": "v1", "kind": "Pod"}])  # type: ignore[list-item]
    assert result.rules == [rule("", "v1", "pods")]


def test_merge_drops_empty_and_absorbed_entries() -> None:
    assert merge({("a", "v1"): set(), ("b", "v1"): {"x", "*"}, ("c", "*"): {"x"}, ("c", "v1"): {"x", "y"}}) == [
        rule("b", "v1", "*"), rule("c", "*", "x"), rule("c", "v1", "y")]


@dataclass(frozen=True)
class Policy:
    selectors: list[Obj]
    validating: bool


async def test_validate_gets_only_what_validate_policies_select() -> None:
    pods, deployments = {"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "apps/v1", "kind": "Deployment"}
    result = await rules.compute_split([Policy([pods], False), Policy([deployments], True)], FakeCatalog())
    assert result.rules == [rule("", "v1", "pods")]
    assert result.validate_rules == [rule("apps", "v1", "deployments")]
    overrides_only = await rules.compute_split([Policy([pods], False), Policy([], False)], FakeCatalog())
    assert overrides_only.validate_rules == []  # no validate policy: /validate sees only the policy kinds
    assert rule("", "*", "configmaps", "namespaces", "pods") in overrides_only.rules


async def test_split_reports_what_either_side_could_not_cover() -> None:
    broken = FakeCatalog(broken=frozenset({"example.com"}))
    result = await rules.compute_split([Policy([{"apiVersion": "v1", "kind": "Pod"}], False),
                                        Policy([{"apiVersion": "example.com/v1", "kind": "Widget"}], True)], broken)
    assert result.incomplete and result.retry and len(result.skipped) == 1
    assert result.rules == [rule("", "v1", "pods")] and result.validate_rules == []


def test_builder_sends_validate_only_its_rules_and_always_the_policy_kinds() -> None:
    mutating, validating = builder.desired(builder.Registration(), b"CA", [rule("", "v1", "pods")], [])
    assert [h["name"] for h in mutating["webhooks"]] == ["mutate-policies.kinitiras.kcloudlabs.io",
                                                          "mutate.kinitiras.kcloudlabs.io"]
    assert [h["name"] for h in validating["webhooks"]] == ["validate-policies.kinitiras.kcloudlabs.io"]
    assert validating["webhooks"][0]["rules"] == [builder.policy_rule()]
    _, validating = builder.desired(builder.Registration(), b"CA", [rule("", "v1", "pods")])
    assert validating["webhooks"][1]["rules"][0]["resources"] == ["pods"]  # no validate rules given: the same
