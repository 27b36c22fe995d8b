"""PolicyWatch on a scripted transport: compile once per version, never half-apply, report errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.cluster.policywatch import PolicyWatch, describe_error, policy_resources
from tests.unit.cluster.conftest import FakeApi

GROUP = "/apis/policy.kcloudlabs.io/v1alpha1"


def op(name: str = "op1", *, generation: int = 1, rv: str = "10", uid: str = "u1", cue: bool = False) -> dict[str, Any]:
    overriders: dict[str, Any] = ({"cue": "x: 1"} if cue else
                                  {"plaintext": [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]})
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": generation,
                         "resourceVersion": rv},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "overrideRules": [{"targetOperations": ["CREATE"], "overriders": overriders}]}}


def cvp(name: str = "cvp1") -> dict[str, Any]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
            "metadata": {"name": name, "uid": "u9", "generation": 1, "resourceVersion": "3"},
            "spec": {"validateRules": [{"targetOperations": ["DELETE"], "cel": "true", "message": "m"}]}}


@pytest.fixture
def fake_policies(fake: FakeApi) -> FakeApi:
    for resource in policy_resources().values():
        fake.route("GET", resource.path(), {"metadata": {"resourceVersion": "1"}, "items": []})
    return fake


class Changes:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str, bool, str | None]] = []

    async def __call__(self, kind: str, namespace: str | None, name: str, compiled: Any, error: str | None) -> None:
        self.seen.append((kind, namespace, name, compiled is not None, error))


async def event(watch: PolicyWatch, type_: str, obj: dict[str, Any]) -> None:
    await watch.informers[obj["kind"]].apply({"type": type_, "object": obj})


async def test_synced_once_all_four_kinds_are_listed(fake_policies: FakeApi) -> None:
    watch = PolicyWatch(fake_policies)
    assert {r.path() for r in policy_resources().values()} == {
        f"{GROUP}/overridepolicies", f"{GROUP}/clusteroverridepolicies",
        f"{GROUP}/clustervalidatepolicies", f"{GROUP}/validatepolicies"}
    watch.start()
    try:
        await asyncio.wait_for(watch.synced.wait(), 1)
        assert watch.counts() == {"OverridePolicy": 0, "ClusterOverridePolicy": 0,
                                  "ClusterValidatePolicy": 0, "ValidatePolicy": 0}
    finally:
        await watch.stop()


async def test_compiles_once_per_uid_and_generation(fake: FakeApi) -> None:
    changes = Changes()
    watch = PolicyWatch(fake, on_change=changes)
    await event(watch, "ADDED", op())
    assert [p.name for p in watch.overrides] == ["op1"] and watch.compiles == 1
    await event(watch, "MODIFIED", {**op(rv="11"), "status": {"ruleCount": 1}})  # status-only update
    assert watch.compiles == 1
    await event(watch, "MODIFIED", op(generation=2, rv="12"))
    assert watch.compiles == 2
    assert next(iter(watch.overrides)).generation == 2
    await event(watch, "DELETED", op(generation=2, rv="13"))
    await event(watch, "ADDED", op(uid="u2", rv="14", generation=2))  # recreated under the same name
    assert watch.compiles == 3
    assert next(iter(watch.overrides)).uid == "u2"
    assert [c[3] for c in changes.seen] == [True, True, True, False, True]
    assert changes.seen[3] == ("OverridePolicy", "ns", "op1", False, None)  # the delete
    assert watch.counts()["OverridePolicy"] == 1
    assert watch.get("OverridePolicy", "ns", "op1") is not None


async def test_a_policy_that_stops_compiling_leaves_the_index(fake: FakeApi) -> None:
    changes = Changes()
    watch = PolicyWatch(fake, on_change=changes)
    await event(watch, "ADDED", op())
    await event(watch, "ADDED", cvp())
    assert len(watch.overrides) == 1 and len(watch.validations) == 1
    await event(watch, "MODIFIED", op(generation=2, cue=True))
    assert len(watch.overrides) == 0
    key = ("OverridePolicy", "ns", "op1")
    assert "spec.overrideRules[0].overriders.cue" in watch.errors[key]
    assert watch.result(*key) == (None, watch.errors[key])
    assert changes.seen[-1][3:] == (False, watch.errors[key])
    assert watch.counts() == {"OverridePolicy": 0, "ClusterOverridePolicy": 0,
                              "ClusterValidatePolicy": 1, "ValidatePolicy": 0}
    await event(watch, "MODIFIED", op(generation=3))
    assert len(watch.overrides) == 1 and key not in watch.errors
    await event(watch, "MODIFIED", op(generation=4, cue=True))
    await event(watch, "DELETED", op(generation=4, cue=True))
    assert key not in watch.errors and watch.result(*key) == (None, None)
    assert watch.validations.candidates({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})


async def test_unexpected_compile_failures_and_callback_failures_are_contained(fake: FakeApi) -> None:
    def broken(obj: dict[str, Any]) -> Any:
        raise KeyError("bug")

    async def failing(*args: Any) -> None:
        raise RuntimeError("status writer bug")

    watch = PolicyWatch(fake, compile=broken, on_change=failing)
    await event(watch, "ADDED", op())
    assert len(watch.overrides) == 0
    assert watch.errors[("OverridePolicy", "ns", "op1")].startswith("internal error: KeyError")


def test_describe_error_lists_field_paths() -> None:
    errors = PolicyErrors([PolicyError("spec.a", "bad"), PolicyError("", "worse")], "OverridePolicy ns/x")
    assert describe_error(errors) == "spec.a: bad; worse"
    assert describe_error(PolicyError("spec.b", "no", "p")) == "spec.b: no"
