"""Prometheus collectors, in a registry of their own so several servers can live in one process."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from kinitiras_py.admission.engine import Engine
from kinitiras_py.base.bounded import Cache
from kinitiras_py.base.collector import FULL
from kinitiras_py.engine.policies.results import Mutation, PolicyId, RuleFailure, Verdict
from kinitiras_py.reports.stats import ReportStats

CONTENT_TYPE = CONTENT_TYPE_LATEST
# 2.0 is 80% of the default 2.5 s deadline: the alert on p99 near the deadline reads that bucket edge.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0)
# A young collection takes well under a millisecond; a full one over a large heap, up to seconds.
_PAUSE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass
class Metrics:
    """Every metric kinitiras-py exports."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = _RequestStats(_LATENCY_BUCKETS)
        r.register(self.requests)
        self.rejected = Counter("kinitiras_policy_rejected_total",
                                "Objects a policy's validate rules failed on, by action (Deny, Warn, Audit)",
                                ["policy", "action"], registry=r)
        self.errors = Counter("kinitiras_policy_errors_total", "Rule failures by policy and failurePolicy outcome",
                              ["policy", "outcome"], registry=r)
        self.per_policy = _PolicyStats(_LATENCY_BUCKETS)
        r.register(self.per_policy)
        self.informer_synced = Gauge("kinitiras_informer_synced", "1 when the informer for a kind has synced",
                                     ["kind"], registry=r)
        self.policies = Gauge("kinitiras_policies", "Policies in the index by kind", ["kind"], registry=r)
        self.caches = _Results()
        r.register(self.caches)
        self.certificate = _Certificate()
        r.register(self.certificate)
        self.collections = _Collections(_PAUSE_BUCKETS)
        """The garbage collector's pauses, fed by ``serve`` (:class:`~..base.collector.Pauses`)."""
        r.register(self.collections)
        self.reports = ReportStats()
        """PolicyReports written, fed by ``serve``'s report writer."""
        r.register(self.reports)

    def observe_mutation(self, mutation: Mutation) -> None:
        """Count what one mutation did, per policy."""
        self.observe_policies(mutation.timings, [applied.policy for applied in mutation.applied])
        self._observe_failures(mutation.failure, mutation.ignored)

    def observe_policies(self, timings: dict[PolicyId, float], patched: Iterable[PolicyId]) -> None:
        """Count the policies that matched (with their time) and the policy of each rule that
        changed the object."""
        self.per_policy.observe(timings)
        for policy in patched:
            self.per_policy.patched(policy)

    def observe_verdict(self, verdict: Verdict) -> None:
        """Count what one validation did, per policy."""
        self.per_policy.observe(verdict.timings)
        if not verdict.allowed and verdict.policy is not None:
            self.rejected.labels(str(verdict.policy), "Deny").inc()
        for policy, action in verdict.flagged:
            self.rejected.labels(str(policy), action).inc()
        self._observe_failures(verdict.failure, verdict.ignored)

    def _observe_failures(self, failure: RuleFailure | None, ignored: list[RuleFailure]) -> None:
        for skipped in ignored:
            self.errors.labels(str(skipped.policy), "ignored").inc()
        if failure is not None:
            self.errors.labels(str(failure.policy), "ignored" if failure.ignored else "denied").inc()

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)


class _Histogram:
    """Observations per bucket, kept as plain numbers, and their sum."""

    __slots__ = ("counts", "seconds")

    def __init__(self, buckets: int) -> None:
        self.seconds = 0.0
        self.counts = [0] * (buckets + 1)  # per bucket, not cumulative; the last is +Inf

    def observe(self, bounds: tuple[float, ...], seconds: float) -> None:
        """Count one observation of ``seconds`` against the bucket ``bounds``."""
        self.seconds += seconds
        self.counts[bisect_left(bounds, seconds)] += 1  # a bucket holds values up to its bound

    def add_to(self, family: HistogramMetricFamily, labels: list[str], edges: list[str]) -> None:
        """Add this histogram to ``family`` as prometheus-client writes one: cumulative buckets."""
        total, buckets = 0, []
        for edge, count in zip(edges, self.counts, strict=True):
            total += count
            buckets.append((edge, total))
        family.add_metric(labels, buckets, self.seconds)


def _edges(bounds: tuple[float, ...]) -> list[str]:
    return [floatToGoString(bound) for bound in bounds] + ["+Inf"]


class _RequestStats:
    """Per endpoint: requests answered by result code, the time each took (a histogram) and the
    requests in flight, kept as plain numbers and read when scraped (prometheus-client's children
    take a lock per update; these are updated on the event loop only)."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = buckets
        self._answered: dict[tuple[str, int], int] = {}
        self._latency: dict[str, _Histogram] = {}
        self._in_flight: dict[str, int] = {}

    def answered(self, endpoint: str, code: int, seconds: float) -> None:
        """Count one answer on ``endpoint`` with ``code`` that took ``seconds``."""
        key = (endpoint, code)
        self._answered[key] = self._answered.get(key, 0) + 1
        latency = self._latency.get(endpoint)
        if latency is None:
            latency = self._latency[endpoint] = _Histogram(len(self._bounds))
        latency.observe(self._bounds, seconds)

    def entered(self, endpoint: str) -> None:
        """A request on ``endpoint`` is being handled."""
        self._in_flight[endpoint] = self._in_flight.get(endpoint, 0) + 1

    def left(self, endpoint: str) -> None:
        """A request on ``endpoint`` is no longer being handled."""
        self._in_flight[endpoint] -= 1

    def collect(self) -> Iterator[Metric]:
        """The three families, as prometheus-client's Counter, Histogram and Gauge would write them."""
        requests = CounterMetricFamily("kinitiras_webhook_requests", "Admission requests by endpoint and result code",
                                       labels=["endpoint", "code"])
        for (endpoint, code), count in list(self._answered.items()):
            requests.add_metric([endpoint, str(code)], count)
        latency = HistogramMetricFamily("kinitiras_webhook_request_duration_seconds",
                                        "Time to answer an admission request", labels=["endpoint"])
        edges = _edges(self._bounds)
        for endpoint, histogram in list(self._latency.items()):
            histogram.add_to(latency, [endpoint], edges)
        in_flight = GaugeMetricFamily("kinitiras_webhook_requests_in_flight", "Admission requests being handled",
                                      labels=["endpoint"])
        for endpoint, count in list(self._in_flight.items()):
            in_flight.add_metric([endpoint], count)
        yield requests
        yield latency
        yield in_flight


