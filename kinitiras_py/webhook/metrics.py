"""Prometheus collectors, in a registry of their own so several servers can live in one process."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.engine.results import Mutation, PolicyId, RuleFailure, Verdict

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
        r.register(_CelResults())
        self._children: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._policies: dict[PolicyId, tuple[Any, Any, Any]] = {}

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once: the request path counts into the same few
        children every time, and ``labels()`` costs microseconds."""
        key = (metric._name, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def _policy(self, policy: PolicyId) -> tuple[Any, Any, Any]:
        """The matched, evaluation and patched children of one policy."""
        found = self._policies.get(policy)
        if found is None:
            name = str(policy)
            found = self._policies[policy] = (self.matched.labels(name), self.evaluation.labels(name),
                                              self.patched.labels(name))
        return found

    def observe_mutation(self, mutation: Mutation) -> None:
        """Count what one mutation did, per policy."""
        self._observe_timings(mutation.timings)
        for applied in mutation.applied:
            self._policy(applied.policy)[2].inc()
        self._observe_failures(mutation.failure, mutation.ignored)

    def observe_verdict(self, verdict: Verdict) -> None:
        """Count what one validation did, per policy."""
        self._observe_timings(verdict.timings)
        if not verdict.allowed and verdict.policy is not None:
            self.rejected.labels(str(verdict.policy), "Deny").inc()
        self._observe_failures(verdict.failure, verdict.ignored)

    def _observe_timings(self, timings: dict[PolicyId, float]) -> None:
        for policy, seconds in timings.items():
            matched, evaluation, _ = self._policy(policy)
            matched.inc()
            evaluation.observe(seconds)

    def _observe_failures(self, failure: RuleFailure | None, ignored: list[RuleFailure]) -> None:
        for skipped in ignored:
            self.errors.labels(str(skipped.policy), "ignored").inc()
        if failure is not None:
            self.errors.labels(str(failure.policy), "ignored" if failure.ignored else "denied").inc()

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)


class _CelResults:
    """The CEL result cache's counters (:mod:`.celmemo`), read when scraped."""

    def collect(self) -> Iterator[Metric]:
        results = celmemo.RESULTS
        yield CounterMetricFamily("kinitiras_cel_results_looked_up", "CEL evaluations answered from the result cache",
                                  value=results.hits)
        yield CounterMetricFamily("kinitiras_cel_results_evaluated",
                                  "CEL evaluations the result cache could have answered but had no entry for",
                                  value=results.misses)
        yield GaugeMetricFamily("kinitiras_cel_results_bytes", "Memory held by the CEL result cache",
                                value=results.size)
