"""``kinitiras-py bench`` runs and prints its tables (no timing assertions)."""

from __future__ import annotations

import json
import os

import pytest

from kinitiras_py.admission.engine import Engine
from kinitiras_py.bench import runner, workload
from kinitiras_py.cli.bench import _sizes
from kinitiras_py.cli.main import main


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
    for run in ("all_matching", "unchanged_update", "all_validating"):
        assert [(row["policies"], row["matching"]) for row in data[run]] == [(2, 2)], run
    assert all(row["requests"] == 5 for row in data["one_matching"])


def test_every_run_does_what_it_claims() -> None:
    pod = workload.pod()
    for setup in (runner.Setup(workload.all_matching(3), 3),
                  runner.Setup(workload.all_matching(3, ("CREATE", "UPDATE")), 3, update=True),
                  runner.Setup(workload.all_validating(3), 3)):
        pipeline, _ = runner.prepare(setup.policies)
        request = runner.setup_request(pipeline, setup, pod)
        assert request.operation == ("UPDATE" if setup.update else "CREATE")
    # The checks refuse a run that would time the wrong thing.
    pipeline, _ = runner.prepare(workload.all_matching(3))
    with pytest.raises(RuntimeError, match="2 policies match"):
        runner.setup_request(pipeline, runner.Setup(workload.all_matching(3), 2), pod)
    counter = workload.matching_policy(0, operations=("CREATE", "UPDATE"))
    counter["spec"]["overrideRules"].append({"overriders": {"cel": (
        '[{"op": "add", "path": "/metadata/annotations/n", "value": string(object.metadata.annotations.size())}]')}})
    pipeline, _ = runner.prepare([counter])
    with pytest.raises(RuntimeError, match="changes it again"):
        runner.setup_request(pipeline, runner.Setup([counter], 1, update=True), pod)


def test_bench_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--policies", "0,x"])
    assert "comma-separated" in capsys.readouterr().err


def test_a_repeated_count_is_timed_once() -> None:
    assert _sizes("10,1,10,1") == [10, 1]


def test_fillers_never_reach_the_pod() -> None:
    index = Engine(workload.one_matching(30)).overrides
    pod = workload.pod()
    assert [p.name for p in index.candidates(pod)] == ["oversell-0000"]


def test_percentile_nearest_rank() -> None:
    values = [float(i) for i in range(1, 11)]
    assert runner.percentile(values, 0.9) == 9.0
    assert runner.percentile(values, 0.99) == 10.0
    assert runner.percentile([], 0.5) == 0.0


def test_webhook_bench_answers_every_request_over_tls(capsys: pytest.CaptureFixture[str]) -> None:
    cores = os.sched_getaffinity(0)
    assert main(["bench", "--webhook", "--policies", "5", "--rates", "40", "--seconds", "0.5", "-o", "json"]) == 0
    assert os.sched_getaffinity(0) == cores  # the load ran on one core, and gave the others back
    data = json.loads(capsys.readouterr().out)
    for name in ("webhook", "floor"):
        [row] = data[name]
        assert (row["offered"], row["sent"], row["errors"]) == (40, 20, 0)
        assert 0 < row["median"] <= row["p99"] <= row["max"] < 5


def test_webhook_bench_refuses_a_setup_that_patches_nothing() -> None:
    from kinitiras_py.bench import webhook

    with pytest.raises(RuntimeError, match="without a patch"):
        webhook.run([workload.filler_policy(1)], workload.pod(), [10], 0.1, warmup=0.1)


