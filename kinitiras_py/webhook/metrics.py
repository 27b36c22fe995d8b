"""Prometheus collectors, in a registry of their own so several servers can live in one process."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from kinitiras_py.admission import mutationmemo
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
        self.rejected = Counter("kinitiras_policy_rejected_total", "Objects a policy rejected", ["policy", "action"],
                                registry=r)
        self.errors = Counter("kinitiras_policy_errors_total", "Rule failures by policy and failurePolicy outcome",
                              ["policy", "outcome"], registry=r)
        self.per_policy = _PolicyStats(_LATENCY_BUCKETS)
        r.register(self.per_policy)
        self.informer_synced = Gauge("kinitiras_informer_synced", "1 when the informer for a kind has synced",
                                     ["kind"], registry=r)
        self.policies = Gauge("kinitiras_policies", "Policies in the index by kind", ["kind"], registry=r)
        r.register(_Results())
        self._children: dict[tuple[str, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once: the request path counts into the same few
        children every time, and ``labels()`` costs microseconds."""
        key = (metric._name, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def observe_mutation(self, mutation: Mutation) -> None:
        """Count what one mutation did, per policy."""
        self.per_policy.observe(mutation.timings)
        for applied in mutation.applied:
            self.per_policy.patched(applied.policy)
        self._observe_failures(mutation.failure, mutation.ignored)

    def observe_verdict(self, verdict: Verdict) -> None:
        """Count what one validation did, per policy."""
        self.per_policy.observe(verdict.timings)
        if not verdict.allowed and verdict.policy is not None:
            self.rejected.labels(str(verdict.policy), "Deny").inc()
        self._observe_failures(verdict.failure, verdict.ignored)

    def _observe_failures(self, failure: RuleFailure | None, ignored: list[RuleFailure]) -> None:
        for skipped in ignored:
            self.errors.labels(str(skipped.policy), "ignored").inc()
        if failure is not None:
            self.errors.labels(str(failure.policy), "ignored" if failure.ignored else "denied").inc()

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)


class _Policy:
    """One policy's counts and evaluation-time histogram."""

    __slots__ = ("counts", "matched", "name", "patched", "seconds")

    def __init__(self, name: str, buckets: int) -> None:
        self.name = name
        self.matched = self.patched = 0
        self.seconds = 0.0
        self.counts = [0] * (buckets + 1)  # per bucket, not cumulative; the last is +Inf


class _PolicyStats:
    """Per policy: rules matched, rules that changed the object, time evaluating them (a
    histogram), kept as plain numbers and read when scraped.

    prometheus-client's children take a lock per update, three per matched policy on every
    request; these are updated on the event loop only, where requests are answered, one at a time.
    """

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = buckets
        self._policies: dict[PolicyId, _Policy] = {}

    def _of(self, policy: PolicyId) -> _Policy:
        found = self._policies.get(policy)
        if found is None:
            found = self._policies[policy] = _Policy(str(policy), len(self._bounds))
        return found

    def observe(self, timings: dict[PolicyId, float]) -> None:
        """Count each policy as matched, with the seconds its rules took."""
        bounds = self._bounds
        for policy, seconds in timings.items():
            stats = self._of(policy)
            stats.matched += 1
            stats.seconds += seconds
            stats.counts[bisect_left(bounds, seconds)] += 1  # a bucket holds values up to its bound

    def patched(self, policy: PolicyId) -> None:
        """Count a rule of ``policy`` that changed the object."""
        self._of(policy).patched += 1

    def collect(self) -> Iterator[Metric]:
        """The three families, as prometheus-client's Counter and Histogram would write them."""
        matched = CounterMetricFamily("kinitiras_policy_matched", "Rules of a policy that applied to an object",
                                      labels=["policy"])
        patched = CounterMetricFamily("kinitiras_policy_patched", "Rules of a policy that changed an object",
                                      labels=["policy"])
        evaluation = HistogramMetricFamily("kinitiras_policy_evaluation_seconds",
                                           "Time spent evaluating one policy's rules", labels=["policy"])
        edges = [floatToGoString(bound) for bound in self._bounds] + ["+Inf"]
        for stats in list(self._policies.values()):
            matched.add_metric([stats.name], stats.matched)
            patched.add_metric([stats.name], stats.patched)
            total, buckets = 0, []
            for edge, count in zip(edges, stats.counts, strict=True):
                total += count
                buckets.append((edge, total))
            evaluation.add_metric([stats.name], buckets, stats.seconds)
        yield matched
        yield patched
        yield evaluation


class _Results:
    """The counters of the CEL result cache (:mod:`.celmemo`) and of the memory of mutations
    (:mod:`.mutationmemo`), read when scraped."""

    def collect(self) -> Iterator[Metric]:
        results = celmemo.RESULTS
        yield CounterMetricFamily("kinitiras_cel_results_looked_up", "CEL evaluations answered from the result cache",
                                  value=results.hits)
        yield CounterMetricFamily("kinitiras_cel_results_evaluated",
                                  "CEL evaluations the result cache could have answered but had no entry for",
                                  value=results.misses)
        yield GaugeMetricFamily("kinitiras_cel_results_bytes", "Memory held by the CEL result cache",
                                value=results.size)
        mutations = mutationmemo.MUTATIONS
        yield CounterMetricFamily("kinitiras_mutation_results_looked_up",
                                  "Mutations answered from the memory of mutations, no rule run", value=mutations.hits)
        yield CounterMetricFamily("kinitiras_mutation_results_evaluated",
                                  "Mutations the memory of mutations could have answered but had no entry for",
                                  value=mutations.misses)
        yield GaugeMetricFamily("kinitiras_mutation_results_bytes", "Memory held by the memory of mutations",
                                value=mutations.size)
