"""The scan's progress as Prometheus metrics, in the registry the webhook exports."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from kinitiras_py.admission.results import RESULTS

__all__ = ["ScanMetrics"]


class ScanMetrics:
    """Objects scanned, queue, passes and current results of the background scan."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.scanned = Counter("kinitiras_scan_objects_scanned_total",
                               "Objects the background scan evaluated (full passes and changes)", registry=registry)
        self.queued = Gauge("kinitiras_scan_queued_objects", "Objects waiting to be scanned", registry=registry)
        self.watched = Gauge("kinitiras_scan_watched_objects", "Objects of the kinds the scanned policies select",
                             registry=registry)
        self.leading = Gauge("kinitiras_scan_leading", "1 on the replica that scans (the leader)", registry=registry)
        self.period = Gauge("kinitiras_scan_period_seconds", "Seconds between full passes (--scan-period)",
                            registry=registry)
        self.pass_duration = Gauge("kinitiras_scan_pass_duration_seconds", "Seconds the last full pass took",
                                   registry=registry)
        self.last_pass = Gauge("kinitiras_scan_last_full_pass_timestamp_seconds",
                               "When the last full pass ended (0: none yet on this replica)", registry=registry)
        self.results = Gauge("kinitiras_scan_results", "Rule results of the last scan of every object, by result",
                             ["result"], registry=registry)
        for result in RESULTS:
            self.results.labels(result).set(0)
