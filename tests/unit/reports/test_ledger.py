"""The ledger: scan and admission results merged per object, and what each change marks for writing."""

from __future__ import annotations

import asyncio
import gc

import pytest

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base import pacing
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports import ledger as ledger_module
from kinitiras_py.reports.ledger import Ledger
from kinitiras_py.reports.sink import MemorySink

POD = ResourceRef("v1", "Pod", "ns", "web")
UID = "uid-1"
A = PolicyId("ClusterValidatePolicy", None, "a")
B = PolicyId("ClusterValidatePolicy", None, "b")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def said(ledger: Ledger, uid: str = UID) -> dict[tuple[str, int], str]:
    record = ledger.get((uid, None))
    return {} if record is None else {(s.result.policy.name, s.result.rule): s.result.result
                                      for s in record.results()}


def r(policy: PolicyId, rule: int, outcome: str) -> RuleResult:
    return RuleResult(policy, rule, "validate", outcome)


def test_a_scan_replaces_every_earlier_scan_result_and_none_removes_the_record() -> None:
    ledger = Ledger(Clock())
    assert ledger.publish(POD, UID, [r(A, 0, "fail"), r(B, 0, "pass")]) == [(UID, None)]
    assert said(ledger) == {("a", 0): "fail", ("b", 0): "pass"}
    ledger.publish(POD, UID, [r(A, 0, "pass")])
    assert said(ledger) == {("a", 0): "pass"}
    assert ledger.publish(POD, UID, []) == [(UID, None)]
    assert ledger.get((UID, None)) is None and len(ledger) == 0
    assert ledger.publish(POD, UID, []) == []  # nothing held, nothing to write


def test_admission_replaces_only_its_rules_and_a_later_scan_wins_unless_it_skipped() -> None:
    ledger = Ledger(Clock())
    ledger.publish(POD, UID, [r(A, 0, "pass"), r(A, 1, "skip"), r(B, 0, "pass")])
    ledger.admit(POD, UID, [r(A, 0, "fail"), r(A, 1, "fail")])
    assert said(ledger) == {("a", 0): "fail", ("a", 1): "fail", ("b", 0): "pass"}  # admission is newer
    ledger.publish(POD, UID, [r(A, 0, "pass"), r(A, 1, "skip"), r(B, 0, "pass")])
    # The scan evaluated rule 0 again; rule 1 reads request data: admission's finding stays.
    assert said(ledger) == {("a", 0): "pass", ("a", 1): "fail", ("b", 0): "pass"}
    ledger.publish(POD, UID, [r(B, 0, "pass")])  # a no longer selects the object
    assert said(ledger) == {("b", 0): "pass"}


async def test_forgetting_a_policy_or_an_object() -> None:
    ledger = Ledger(Clock())
    other = ResourceRef("v1", "Pod", "ns", "db")
    ledger.publish(POD, UID, [r(A, 0, "fail"), r(B, 0, "pass")])
    ledger.publish(other, "uid-2", [r(A, 0, "fail")])
    assert sorted(await ledger.forget_policy(A)) == [("uid-1", None), ("uid-2", None)]
    assert said(ledger) == {("b", 0): "pass"}
    assert ledger.get(("uid-2", None)) is None  # nothing left: the record goes
    assert await ledger.forget_policy(A) == []
    assert ledger.forget_resource(POD, UID) == [(UID, None)]
    assert len(ledger) == 0


