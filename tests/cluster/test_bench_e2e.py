"""`kinitiras-py bench --e2e` with small N against the real API server: it completes, every set-up
does what its name says (the benchmark checks that itself), and it prints its ratio fields.
No timing assertions."""

from __future__ import annotations

import json

import pytest

from kinitiras_py.cli.main import main
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


def test_e2e_bench_runs_every_set_up_and_prints_the_ratios(cluster: Cluster,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--e2e", "--kubeconfig", cluster.kubeconfig, "--total", "8", "--matching", "1,3",
                 "--pods", "6", "--concurrency", "1,3", "--runs", "1", "--uncached", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["e2e"]
    assert [(r["setup"], r["concurrency"]) for r in rows] == [
        (setup, c) for setup in ("no webhook", "floor", "ours 1/8", "ours 3/8", "floor distinct",
                                 "hand-written 3 distinct", "ours 1/8 distinct", "ours 3/8 distinct",
                                 "ours 1/8 distinct, slow neighbour", "ours 1/8 uncached", "ours 3/8 uncached")
        for c in (1, 3)]
    for row in rows:
        # The floor is timed in every round: one with ours cached, one with ours uncached.
        assert row["pods"] == (12 if row["setup"] == "floor" else 6) and row["errors"] == 0
        assert row["p50"] <= row["p90"] <= row["p99"] and row["rate"] > 0 and 0 < row["load_cpu"] <= row["load_busy"]
        assert row["p50_ratio"] > 0 and row["rate_ratio"] > 0
    assert {(r["p50_ratio"], r["rate_ratio"]) for r in rows if r["role"] == "floor"} == {(1.0, 1.0)}
    by = {(r["setup"], r["concurrency"]): r for r in rows}
    # Distinct Pods: ours beside the hand-written webhook (same matching count), the slow neighbour
    # beside ours alone; each with its targets marked.
    assert by["ours 3/8 distinct", 1]["hand_p50_ratio"] > 0 and by["ours 3/8 distinct", 3]["hand_rate_ratio"] > 0
    assert by["ours 1/8 distinct", 1]["hand_p50_ratio"] == 0
    assert by["ours 1/8 distinct, slow neighbour", 3]["others_p99_ratio"] > 0
    assert [t["what"] for t in by["ours 3/8 distinct", 1]["targets"]] == ["p50 x hand-written", "p50 x floor"]
    assert [t["what"] for t in by["ours 1/8 distinct, slow neighbour", 3]["targets"]] == ["others' p99 x alone"]
    # Nothing is left behind: the next test's Pods see no webhook of ours.
    assert "kinitiras-bench" not in cluster.kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout
    assert cluster.kubectl("get", "op,cop,cvp", "-A", "-l", "kinitiras-bench=e2e", "-o", "name").stdout == ""
    # The set-ups' namespaces are on their way out.
    listed = cluster.kubectl("get", "namespaces", "-o",
                             "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{'\\n'}{end}").stdout
    phases = dict(line.split() for line in listed.splitlines() if line.startswith("bench-"))
    assert set(phases.values()) <= {"Terminating"}
