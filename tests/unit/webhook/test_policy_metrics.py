"""The per-policy and per-request metrics, kept as plain numbers, read as prometheus-client's own would be."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kinitiras_py.base import collector
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import Mutation, PolicyId, RuleId
from kinitiras_py.engine.running.validating import validate
from kinitiras_py.webhook.metrics import _LATENCY_BUCKETS, _PAUSE_BUCKETS, Metrics

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


def _cvp(name: str, *actions: list[str]) -> CompiledPolicy:
    """A ClusterValidatePolicy whose rules (one per entry of ``actions``) all fail on any object."""
    rules = [{"validationActions": taken, "cel": f"object.metadata.name == 'not-{i}'"}
             for i, taken in enumerate(actions)]
    return compile_policy({"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
                           "metadata": {"name": name}, "spec": {"validateRules": rules}})


def test_rejections_are_counted_with_the_action_their_rule_took() -> None:
    # Cluster policies run by name: "audited" (its rules warn and audit) before "denies".
    audited, denies = _cvp("audited", ["Audit"], ["Warn"], ["Warn", "Audit"]), _cvp("denies", ["Deny"])
    metrics = Metrics()
    for _ in range(2):
        verdict = validate([(p, rule) for p in (audited, denies) for rule in p.rules],
                           {"object": {"metadata": {"name": "o"}}, "oldObject": None})
        metrics.observe_verdict(verdict)
    rejected = {labels: v for (name, labels), v in _samples(metrics.render(), "kinitiras_policy_rejected").items()
                if name == "kinitiras_policy_rejected_total"}
    assert rejected == {(("action", "Audit"), ("policy", "ClusterValidatePolicy audited")): 2.0,
                        (("action", "Warn"), ("policy", "ClusterValidatePolicy audited")): 2.0,
                        (("action", "Deny"), ("policy", "ClusterValidatePolicy denies")): 2.0}


def test_collection_pauses_read_as_prometheus_client_writes_a_histogram_and_serve_feeds_them() -> None:
    metrics = Metrics()
    reference = CollectorRegistry()
    pauses = Histogram("kinitiras_gc_pause_seconds", "p", ["collection"], buckets=_PAUSE_BUCKETS, registry=reference)
    reference_seconds = [0.0001, 0.00005, 0.003, 0.3, 3.0]
    for generation, seconds in zip((0, 1, 2, 2, 1), reference_seconds, strict=True):
        metrics.collections.observe(generation, seconds)
        pauses.labels("full" if generation == collector.FULL else "young").observe(seconds)
    assert _samples(metrics.render(), "kinitiras_gc") == _samples(generate_latest(reference), "kinitiras_gc")


def test_serve_times_the_collections_into_the_metric() -> None:
    metrics = Metrics()
    with collector.Pauses(metrics.collections.observe):  # as serve installs it
        gc.collect(0)
        gc.collect()
    found = _samples(metrics.render(), "kinitiras_gc_pause_seconds_count")
    assert found[("kinitiras_gc_pause_seconds_count", (("collection", "full"),))] >= 1
    assert found[("kinitiras_gc_pause_seconds_count", (("collection", "young"),))] >= 1
