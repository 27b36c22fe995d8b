"""``bench --scan`` at a small N: every phase is measured and the first pass reports every Pod."""

from __future__ import annotations

import orjson
import pytest

from kinitiras_py.bench import scanscale
from tests.cli import run as run_cli


async def test_the_scenario_reports_every_pod_and_measures_each_phase() -> None:
    stats = await scanscale.run(40, total_policies=10, rate=20, seconds=1.0, baseline=0.3)
    assert stats.writes == 40
    # 10 policies of 2 rules, one of them with a third rule reading request.userInfo; 1 in 3 Pods has
    # no owner label, and policies 0, 5 check it.
    assert stats.results == {"fail": 14 * 2, "pass": 40 * 20 - 28, "skip": 40}
    assert [p.name for p in stats.phases] == ["baseline", "first pass", "steady"]
    assert all(p.latencies and p.seconds > 0 and p.cpu > 0 for p in stats.phases)
    assert all(len(p.waits) == len(p.latencies) and min(p.waits) >= 0 and max(p.waits) <= max(p.latencies)
               for p in stats.phases)
    assert stats.first_report_seconds == stats.phases[1].seconds > 0
    assert "40 Pods, 10 validate policies: first full report in" in scanscale.table(stats)


def test_the_command_runs_at_a_small_n() -> None:
    code, out, err = run_cli("bench", "--scan", "--scan-pods", "10", "--scan-policies", "3", "--seconds", "0.5",
                             "-o", "json")
    assert code == 0, err
    found = orjson.loads(out)
    assert found["pods"] == 10 and found["writes"] == 10 and found["policies"] == 3
    assert [p["phase"] for p in found["phases"]] == ["baseline", "first pass", "steady"]


def test_a_phase_p99_is_the_median_of_its_windows_and_the_scan_phases_are_marked() -> None:
    size = round(scanscale.WINDOW / scanscale.PROBE_INTERVAL)
    # Three windows: one busy moment (every probe 50 ms) moves one window's p99, not the phase's.
    busy = scanscale.Phase("first pass", [0.002] * size + [0.050] * size + [0.003] * size + [0.001] * 10)
    assert busy.windowed_p99() == pytest.approx(0.003)  # the short last window joined the third
    assert busy.quantile(0.99) == pytest.approx(0.050)
    base = scanscale.Phase("baseline", [0.002] * size)
    slow = scanscale.Phase("steady", [0.004] * size, waits=[0.0] * (size - 1) + [0.001], pauses=[0.03])
    stats = scanscale.ScanStats(10, 1, 20.0, 1.0, 0.0, [base, busy, slow], 10, {})
    assert [(m.value, m.passed) for m in stats.marks()] == [(pytest.approx(1.5), False), (2.0, False)]
    base.latencies = [0.004] * size
    assert [m.passed for m in stats.marks()] == [True, True]
    text = scanscale.table(stats)
    assert "p99 x baseline 0.75 <= 1.25 ok" in text and "p99 x baseline 1.00 <= 1.25 ok" in text
    steady = stats.to_json()["phases"][2]
    assert (steady["full_collections"], steady["max_collection_ms"], steady["wait_p99_ms"]) == (1, 30.0, 0.0)
    assert [t["ok"] for t in stats.to_json()["targets"]] == [True, True]