def test_floor_bench_prints_every_server_beside_the_floor(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--floor", "--total", "6", "--matching", "1,3", "--seconds", "0.3", "--rounds", "1"]
    assert main([*args, "--uncached", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["floor"]
    assert [(r["name"], r["policies"], r["matching"]) for r in rows] == [
        ("floor", 0, 0), ("ours 1/6", 6, 1), ("ours 3/6", 6, 3), ("ours 1/6 uncached", 6, 1),
        ("ours 3/6 uncached", 6, 3), ("hand-written 1", 0, 1), ("hand-written 3", 0, 3)]
    for row in rows:
        assert row["answered"] > 0 and row["errors"] == 0
        assert row["ratio"] > 0 and row["cpu_ratio"] > 0 and row["rss"] > 0
        assert 0 < row["server_cpu"] <= row["server_busy"] and 0 < row["load_cpu"] <= row["load_busy"]
    assert rows[0]["ratio"] == rows[0]["cpu_ratio"] == 1.0
    assert main([*args[:-4], "--seconds", "0.2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "x floor" in out and "cpu ms/review" in out and "what set the rates: " in out


def test_floor_labels_the_object_with_or_without_labels() -> None:
    import base64

    import jsonpatch
    import orjson

    from kinitiras_py.bench import floor, webhook

    for pod in (workload.server_pod(), {**workload.pod(), "metadata": {"name": "bare", "namespace": "x"}}):
        answer = orjson.loads(floor.answer(webhook.review(pod)))["response"]
        assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
        patched = jsonpatch.apply_patch(pod, orjson.loads(base64.b64decode(answer["patch"])))
        assert patched["metadata"]["labels"] == {**pod["metadata"].get("labels", {}), floor.LABEL: "yes"}


async def test_the_load_reads_sized_and_chunked_answers() -> None:
    import asyncio

    from kinitiras_py.bench import loadgen

    class Sink:
        def write(self, data: bytes) -> None:
            self.data = data

    for raw, body in ((b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", b"hello"),
                      (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n",
                       b"hello")):
        reader = asyncio.StreamReader()
        reader.feed_data(raw + b"HTTP/1.1 ...")  # the next answer on the connection stays unread
        status, got = await loadgen.exchange(reader, Sink(), b"request")  # type: ignore[arg-type]
        assert (status, got) == (int(raw[9:12]), body)
        assert await reader.read(8) == b"HTTP/1.1"
    assert loadgen.http_request("https://h:1/p?q=1", b"{}", {"A": "b"}) == (
        b"POST /p?q=1 HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nA: b\r\n\r\n{}")


def test_server_and_e2e_pod_is_the_size_the_issue_measured() -> None:
    from kinitiras_py.bench import webhook

    assert 9_000 < len(webhook.review(workload.server_pod())) < 10_000
    assert len(workload.server_pod()["spec"]["containers"]) == 4
    assert sum(p["kind"] == "OverridePolicy" and p["metadata"]["name"].startswith("oversell-")
               for p in workload.some_matching(50, 20)) == 20


def test_the_load_counts_and_keeps_the_first_error() -> None:
    import asyncio

    from kinitiras_py.bench import child, loadgen, webhook

    with child.serving(None, cpu=None) as served:
        url = served.url + "/mutate"
        request = loadgen.http_request(url, webhook.review(workload.pod()))
        load = asyncio.run(loadgen.closed_loop(url, request, served.context, 2, 60.0, b"never in an answer", 5))
    assert (load.answered, load.errors) == (5, 5)
    assert load.first_error.startswith('HTTP 200: {"apiVersion":"admission.k8s.io/v1"')


def test_the_e2e_policies_match_each_set_up_in_its_namespace_only() -> None:
    import asyncio

    from kinitiras_py.admission.pipeline import Request
    from kinitiras_py.bench import e2e

    policies = workload.spread(30, {"bench-1": 1, "bench-3": 3})
    assert len(policies) == 30
    engine = Engine(p for p in policies if p["kind"].endswith("OverridePolicy"))
    for setup in (e2e.ours_setup(30, 1), e2e.ours_setup(30, 3), e2e.NO_WEBHOOK, e2e.FLOOR):
        pod = setup.pod()
        mutation = asyncio.run(engine.mutate(Request("CREATE", pod, namespace=setup.namespace)))
        added = set(mutation.object["metadata"]["labels"]) - set(pod["metadata"]["labels"])
        assert added == (set() if setup in (e2e.NO_WEBHOOK, e2e.FLOOR) else set(setup.expected))
    with pytest.raises(ValueError, match="4 matching policies do not fit in 3"):
        workload.spread(3, {"a": 1, "b": 3})


def test_e2e_ratios_are_the_medians_of_each_rounds_own() -> None:
    from kinitiras_py.bench import e2e

    def rnd(floor_p50: float, ours_p50: float) -> list[e2e.Row]:
        return e2e.with_ratios([e2e.Row("floor", 1, 10, 0, floor_p50, floor_p50, floor_p50, 1 / floor_p50, 0.1, 0.1,
                                        role="floor"),
                                e2e.Row("ours", 1, 10, 0, ours_p50, ours_p50, ours_p50, 1 / ours_p50, 0.1, 0.1)])

    # The floor drifts from round to round; ours is 10, 0 and 20 % slower than the floor of its own
    # round: 1.1 in the median, where the medians' own ratio (10.8 / 9.0) would say 1.2.
    rows = {r.setup: r for r in e2e.medians([rnd(8.0, 8.8), rnd(12.0, 12.0), rnd(9.0, 10.8)])}
    assert rows["ours"].p50_ratio == pytest.approx(1.1)
    assert rows["ours"].rate_ratio == pytest.approx(1 / 1.1)
    assert (rows["ours"].p50, rows["floor"].p50, rows["floor"].p50_ratio, rows["ours"].pods) == (10.8, 9.0, 1.0, 30)
