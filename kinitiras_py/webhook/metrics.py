"""Prometheus collectors, in a registry of their own so several servers can live in one process."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kinitiras_py.engine.results import Mutation, Verdict

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class Metrics:
    """Every metric kinitiras-py exports."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter("kinitiras_webhook_requests_total", "Admission requests by endpoint and result code",
                                ["endpoint", "code"], registry=r)
        self.latency = Histogram("kinitiras_webhook_request_duration_seconds", "Time to answer an admission request",
                                 ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("kinitiras_webhook_requests_in_flight", "Admission requests being handled",
                               ["endpoint"], registry=r)
        self.matched = Counter("kinitiras_policy_matched_total", "Rules of a policy that applied to an object",
                               ["policy"], registry=r)
        self.patched = Counter("kinitiras_policy_patched_total", "Rules of a policy that changed an object",
                               ["policy"], registry=r)
        self.rejected = Counter("kinitiras_policy_rejected_total", "Objects a policy rejected", ["policy", "action"],
                                registry=r)
        self.errors = Counter("kinitiras_policy_errors_total", "Rule failures by policy and failurePolicy outcome",
                              ["policy", "outcome"], registry=r)
        self.evaluation = Histogram("kinitiras_policy_evaluation_seconds", "Time spent evaluating one policy's rules",
                                    ["policy"], buckets=_LATENCY_BUCKETS, registry=r)
        self.informer_synced = Gauge("kinitiras_informer_synced", "1 when the informer for a kind has synced",
                                     ["kind"], registry=r)
        self.policies = Gauge("kinitiras_policies", "Policies in the index by kind", ["kind"], registry=r)

    def observe_mutation(self, mutation: Mutation) -> None:
        """Count what one mutation did, per policy."""
        for ref, seconds in mutation.timings.items():
            self.matched.labels(ref).inc()
            self.evaluation.labels(ref).observe(seconds)
        for applied in mutation.applied:
            self.patched.labels(applied.rsplit(" rule ", 1)[0]).inc()
        if mutation.failure is not None:
            self.errors.labels(mutation.failure.policy, "ignored" if mutation.failure.ignored else "denied").inc()
        for warning in mutation.warnings:
            if "failurePolicy Ignore" in warning:
                self.errors.labels(warning.split(", rule ", 1)[0].removeprefix("policy "), "ignored").inc()

    def observe_verdict(self, verdict: Verdict) -> None:
        """Count what one validation did, per policy."""
        for ref, seconds in verdict.timings.items():
            self.matched.labels(ref).inc()
            self.evaluation.labels(ref).observe(seconds)
        if not verdict.allowed and verdict.policy:
            self.rejected.labels(verdict.policy, "Deny").inc()

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)