class _Policy:
    """One policy's counts and evaluation-time histogram."""

    __slots__ = ("evaluation", "matched", "name", "patched")

    def __init__(self, name: str, buckets: int) -> None:
        self.name = name
        self.matched = self.patched = 0
        self.evaluation = _Histogram(buckets)


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
            stats.evaluation.observe(bounds, seconds)

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
        edges = _edges(self._bounds)
        for stats in list(self._policies.values()):
            matched.add_metric([stats.name], stats.matched)
            patched.add_metric([stats.name], stats.patched)
            stats.evaluation.add_to(evaluation, [stats.name], edges)
        yield matched
        yield patched
        yield evaluation


class _Collections:
    """The garbage collector's pauses, young (generations 0 and 1) and full, as a histogram kept
    as plain numbers: :meth:`observe` runs inside a collection, on whatever thread triggered it,
    where taking a lock (as prometheus-client's children do) could wait on the thread itself."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = buckets
        self._young = _Histogram(len(buckets))
        self._full = _Histogram(len(buckets))

    def observe(self, generation: int, seconds: float) -> None:
        """Count one collection of ``generation`` that held the process for ``seconds``."""
        (self._full if generation == FULL else self._young).observe(self._bounds, seconds)

    def collect(self) -> Iterator[Metric]:
        """One histogram family, labelled by collection (young, full)."""
        family = HistogramMetricFamily("kinitiras_gc_pause_seconds",
                                       "Time the garbage collector held the process, per collection",
                                       labels=["collection"])
        edges = _edges(self._bounds)
        self._young.add_to(family, ["young"], edges)
        self._full.add_to(family, ["full"], edges)
        yield family


class _Results:
    """The counters and sizes of an engine's CEL result cache (:mod:`.celmemo`), memory of mutations
    (:mod:`.mutationmemo`) and remembered answers (:mod:`.answers`), read when scraped."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        """The engine whose caches are counted; the handlers set it (no sample until then)."""

    def collect(self) -> Iterator[Metric]:
        engine = self.engine
        if engine is None:
            return
        yield from _cache("kinitiras_cel_results", engine.cel_results,
                          "CEL evaluations answered from the result cache",
                          ("evaluated", "CEL evaluations the result cache could have answered but had no entry for"),
                          "Memory held by the CEL result cache")
        yield from _cache("kinitiras_mutation_results", engine.mutations,
                          "Mutations answered from the memory of mutations, no rule run",
                          ("evaluated", "Mutations the memory of mutations could have answered but had no entry for"),
                          "Memory held by the memory of mutations")
        yield from _cache("kinitiras_mutation_answers", engine.answers,
                          "/mutate requests answered from remembered answers, the request not decoded",
                          ("made", "/mutate requests laid out as the API server writes them that had no "
                                   "remembered answer"),
                          "Memory held by remembered answers")


class Served(Protocol):
    """The served certificate pair as the metrics read it (``certs.tls.ReloadableTLS``, which the
    webhook does not import: certs and webhook stay independent)."""

    @property
    def not_after(self) -> float | None:
        """When the served leaf certificate expires (Unix seconds), or None before the first load."""


class _Certificate:
    """When the serving certificate this replica presents expires, read when scraped (it changes
    whenever the rotator or a file reload swaps it)."""

    def __init__(self) -> None:
        self.tls: Served | None = None
        """The served pair; None until ``serve`` hands it over (no sample until then)."""

    def collect(self) -> Iterator[Metric]:
        """One gauge, without a sample while no certificate is served."""
        family = GaugeMetricFamily("kinitiras_webhook_certificate_expiration_timestamp_seconds",
                                   "Unix time at which the serving certificate this replica presents expires")
        not_after = self.tls.not_after if self.tls is not None else None
        if not_after is not None:
            family.add_metric([], not_after)
        yield family


def _cache(prefix: str, cache: Cache[Any, Any], hits: str, misses: tuple[str, str], size: str) -> Iterator[Metric]:
    """A cache's families: ``<prefix>_looked_up`` (its hits), ``<prefix>_<misses[0]>`` (its misses)
    and ``<prefix>_bytes`` (what it holds)."""
    yield CounterMetricFamily(f"{prefix}_looked_up", hits, value=cache.hits)
    yield CounterMetricFamily(f"{prefix}_{misses[0]}", misses[1], value=cache.misses)
    yield GaugeMetricFamily(f"{prefix}_bytes", size, value=cache.size)
