"""The end-to-end rows of issue 25: their ratios to the floor and the hand-written webhook, the
slow neighbour's others' p99, and the target marks the report prints beside each row."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from kinitiras_py.admission.pipeline import Request
from kinitiras_py.bench import child, e2e, loadgen, report, runner, targets, workload
from kinitiras_py.bench.saturation import Saturation


def _row(setup: str, concurrency: int, p50: float, rate: float, role: str = "ours", matching: int = 0,
         distinct: bool = True, others_p99: float = 0.0) -> e2e.Row:
    return e2e.Row(setup, concurrency, 100, 0, p50, p50, p50 * 2, rate, 0.1, 0.1, role=role, matching=matching,
                   distinct=distinct, others_p99=others_p99)


def _round(ours_p50: float, hand_p50: float, slow_p99: float) -> list[e2e.Row]:
    return e2e.with_ratios([
        _row("floor", 1, 5.0, 200.0, "floor", distinct=False),
        _row("ours 20/1000", 1, 50.0, 20.0, matching=20, distinct=False),
        _row("floor distinct", 1, 4.0, 250.0, "floor"),
        _row("floor distinct", 10, 4.0, 400.0, "floor"),
        _row("hand-written 20 distinct", 1, hand_p50, 200.0, "hand", 20),
        _row("hand-written 20 distinct", 10, hand_p50, 300.0, "hand", 20),
        _row("ours 20/1000 distinct", 1, ours_p50, 150.0, matching=20),
        _row("ours 20/1000 distinct", 10, ours_p50, 270.0, matching=20),
        _row("ours 1/1000 distinct", 1, 4.2, 240.0, matching=1, others_p99=10.0),
        _row("ours 1/1000 distinct", 10, 4.2, 380.0, matching=1, others_p99=10.0),
        _row("ours 1/1000 distinct, slow neighbour", 10, 4.5, 300.0, "slow", 1, others_p99=slow_p99),
    ])


def test_distinct_rows_are_compared_with_the_floor_and_hand_written_of_their_own_pods() -> None:
    rows = {(r.setup, r.concurrency): r for r in _round(ours_p50=5.0, hand_p50=4.0, slow_p99=25.0)}
    ours = rows["ours 20/1000 distinct", 1]
    assert (ours.p50_ratio, ours.hand_p50_ratio) == (pytest.approx(1.25), pytest.approx(1.25))
    assert rows["ours 20/1000 distinct", 10].hand_rate_ratio == pytest.approx(0.9)
    # The replicas' row is compared with the replicas' floor, and has no hand-written peer.
    replica = rows["ours 20/1000", 1]
    assert (replica.p50_ratio, replica.hand_p50_ratio) == (pytest.approx(10.0), 0.0)
    # ours with 1 matching has no hand-written peer (it stands for 20).
    assert rows["ours 1/1000 distinct", 1].hand_p50_ratio == 0.0
    assert rows["ours 1/1000 distinct, slow neighbour", 10].others_p99_ratio == pytest.approx(2.5)
    assert rows["floor distinct", 10].rate_ratio == 1.0


def test_medians_are_of_each_rounds_own_ratios_and_keep_what_a_row_is() -> None:
    rows = {r.setup + str(r.concurrency): r for r in e2e.medians(
        [_round(5.0, 4.0, 25.0), _round(4.0, 4.0, 12.0), _round(9.0, 6.0, 15.0)])}
    ours = rows["ours 20/1000 distinct1"]
    # Rounds' own ratios 1.25, 1.0 and 1.5: the median is 1.25; the medians' ratio would be 5/4 too,
    # but the floor ratio differs: 5/4, 4/4, 9/4 -> 1.25.
    assert ours.hand_p50_ratio == pytest.approx(1.25) and ours.p50_ratio == pytest.approx(1.25)
    assert (ours.role, ours.matching, ours.distinct, ours.pods) == ("ours", 20, True, 300)
    assert rows["ours 1/1000 distinct, slow neighbour10"].others_p99_ratio == pytest.approx(1.5)


def test_targets_are_marked_pass_or_fail() -> None:
    good = {(r.setup, r.concurrency): r for r in _round(ours_p50=4.4, hand_p50=4.0, slow_p99=15.0)}
    bad = {(r.setup, r.concurrency): r for r in _round(ours_p50=6.0, hand_p50=4.0, slow_p99=25.0)}
    marks = targets.e2e(good["ours 20/1000 distinct", 1])
    assert [(m.what, m.limit, m.passed) for m in marks] == [("p50 x hand-written", 1.15, True),
                                                             ("p50 x floor", 1.3, True)]
    marks = targets.e2e(bad["ours 20/1000 distinct", 1])
    assert [(m.what, round(m.value, 2), m.passed) for m in marks] == [("p50 x hand-written", 1.5, False),
                                                                       ("p50 x floor", 1.5, False)]
    assert [(m.what, m.limit, m.passed) for m in targets.e2e(good["ours 20/1000 distinct", 10])] == [
        ("pods/s x hand-written", 0.85, True)]
    assert [(m.what, m.limit, m.passed) for m in targets.e2e(good["ours 1/1000 distinct", 1])] == [
        ("p50 x floor", 1.1, True)]
    assert [(m.what, m.limit, m.passed) for m in targets.e2e(good["ours 1/1000 distinct", 10])] == [
        ("pods/s x floor", 0.9, True)]
    slow = "ours 1/1000 distinct, slow neighbour", 10
    assert [(m.limit, m.passed) for m in targets.e2e(good[slow])] == [(2.0, True)]
    assert [(m.limit, m.passed) for m in targets.e2e(bad[slow])] == [(2.0, False)]
    # Rows that give context only carry no target.
    for key in (("floor distinct", 1), ("hand-written 20 distinct", 10), ("ours 20/1000", 1)):
        assert targets.e2e(good[key]) == []
    # At the boundary a target passes.
    assert targets.Mark("x", 1.15, 1.15, True).passed and targets.Mark("y", 0.85, 0.85, False).passed


def test_the_report_prints_each_rows_marks_beside_it() -> None:
    rows = _round(ours_p50=6.0, hand_p50=4.0, slow_p99=15.0)
    lines = [x.strip() for x in report.e2e_table(rows).splitlines()]
    assert lines[0].split()[-1] == "targets" and "p50 x hand" in lines[0]
    line = next(x for x in lines if x.startswith("ours 20/1000 distinct") and x.split()[3] == "1")
    assert line.endswith("p50 x hand-written 1.50 <= 1.15 FAIL; p50 x floor 1.50 <= 1.3 FAIL")
    line = next(x for x in lines if x.startswith("ours 1/1000 distinct, slow"))
    assert line.endswith("others' p99 x alone 1.50 <= 2 ok") and " 15000.000 " in line
    assert next(x for x in lines if x.startswith("floor distinct")).split()[-6:] == ["-", "-", "-", "-", "0.10", "0.10"]
    data = report.as_json({"e2e": rows})["e2e"]
    ours = next(r for r in data if r["setup"] == "ours 20/1000 distinct" and r["concurrency"] == 10)
    assert ours["targets"] == [{"what": "pods/s x hand-written", "value": pytest.approx(0.9), "limit": 0.85,
                                "at_most": False, "passed": True}]
    assert "targets" not in next(r for r in data if r["setup"] == "floor distinct")
    json.dumps(data)
    assert report.e2e_verdict(rows) == (
        "targets met: 4 of 6; missed: ours 20/1000 distinct c=1: p50 x hand-written 1.50 <= 1.15 FAIL, "
        "ours 20/1000 distinct c=1: p50 x floor 1.50 <= 1.3 FAIL")


def test_saturation_rows_of_ours_uncached_are_held_to_their_share_of_the_floor() -> None:
    base = Saturation("floor", 0, 0, 5000.0, 0.001, 0.002, 1.0, 1.0, 0.5, 0.5, 0.0002, 1, 100, 0, 1.0, 1.0)
    one = dataclasses.replace(base, name="ours 1/1000 uncached", policies=1000, matching=1, ratio=0.18)
    twenty = dataclasses.replace(base, name="ours 20/1000 uncached", policies=1000, matching=20, ratio=0.16)
    cached = dataclasses.replace(base, name="ours 20/1000", policies=1000, matching=20, ratio=1.06)
    hand = dataclasses.replace(base, name="hand-written 20", matching=20, ratio=0.9)
    assert [(m.limit, m.passed) for m in targets.saturation(one)] == [(0.5, False)]
    assert [(m.limit, m.passed) for m in targets.saturation(twenty)] == [(0.15, True)]
    assert targets.saturation(cached) == targets.saturation(hand) == targets.saturation(base) == []
    text = report.saturation_table([base, one, twenty, hand])
    assert "reviews/s x floor 0.18 >= 0.5 FAIL" in text and "reviews/s x floor 0.16 >= 0.15 ok" in text


def test_others_p99_leaves_out_the_pods_the_slow_rule_selects() -> None:
    slow = e2e.slow_setup(1000, 1)
    latencies = [0.01 * (i + 1) for i in range(20)]
    latencies[0] = latencies[10] = 5.0  # the two slow Pods
    load = loadgen.Load(20, 0, 1.0, latencies, 0.1, sent=list(range(20)))
    row = e2e._Timed(load, child.Sched(0.1, 0.0), frozenset({0, 10})).row(slow, 10)
    assert row.p99 == 5.0 and row.others_p99 == pytest.approx(0.20)
    assert (row.role, row.matching, row.distinct) == ("slow", 1, True)


def test_every_set_up_labels_its_pods_as_its_name_says() -> None:
    """Offline, with the policies the e2e run creates: each set-up of ours, the slow neighbour's
    included (its rule runs to its limit and is skipped), adds exactly its expected labels."""
    [phase] = e2e.phases(40, [1, 3])
    assert [s.name for s in phase] == [
        "no webhook", "floor", "ours 1/40", "ours 3/40", "floor distinct", "hand-written 3 distinct",
        "ours 1/40 distinct", "ours 3/40 distinct", "ours 1/40 distinct, slow neighbour"]
    policies = e2e.policies_for(40, [1, 3])
    assert len(policies) == 40
    pipeline, _ = runner.prepare(policies)
    for setup in phase:
        for pod in setup.samples():
            decision = asyncio.run(pipeline.admit(Request("CREATE", pod, namespace=setup.namespace)))
            added = set(decision.object["metadata"]["labels"]) - set(pod["metadata"]["labels"])
            assert decision.allowed and added == (set(setup.expected) if setup.role in ("ours", "slow") else set())
            if setup.role == "slow" and workload.SLOW_LABEL in pod["metadata"]["labels"]:
                assert any("slow-neighbour" in w for w in decision.warnings), decision.warnings


def test_e2e_refuses_a_total_without_room_for_the_slow_neighbour(capsys: pytest.CaptureFixture[str]) -> None:
    from kinitiras_py.cli.main import main

    # 1 + 3 matching, 1 more beside the slow neighbour and its own policy: 6 of at least 6.
    assert main(["bench", "--e2e", "--total", "5", "--matching", "1,3", "--kubeconfig", "/nonexistent"]) == 2
    assert "--matching 1,3 needs 6 policies, more than --total 5" in capsys.readouterr().err
    assert len(e2e.policies_for(6, [1, 3])) == 6