async def test_forgetting_a_policy_over_many_objects_gives_the_event_loop_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 objects' results: a task standing for admission requests runs while the policy is
    forgotten (in 1 ms slices; here 0 s, a turn after every object), and the records that change
    or go between two slices are read as they are then."""
    monkeypatch.setattr(pacing, "SLICE", 0.0)
    ledger = Ledger(Clock())
    pods = [ResourceRef("v1", "Pod", "ns", f"p{i}") for i in range(10_000)]
    for i, pod in enumerate(pods):
        ledger.publish(pod, f"uid-{i}", [r(A, 0, "fail"), r(B, 0, "pass")] if i % 2 else [r(A, 0, "fail")])
    turns: list[int] = []

    async def admission() -> None:
        while True:
            await asyncio.sleep(0)
            turns.append(len(ledger))
            ledger.forget_resource(pods[1], "uid-1")  # deleted while the walk goes on
            ledger.publish(pods[3], "uid-3", [r(B, 0, "warn")])  # scanned again, without the policy

    task = asyncio.get_running_loop().create_task(admission())
    await asyncio.sleep(0)
    try:
        changed = await ledger.forget_policy(A)
    finally:
        task.cancel()
    assert len(turns) >= 1_000  # scheduled all along, not only before and after
    assert len(changed) == 10_000 - 2 and ("uid-1", None) not in changed
    assert len(ledger) == 5_000 - 1 and said(ledger, "uid-3") == {("b", 0): "warn"}
    assert all(policy == "b" for key in ledger for (policy, _rule) in said(ledger, key[0]))


def test_an_object_known_by_reference_moves_to_its_uid() -> None:
    ledger = Ledger(Clock())
    assert ledger.admit(POD, "", [r(A, 0, "fail")]) == [("", POD)]
    ledger.publish(POD, UID, [r(B, 0, "pass")])
    assert ledger.resolve(("", POD), UID) == (UID, None)
    assert said(ledger) == {("a", 0): "fail", ("b", 0): "pass"}
    assert ledger.get(("", POD)) is None


async def test_the_memory_sink_builds_the_reports_the_writer_would() -> None:
    sink = MemorySink(Clock())
    await sink.publish(POD, UID, [r(A, 0, "fail")])
    await sink.add_admission_findings(POD, "", [r(B, 0, "warn")])  # no uid yet: no report yet
    (report,) = sink.reports()
    assert report["summary"]["fail"] == 1 and report["metadata"]["name"] == UID
    await sink.forget_policy(A)
    assert sink.reports() == []
    assert sink.changes == [(UID, None), ("", POD), (UID, None)]


def test_results_are_kept_where_the_garbage_collector_does_not_walk_them() -> None:
    """At 10,000 Pods and 50 policies the ledger holds a million results: kept as objects, each full
    collection walked them all (over a second). Kept as tuples of plain values, the collector stops
    tracking them, and they come back as the same results."""
    ledger = Ledger(Clock())
    results = [RuleResult(policy, rule, "validate", "fail" if rule else "skip", f"message {rule}", audited=True)
               for policy in (A, B) for rule in range(50)]
    ledger.publish(POD, UID, results)
    ledger.admit(POD, UID, [RuleResult(A, 0, "validate", "pass")])
    gc.collect()
    record = ledger.get((UID, None))
    assert record is not None
    assert not any(gc.is_tracked(one) for one in (*record.scanned, *record.admitted.values()))
    gc.collect()  # a container is let go at the collection after its contents
    assert not gc.is_tracked(record.scanned) and not gc.is_tracked(record.admitted)
    assert [s.result for s in record.results()] == [RuleResult(A, 0, "validate", "pass"), *results[1:]]


def test_equal_results_of_many_objects_are_kept_once_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(Clock())
    for uid in ("u1", "u2"):
        ledger.publish(POD, uid, [RuleResult(A, 0, "validate", "pass"), RuleResult(A, 1, "validate", "fail", uid)])
    one, two = ledger.get(("u1", None)), ledger.get(("u2", None))
    assert one is not None and two is not None
    assert one.scanned[0] is two.scanned[0]  # the same pass: one tuple
    assert one.scanned[1] != two.scanned[1]  # messages differ
    assert [s.result.message for s in two.results()] == ["", "u2"] and two.scanned_at > one.scanned_at
    monkeypatch.setattr(ledger_module, "INTERNED", 3)  # three kept: later ones stay each object's own
    ledger.publish(POD, "u3", [RuleResult(B, 0, "validate", "pass")])
    ledger.publish(POD, "u4", [RuleResult(B, 0, "validate", "pass")])
    three, four = ledger.get(("u3", None)), ledger.get(("u4", None))
    assert three is not None and four is not None
    assert three.scanned[0] == four.scanned[0] and three.scanned[0] is not four.scanned[0]
