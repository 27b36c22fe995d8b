"""``bench --cue``: each pair's two forms agree on the Pod, and the mode prints its ratios."""

from __future__ import annotations

import json

import pytest

from kinitiras_py.bench import cuerules, workload
from kinitiras_py.cli.main import main


@pytest.mark.parametrize("pair", cuerules.PAIRS, ids=[p.kind for p in cuerules.PAIRS])
def test_both_forms_give_the_same_result_and_do_something(pair: cuerules.Pair) -> None:
    compiled, written = cuerules.programs(pair)
    other = workload.pod()
    other["spec"]["containers"][0].update(image="web:latest", imagePullPolicy="Always")
    results = []
    for pod in (workload.pod(), other):
        result = compiled.evaluate({"object": pod}, remember=False)
        assert result == written.evaluate({"object": pod}, remember=False)
        results.append(result)
    assert results[0] != results[1]


def test_a_pair_that_differs_is_refused() -> None:
    wrong = cuerules.Pair("wrong", "override", "object: _\npatches: []", "[{'op': 'remove', 'path': '/x'}]")
    with pytest.raises(RuntimeError, match="differ on the Pod"):
        cuerules.run(2, rounds=1, pairs=[wrong])


def test_bench_cue_prints_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--cue", "--requests", "20"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{cuerules.LIMIT}x") == len(cuerules.PAIRS)
    assert main(["bench", "--cue", "--requests", "10", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["cue"]
    assert [r["requests"] for r in rows] == [10, 10]
    assert all(r["ratio"] == pytest.approx(r["cue"] / r["cel"]) for r in rows)
