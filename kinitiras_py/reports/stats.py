"""The report writer's metrics, kept as plain numbers and read when scraped (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from kinitiras_py.api.reports import RESULTS
from kinitiras_py.reports.build import KINDS


class ReportStats:
    """Reports and results written, API requests made, objects waiting, and whether this replica writes.

    A prometheus-client collector: register it in a registry (the webhook's ``Metrics`` does).
    """

    def __init__(self) -> None:
        self.reports = dict.fromkeys(KINDS, 0)
        """Report objects this replica wrote and holds as existing, by kind."""
        self.results = dict.fromkeys(RESULTS, 0)
        """Results in those reports, by result."""
        self.requests: dict[tuple[str, str], int] = {}
        """API requests by operation (apply, delete, list) and outcome (ok, error)."""
        self.pending = 0
        """Objects whose reports wait to be written."""
        self.leading = False
        """Whether this replica writes reports (it holds the Lease)."""

    def requested(self, operation: str, ok: bool) -> None:
        """Count one API request."""
        key = (operation, "ok" if ok else "error")
        self.requests[key] = self.requests.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        """The five families."""
        reports = GaugeMetricFamily("kinitiras_reports", "PolicyReports this replica wrote, by kind",
                                    labels=["kind"])
        for kind, count in self.reports.items():
            reports.add_metric([kind], count)
        results = GaugeMetricFamily("kinitiras_report_results",
                                    "Results in the PolicyReports this replica wrote, by result", labels=["result"])
        for result, count in self.results.items():
            results.add_metric([result], count)
        requests = CounterMetricFamily("kinitiras_report_requests",
                                       "API requests writing PolicyReports, by operation and outcome",
                                       labels=["operation", "outcome"])
        for (operation, outcome), count in list(self.requests.items()):
            requests.add_metric([operation, outcome], count)
        yield reports
        yield results
        yield requests
        yield GaugeMetricFamily("kinitiras_report_pending", "Objects whose PolicyReports wait to be written",
                                value=self.pending)
        yield GaugeMetricFamily("kinitiras_report_leader", "1 while this replica writes PolicyReports",
                                value=1 if self.leading else 0)
