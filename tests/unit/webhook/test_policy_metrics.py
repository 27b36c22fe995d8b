"""The per-policy and per-request metrics, kept as plain numbers, read as prometheus-client's own would be."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kinitiras_py.engine.results import Mutation, PolicyId, RuleId
from kinitiras_py.webhook.metrics import _LATENCY_BUCKETS, Metrics

OVERSELL = PolicyId("ClusterOverridePolicy", None, "oversell")
LABELS = PolicyId("OverridePolicy", "team-a", "labels")
# Bucket bounds themselves (a value equal to a bound is in that bucket), between them, past the last.
SECONDS = [0.0005, 0.0007, 0.001, 0.0025, 0.004, 1.0, 5.0, 7.5, 0.0]


def _samples(text: bytes, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples
            if s.name.startswith(prefix) and not s.name.endswith("_created")}


def test_per_policy_metrics_read_as_prometheus_client_writes_them() -> None:
    metrics = Metrics()
    reference = CollectorRegistry()
    matched = Counter("kinitiras_policy_matched_total", "m", ["policy"], registry=reference)
    patched = Counter("kinitiras_policy_patched_total", "p", ["policy"], registry=reference)
    evaluation = Histogram("kinitiras_policy_evaluation_seconds", "e", ["policy"], buckets=_LATENCY_BUCKETS,
                           registry=reference)
    for i, seconds in enumerate(SECONDS):
        applied = [RuleId(OVERSELL, 0)] * (i % 3)
        metrics.observe_mutation(Mutation(object={}, timings={OVERSELL: seconds, LABELS: seconds / 2},
                                          applied=applied))
        for policy, taken in ((OVERSELL, seconds), (LABELS, seconds / 2)):
            matched.labels(str(policy)).inc()
            patched.labels(str(policy)).inc(len(applied) if policy == OVERSELL else 0)
            evaluation.labels(str(policy)).observe(taken)
    ours = _samples(metrics.render(), "kinitiras_policy_")
    theirs = _samples(generate_latest(reference), "kinitiras_policy_")
    assert ours == theirs
    assert ours[("kinitiras_policy_evaluation_seconds_bucket", (("le", "0.001"), ("policy", str(OVERSELL))))] == 4


def test_request_metrics_read_as_prometheus_client_writes_them() -> None:
    metrics = Metrics()
    reference = CollectorRegistry()
    requests = Counter("kinitiras_webhook_requests_total", "r", ["endpoint", "code"], registry=reference)
    latency = Histogram("kinitiras_webhook_request_duration_seconds", "l", ["endpoint"], buckets=_LATENCY_BUCKETS,
                        registry=reference)
    in_flight = Gauge("kinitiras_webhook_requests_in_flight", "f", ["endpoint"], registry=reference)
    for i, seconds in enumerate(SECONDS):
        endpoint, code = ("mutate", 200) if i % 3 else ("validate", 403 if i % 2 else 200)
        metrics.requests.entered(endpoint)
        in_flight.labels(endpoint).inc()
        metrics.requests.answered(endpoint, code, seconds)
        requests.labels(endpoint, str(code)).inc()
        latency.labels(endpoint).observe(seconds)
        if i != 4:  # one request stays in flight
            metrics.requests.left(endpoint)
            in_flight.labels(endpoint).dec()
    ours = _samples(metrics.render(), "kinitiras_webhook_")
    theirs = _samples(generate_latest(reference), "kinitiras_webhook_")
    assert ours == theirs
    assert ours[("kinitiras_webhook_requests_in_flight", (("endpoint", "mutate"),))] == 1
    assert ours[("kinitiras_webhook_request_duration_seconds_bucket", (("endpoint", "mutate"), ("le", "0.001")))] == 3
