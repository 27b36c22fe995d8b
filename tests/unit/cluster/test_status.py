"""StatusWriter: the wanted status, writing only on change, Events with a rate limit."""

from __future__ import annotations

from typing import Any

from kinitiras_py.cluster.status import StatusWriter, desired_status, rule_count
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from tests.unit.cluster.conftest import FakeApi, api_error

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
STATUS = "/apis/policy.kcloudlabs.io/v1alpha1/namespaces/ns/overridepolicies/op1/status"
CLUSTER_STATUS = "/apis/policy.kcloudlabs.io/v1alpha1/clustervalidatepolicies/cvp1/status"


def op(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "op1", "namespace": "ns", "uid": "u1", "generation": generation, "resourceVersion": "7"},
        "spec": {"overrideRules": [{"overriders": {}}, {"overriders": {}}, {"overriders": {}}]}}
    if status is not None:
        obj["status"] = status
    return obj


def cvp() -> dict[str, Any]:
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
            "metadata": {"name": "cvp1", "uid": "u9", "generation": 1, "resourceVersion": "3"},
            "spec": {"validateRules": [{"cue": "x"}]}}


def compiled(rendered: int = 2) -> CompiledPolicy:
    return CompiledPolicy(kind="OverridePolicy", name="op1", namespace="ns", uid="u1", generation=1,
                          selectors=[], rules=(), rendered={i: "true" for i in range(rendered)})


def test_ready_and_rendered_for_a_compiled_policy() -> None:
    status = desired_status(op(), compiled(), None, T0)
    assert status == {"ruleCount": 3, "conditions": [
        {"type": "Ready", "status": "True", "reason": "Compiled", "message": "the policy is compiled and in force",
         "observedGeneration": 1, "lastTransitionTime": T0},
        {"type": "Rendered", "status": "True", "reason": "TemplatesRendered", "message": "2 templates rendered",
         "observedGeneration": 1, "lastTransitionTime": T0}]}
    assert desired_status(op(), compiled(1), None, T0)["conditions"][1]["message"] == "1 template rendered"


def test_transition_time_changes_only_when_the_status_flips() -> None:
    first = desired_status(op(), compiled(), None, T0)
    foreign = {"type": "Audited", "status": "True"}
    again = desired_status(op({**first, "conditions": [*first["conditions"], foreign]}, generation=2),
                           compiled(), None, T1)
    assert [c["lastTransitionTime"] for c in again["conditions"][:2]] == [T0, T0]
    assert [c["observedGeneration"] for c in again["conditions"][:2]] == [2, 2]
    assert again["conditions"][2] == foreign  # other writers' conditions are kept
    failed = desired_status(op(first), None, "spec.overrideRules[0].overriders.template: bad", T1)
    ready, rendered = failed["conditions"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == ("False", "CompileError", T1)
    assert ready["message"] == "spec.overrideRules[0].overriders.template: bad"
    assert rendered["status"] == "False"
    other = desired_status(op(), None, "spec.overrideRules[0].overriders.cue: refused", T1)
    assert other["conditions"][1]["status"] == "Unknown"


def test_rule_count() -> None:
    assert rule_count(op()) == 3 and rule_count(cvp()) == 1
    assert rule_count({"kind": "ValidatePolicy"}) == 0


async def test_writes_a_merge_patch_only_when_something_changed(fake: FakeApi) -> None:
    fake.route("PATCH", STATUS, {})
    writer = StatusWriter(fake, lambda *key: None)
    assert await writer.write_status(op(), compiled(), None)
    (sent,) = fake.requests
    assert sent["content_type"] == "application/merge-patch+json"
    assert sent["body"]["metadata"] == {"resourceVersion": "7"}
    written = sent["body"]["status"]
    assert written["ruleCount"] == 3
    assert not await writer.write_status(op(written), compiled(), None)
    assert len(fake.requests) == 1 and writer.writes == 1 and writer.events == 0


async def test_conflicts_and_failures_are_logged_not_raised(fake: FakeApi) -> None:
    fake.route("PATCH", STATUS, [api_error(409, "Conflict"), api_error(500), TimeoutError()])
    writer = StatusWriter(fake, lambda *key: None)
    for _ in range(3):
        assert not await writer.write_status(op(), compiled(), None)
    assert writer.writes == 0


async def test_compile_errors_emit_rate_limited_warning_events(fake: FakeApi) -> None:
    fake.route("PATCH", CLUSTER_STATUS, {})
    fake.route("POST", "/api/v1/namespaces/default/events", {})
    now = [1000.0]
    writer = StatusWriter(fake, lambda *key: cvp(), clock=lambda: now[0])
    assert await writer.write_status(cvp(), None, "spec.validateRules[0].cue: refused")
    posted = [r for r in fake.requests if r["method"] == "POST"]
    assert len(posted) == 1
    event = posted[0]["body"]
    assert (event["reason"], event["type"], event["message"]) == ("CompileError", "Warning",
                                                                  "spec.validateRules[0].cue: refused")
    assert event["involvedObject"] == {"apiVersion": "policy.kcloudlabs.io/v1alpha1",
                                       "kind": "ClusterValidatePolicy", "name": "cvp1", "uid": "u9",
                                       "resourceVersion": "3"}
    assert event["metadata"] == {"generateName": "cvp1.", "namespace": "default"}
    assert not await writer.emit_event(cvp(), "CompileError", "again")  # within 60 s
    assert await writer.emit_rule_error("ClusterValidatePolicy", None, "cvp1", "rule 0 failed")  # other reason
    now[0] += 61
    assert await writer.emit_event(cvp(), "CompileError", "again")
    assert writer.events == 3
    fake.route("POST", "/api/v1/namespaces/default/events", api_error(403))
    now[0] += 61
    assert not await writer.emit_event(cvp(), "CompileError", "forbidden")


async def test_on_change_is_written_by_the_worker_from_the_latest_object(fake: FakeApi) -> None:
    fake.route("PATCH", STATUS, {})
    objects = {("OverridePolicy", "ns", "op1"): op()}
    writer = StatusWriter(fake, lambda *key: objects.get(key))
    try:
        await writer.on_change("OverridePolicy", "ns", "op1", compiled(), None)
        await writer.on_change("OverridePolicy", "ns", "gone", None, None)  # deleted: nothing to write
        await writer.flush(2)
        assert writer.writes == 1
        assert [r["path"] for r in fake.requests] == [STATUS]
    finally:
        await writer.stop()
