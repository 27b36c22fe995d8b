"""``kinitiras-py bench`` runs and prints its tables (no timing assertions)."""

from __future__ import annotations

import json

import pytest

from kinitiras_py.bench import runner, workload
from kinitiras_py.cli.main import main
from kinitiras_py.engine.selection import PolicyIndex
from kinitiras_py.offline.apply import compile_all


def test_bench_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--policies", "1,10", "--requests", "20"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["policies", "matching"])
    assert [line.split()[0] for line in lines[header + 1:header + 3]] == ["1", "10"]
    assert any(line.startswith("ratio 10:1 (median): ") for line in lines)
    assert "ms/policy" in out


def test_bench_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--policies", "1,3", "--requests", "5", "--all-match", "2", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["policies"] for row in data["one_matching"]] == [1, 3]
    assert [(row["policies"], row["matching"]) for row in data["all_matching"]] == [(2, 2)]
    assert all(row["requests"] == 5 for row in data["one_matching"])


def test_bench_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--policies", "0,x"])
    assert "comma-separated" in capsys.readouterr().err


def test_fillers_never_reach_the_pod() -> None:
    policies = compile_all(workload.one_matching(30))
    index = PolicyIndex(p for p in policies if not p.validating)
    pod = workload.pod()
    assert [p.name for p in index.candidates(pod)] == ["oversell-0000"]


def test_percentile_nearest_rank() -> None:
    values = [float(i) for i in range(1, 11)]
    assert runner.percentile(values, 0.9) == 9.0
    assert runner.percentile(values, 0.99) == 10.0
    assert runner.percentile([], 0.5) == 0.0
