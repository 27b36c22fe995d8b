"""docs/metrics.md, the Grafana dashboard and the alert rules against the /metrics a running
in-process server exports (after requests that move every metric, tests/functional/test_metrics.py):

* every exported family is documented, with its type and labels, and every documented one exported;
* every query (the doc's examples, each dashboard panel and variable, each alert) reads only
  exported series, and matches and groups by labels those series carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.functional.test_metrics import exercise
from tests.promql import Family, Reads, families, reads

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "metrics.md"
MONITORING = ROOT / "config" / "monitoring"
TARGET_LABELS = frozenset({"instance", "job", "namespace", "pod", "service", "container"})
"""Labels Prometheus (and the operator's ServiceMonitor) puts on every scraped series."""

_SECTION = re.compile(r"^### `([a-z_:]+)`\n\nType: (\w+)\. Labels: ([^\n]*)\.$", re.M)
_PROMQL = re.compile(r"^```promql\n(.*?)^```$", re.M | re.S)


@pytest.fixture
async def exported(aiohttp_client: Any) -> dict[str, Family]:
    """The families a running server exports on /metrics, by documented name."""
    _handlers, client = await exercise(aiohttp_client)
    response = await client.get("/metrics")
    assert response.status == 200
    return families(await response.text())


def documented(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """docs/metrics.md's metrics: name -> (type, label names)."""
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for name, kind, labels in _SECTION.findall(text):
        assert name not in found, f"{name} is documented twice"
        found[name] = (kind, frozenset() if labels == "none" else frozenset(re.findall(r"`(\w+)`", labels)))
    return found


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expression) of every panel target and query variable."""
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield f"variable {variable['name']}", query["query"] if isinstance(query, dict) else query


def alert_queries() -> Iterator[tuple[str, str]]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    for group in rule["spec"]["groups"]:
        for one in group["rules"]:
            yield f"rule {one.get('alert') or one.get('record')}", one["expr"]


def problems(expr: str, exported: dict[str, Family]) -> list[str]:
    """What ``expr`` reads that the server does not export."""
    series = {name: family for family in exported.values() for name in family.series}
    read: Reads = reads(expr)
    found = [f"unknown function {name}" for name in sorted(read.unknown_functions)]
    found += [f"{name} is not exported" for name in sorted(read.metrics - series.keys())]
    if not read.metrics:
        found.append("reads no metric")
    for name, labels in read.matched.items():
        if not name:
            found.append("a selector without a metric name")
        elif name in series:
            own = series[name].labels | TARGET_LABELS | ({"le"} if name.endswith("_bucket") else set())
            found += [f"{name} has no label {label}" for label in sorted(labels - own)]
    carried = {label for name in read.metrics if name in series for label in series[name].labels}
    carried |= TARGET_LABELS | ({"le"} if any(name.endswith("_bucket") for name in read.metrics) else set())
    found += [f"no metric read carries the label {label}" for label in sorted(read.grouped - carried)]
    return found


def test_the_query_reader_finds_names_labels_and_mistakes() -> None:
    read = reads('histogram_quantile(0.99, sum by (endpoint, le) (rate(x_bucket{code=~"5.."}[$__rate_interval])))'
                 ' > 2 and on (endpoint) y offset 1h / ignoring(a) z - time() < 14 * 86400')
    assert read.metrics == {"x_bucket", "y", "z"}
    assert read.matched == {"x_bucket": {"code"}}
    assert read.grouped == {"endpoint", "le", "a"}
    assert reads("label_values(m, policy)").metrics == {"m"}
    assert reads("sum(rate(m[5m])) / sumr(rate(m[5m]))").unknown_functions == {"sumr"}
    exported = {"m_total": Family("m_total", "counter", frozenset({"policy"}), frozenset({"m_total"}))}
    assert problems('sum by (policy) (rate(m_total{policy=~"$policy"}[5m]))', exported) == []
    assert problems("rate(m[5m])", exported) == ["m is not exported"]
    assert problems('rate(m_total{action="Deny"}[5m])', exported) == ["m_total has no label action"]
    assert problems("sum by (action) (rate(m_total[5m]))", exported) == ["no metric read carries the label action"]


def test_every_exported_metric_is_documented_and_every_documented_one_exported(
        exported: dict[str, Family]) -> None:
    docs = documented(DOC.read_text())
    assert sorted(exported.keys() - docs.keys()) == [], "exported, missing in docs/metrics.md"
    assert sorted(docs.keys() - exported.keys()) == [], "in docs/metrics.md, not exported"


def test_documented_types_and_labels_are_the_exported_ones(exported: dict[str, Family]) -> None:
    for name, (kind, labels) in documented(DOC.read_text()).items():
        family = exported[name]
        assert (kind, labels) == (family.type, family.labels), name


def test_every_documented_metric_has_an_example_query_that_reads_it(exported: dict[str, Family]) -> None:
    text = DOC.read_text()
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    for section in sections:
        name = section.split("`")[1]
        examples = _PROMQL.findall(section)
        assert examples, f"{name} has no example query"
        read = {metric for example in examples for metric in reads(example).metrics}
        assert read & exported[name].series, f"the example of {name} does not read it"
    for example in _PROMQL.findall(text):
        assert problems(example, exported) == [], example


def test_every_dashboard_query_reads_exported_metrics(exported: dict[str, Family]) -> None:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    queries = list(dashboard_queries(dashboard))
    assert len(queries) >= 15
    assert {where: problems(expr, exported) for where, expr in queries} == {where: [] for where, _ in queries}


def test_every_alert_query_reads_exported_metrics(exported: dict[str, Family]) -> None:
    queries = list(alert_queries())
    assert queries
    assert {where: problems(expr, exported) for where, expr in queries} == {where: [] for where, _ in queries}


def test_the_service_monitor_keeps_the_endpoint_label() -> None:
    # The operator labels every target `endpoint` (the port's name); without honorLabels the
    # webhook's own `endpoint` label would arrive as exported_endpoint and the queries find nothing.
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    assert all(endpoint.get("honorLabels") is True for endpoint in monitor["spec"]["endpoints"])


def test_the_dashboard_lays_out_every_panel_with_a_query() -> None:
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "policy"]
