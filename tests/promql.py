"""What PromQL expressions read, and what a metrics exposition offers, for the tests that hold the
dashboard, the alert rules and docs/metrics.md to the metrics the server exports.

This is no PromQL parser: it reads the parts of an expression that name series and labels
(selectors, ``by``/``without`` and ``on``/``ignoring`` lists) and treats every other bare name as
a metric, so an unknown function or keyword is reported as an unknown metric rather than passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_RANGE = re.compile(r"\[[^\]\[]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_SELECTOR = re.compile(r"(?<![\w:$])([A-Za-z_:][\w:]*)?\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"^\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*\"\"\s*$")
_NAME = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*([A-Za-z_]\w*)\s*\)\s*$")
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                      "group_right", "atan2", "inf", "nan", "Inf", "NaN"})
"""Bare words that are operators or constants, not metrics."""
FUNCTIONS = frozenset({
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile",
    "holt_winters", "hour", "idelta", "increase", "irate", "label_join", "label_replace", "ln", "log2", "log10",
    "minute", "month", "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt",
    "time", "timestamp", "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time"})
"""PromQL's functions and aggregations (Prometheus 2.x); a call of anything else is an error."""


@dataclass
class Reads:
    """What one expression reads: metric names, the labels each selector matches on, and the
    labels its groupings name."""

    metrics: set[str] = field(default_factory=set)
    matched: dict[str, set[str]] = field(default_factory=dict)
    """Per metric, the label names of its selectors' matchers."""
    grouped: set[str] = field(default_factory=set)
    unknown_functions: set[str] = field(default_factory=set)


def reads(expr: str) -> Reads:
    """The metrics and labels ``expr`` reads. Grafana's ``label_values(metric, label)`` is read as
    a selector of ``metric`` grouped by ``label``."""
    found = Reads()
    values = _LABEL_VALUES.match(expr)
    if values is not None:
        found.metrics.add(values[1])
        found.grouped.add(values[2])
        return found
    text = _STRING.sub('""', expr)
    text = _RANGE.sub(" ", text)  # ranges and subqueries: [5m], [$__rate_interval], [1h:5m]
    for match in _GROUPING.finditer(text):
        found.grouped |= {label.strip() for label in match[2].split(",") if label.strip()}
    text = _GROUPING.sub(" ", text)
    for match in _SELECTOR.finditer(text):
        name = match[1] or ""
        labels = found.matched.setdefault(name, set())
        for matcher in filter(str.strip, match[2].split(",")):
            parsed = _MATCHER.match(matcher)
            if parsed is None:
                raise ValueError(f"cannot read the matcher {matcher!r} in {expr!r}")
            labels.add(parsed[1])
        if name:
            found.metrics.add(name)
    text = _SELECTOR.sub(lambda m: f" {m[1] or ''} ", text)
    for match in _NAME.finditer(text):
        word, call = match[1], match[2]
        if call:
            if word not in FUNCTIONS:
                found.unknown_functions.add(word)
        elif word not in KEYWORDS:
            found.metrics.add(word)
    return found


@dataclass(frozen=True)
class Family:
    """One metric family of an exposition: its name as documented (counters with ``_total``),
    its type and the label names its samples carry."""

    name: str
    type: str
    labels: frozenset[str]
    series: frozenset[str]
    """The names of its series: ``_bucket``, ``_sum``, ``_count`` for a histogram."""


def families(exposition: str) -> dict[str, Family]:
    """The families of a text exposition, by documented name."""
    found: dict[str, Family] = {}
    for family in text_string_to_metric_families(exposition):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        series = ({f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
                  if family.type == "histogram" else {name})
        labels = {label for sample in family.samples for label in sample.labels if label != "le"}
        found[name] = Family(name, family.type, frozenset(labels), frozenset(series))
    return found
