"""``bench --scale``: its workload does what it claims, and the mode runs and prints its ratio."""

from __future__ import annotations

import json

import pytest

from kinitiras_py.admission.engine import Engine
from kinitiras_py.bench import runner, scale, workload
from kinitiras_py.cli.main import main
from kinitiras_py.engine.matching.selection import PolicyIndex


def test_fillers_miss_the_pod_and_most_select_pods() -> None:
    policies = scale.policies(50)
    assert sum(1 for p in policies if p["spec"]["resourceSelectors"][0]["kind"] == "Pod") >= 30
    pipeline, _ = runner.prepare(policies)
    request = runner.setup_request(pipeline, runner.Setup(policies, 1), workload.pod())
    # Only the matching policy gets through the index, however many Pod policies there are.
    index: PolicyIndex = pipeline.overrides
    assert [p.name for p in index.candidates(request.object)] == ["oversell-0000"]
    assert all(p["metadata"]["labels"][scale.LABEL] for p in policies)
    assert len(Engine(policies).policies) == 50


def test_bench_scale_prints_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scale", "--policies", "2,20", "--requests", "10"]) == 0
    assert "ratio 20:2 (median): " in capsys.readouterr().out
    assert main(["bench", "--scale", "--policies", "2,5", "--requests", "4", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["scale"]
    assert [(r["policies"], r["matching"], r["requests"]) for r in rows] == [(2, 1, 4), (5, 1, 4)]
