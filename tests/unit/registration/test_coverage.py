"""The coverage gate: policies get in force only after a pass confirmed their rules in the cluster."""

from __future__ import annotations

import copy

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.registration import builder
from kinitiras_py.registration.coverage import CoverageGate, covers
from kinitiras_py.registration.reconciler import Reconciler
from tests.unit.registration.test_reconciler import CA1, CONFIGMAPS, MUTATING, FakeApi, FakeWatch, make, policy
from tests.unit.registration.test_rules import FakeCatalog

PODS = {"apiVersion": "v1", "kind": "Pod"}


def gated(api: FakeApi, watch: FakeWatch, leader: bool = True) -> tuple[Reconciler, CoverageGate, list[str]]:
    reported: list[str] = []

    async def on_in_force(p: CompiledPolicy) -> None:
        reported.append(f"{p.name}@{p.generation}")

    gate = CoverageGate(watch, on_in_force)
    return make(api, watch, gate=gate, is_leader=lambda: leader), gate, reported


async def test_a_policy_is_in_force_only_after_the_pass_that_wrote_its_rules() -> None:
    api, watch = FakeApi(), FakeWatch()
    rec, gate, reported = gated(api, watch)
    first = policy("p", CONFIGMAPS)
    watch.overrides.put(first)
    assert not gate.in_force(first) and list(gate.overrides) == []
    assert await rec.reconcile() is True
    assert "configmaps" in str(api.objects[MUTATING]) and gate.in_force(first) and reported == ["p@1"]
    assert await rec.reconcile() is True
    assert reported == ["p@1"]  # reported once per version

    # A newer version replaces the old one in force only after its own pass; a deletion is immediate.
    second = policy("p", CONFIGMAPS, PODS, generation=2)
    watch.overrides.put(second)
    assert gate.in_force(first) and not gate.in_force(second)
    assert await rec.reconcile() is True
    assert gate.in_force(second) and reported == ["p@1", "p@2"]
    gate.withdraw("ClusterOverridePolicy", None, "p")
    assert list(gate.overrides) == []


async def test_a_version_replaced_during_the_pass_is_not_put_in_force() -> None:
    api, watch = FakeApi(), FakeWatch()
    _rec, gate, _reported = gated(api, watch)
    old, new = policy("p", CONFIGMAPS), policy("p", CONFIGMAPS, PODS, generation=2)
    watch.overrides.put(old)
    assert await gate.admit([old]) == [old]
    watch.overrides.put(new)
    assert await gate.admit([old]) == []  # the rules were computed from a version no longer staged
    assert gate.in_force(old) and not gate.in_force(new)


async def test_nothing_gets_in_force_while_discovery_fails() -> None:
    api, watch = FakeApi(), FakeWatch()
    rec, gate, _reported = gated(api, watch)
    rec.catalog = FakeCatalog(broken=frozenset({""}))
    watch.overrides.put(policy("p", CONFIGMAPS))
    assert await rec.reconcile() is False
    assert list(gate.overrides) == []


async def test_a_follower_waits_for_the_leaders_configuration() -> None:
    api, watch = FakeApi(), FakeWatch()
    leader_watch = FakeWatch()
    leader, _leader_gate, _ = gated(api, leader_watch)
    assert await leader.reconcile() is True  # configurations without ConfigMaps
    follower, gate, reported = gated(api, watch, leader=False)
    p = policy("p", CONFIGMAPS)
    watch.overrides.put(p)
    writes = api.writes()
    assert await follower.reconcile() is False
    assert api.writes() == writes and not gate.in_force(p)
    leader_watch.overrides.put(p)
    assert await leader.reconcile() is True
    assert await follower.reconcile() is True
    assert gate.in_force(p) and reported == ["p@1"] and follower.ready.is_set()


async def test_admission_only_notifies_the_reconciler() -> None:
    api, watch = FakeApi(), FakeWatch()
    rec, _gate, _reported = gated(api, watch)
    rec.include(policy("p", CONFIGMAPS))
    assert api.log == []  # nothing was read or written on the caller's time
    assert await rec.reconcile() is True
    assert "configmaps" in str(api.objects[MUTATING])


def test_covers_compares_rules_per_webhook_with_wildcards() -> None:
    narrow = builder.desired(builder.Registration(), CA1, [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "*"}])[0]
    wide: Obj = copy.deepcopy(narrow)
    wide["webhooks"][1]["rules"][0]["resources"] = ["*"]
    other: Obj = copy.deepcopy(narrow)
    other["webhooks"][1]["rules"][0]["resources"] = ["pods"]
    fewer: Obj = copy.deepcopy(narrow)
    fewer["webhooks"] = fewer["webhooks"][:1]
    assert covers(narrow, narrow) and covers(wide, narrow)
    assert not covers(narrow, wide) and not covers(other, narrow) and not covers(fewer, narrow)
    assert not covers(None, narrow)
