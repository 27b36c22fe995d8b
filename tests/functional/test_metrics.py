"""Every metric the README and webhook/metrics.py document moves when the webhook does its work.

Requests go through real HTTP (aiohttp test server); the expected families are listed here, and
the test fails when the registry exports one that no request in this test moves.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from kinitiras_py.base import collector
from kinitiras_py.bench.scanscale import Preloaded
from kinitiras_py.certs import authority
from kinitiras_py.certs.tls import ReloadableTLS
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.reports.admission import AdmissionFeed
from kinitiras_py.reports.writer import ReportWriter
from kinitiras_py.runtime.running import update_gauges
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from kinitiras_py.webhook.app import make_app
from kinitiras_py.webhook.handlers import Handlers
from tests.compiling import compile_all
from tests.functional.test_webhook import (
    DENY_NS,
    DEPLOYMENT,
    OVERSELL,
    SlowStore,
    api_review,
    make_handlers,
    owner_policy,
    post,
    review,
)
from tests.scanfakes import MemorySink
from tests.unit.registration.test_rules import FakeCatalog
from tests.unit.reports.test_writer import FakeServer

LABEL_CM = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: label-cm, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/labels, value: {seen: "yes"}}]
""")
CM_CHECK = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: cm-check}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - failurePolicy: Ignore
    cel: "object.data.missing == 'x'"
""")
"""Its rule fails on a ConfigMap without that key, and is skipped."""
CM_AUDIT = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: cm-audit}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - validationActions: [Audit]
    cel: "has(object.data)"
  - validationActions: [Warn]
    cel: "has(object.binaryData)"
  - validationActions: [Warn, Audit]
    cel: "has(object.immutable)"
""")
"""Its three rules fail on a bare ConfigMap: the policy is counted once per object and action."""
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}
ACCOUNT = {**SECRET, "kind": "ServiceAccount"}
"""No owner reference: the owner lookup of ``owner_policy`` fails."""
PROTECTED = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"protected": "y"}}}

SERVING = authority.new_serving(authority.new_ca(), ["kinitiras-webhook.kinitiras-system.svc"], days=30)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, by (sample name, sorted labels)."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@dataclass
class _Informer:
    synced: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Watch:
    informers: dict[str, Any]

    def counts(self) -> dict[str, int]:
        return {"ClusterOverridePolicy": 3, "OverridePolicy": 1, "ClusterValidatePolicy": 1, "ValidatePolicy": 0}


SCAN_AUDIT = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: scan-audit}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - validationActions: [Audit]
    cel: "object.metadata.name == 'scanned'"
  - validationActions: [Warn]
    cel: "object.metadata.namespace == 'elsewhere'"
  - validationActions: [Audit]
    cel: "has(object.metadata.uid)"
""")


async def scan_once(registry: CollectorRegistry) -> Scanner:
    """A background scan, as ``serve`` runs it (its metrics in the webhook's registry), through one
    full pass over a ConfigMap under SCAN_AUDIT (one rule fails, one warns, one passes); it keeps
    running. (Its own rules: the webhook's memory of CEL results is not touched.)"""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", "uid": "u"}}
    scanner = Scanner(None, MemorySink(), Context(StaticStore()), FakeCatalog(), metrics=ScanMetrics(registry),
                      make_informer=lambda client, resource: Preloaded(client, resource, [cm]))
    await scanner.on_policy("ClusterValidatePolicy", None, "scan-audit", compile_all([SCAN_AUDIT])[0])
    await scanner.start()
    async with asyncio.timeout(5):
        while not scanner.passes:
            await asyncio.sleep(0.01)
    return scanner


async def exercise(aiohttp_client: Any) -> tuple[Handlers, TestClient]:
    """An in-process server that has answered requests moving every metric it exports (its
    certificate, policy counts and watches set as ``serve`` sets them, a background scan run): its
    handlers and a client."""
    fail_on_accounts = owner_policy("Fail")
    fail_on_accounts["spec"]["resourceSelectors"] = [{"apiVersion": "v1", "kind": "ServiceAccount"}]
    handlers = make_handlers([OVERSELL, LABEL_CM, DENY_NS, CM_CHECK, CM_AUDIT, owner_policy("Ignore"),
                              fail_on_accounts])
    handlers.metrics.certificate.tls = ReloadableTLS(SERVING.cert, SERVING.key)
    await scan_once(handlers.metrics.registry)

    async def uid(_resource: object) -> str:
        return "uid-c"

    # The ConfigMap's Audit and Warn findings go into its PolicyReport, as `serve --policy-reports` does.
    writer = ReportWriter(FakeServer(), lambda: True, writes_per_second=1000, stats=handlers.metrics.reports,
                          uid_lookup=uid, poll=0.01)
    handlers.findings = AdmissionFeed(writer, handlers.engine.validations)
    client: TestClient = await aiohttp_client(make_app(handlers))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    renamed = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "name": "another"}}
    for endpoint, body in [("/mutate", review("CREATE", DEPLOYMENT)), ("/mutate", review("CREATE", cm)),
                           ("/mutate", review("CREATE", SECRET)), ("/mutate", review("CREATE", ACCOUNT)),
                           ("/validate", review("DELETE", None, PROTECTED)), ("/validate", review("CREATE", cm)),
                           ("/mutate", b"{not json"), ("/mutate", review("CREATE", DEPLOYMENT)),
                           ("/mutate", review("CREATE", renamed)),
                           # As the API server writes them: the second is answered as the first was.
                           ("/mutate", api_review("CREATE", DEPLOYMENT, "u-1")),
                           ("/mutate", api_review("CREATE", DEPLOYMENT, "u-2"))]:
        await post(client, endpoint, body)
    writer.start()
    try:
        await handlers.findings.drain()
        await asyncio.sleep(0.05)
        await writer.idle()
    finally:
        await writer.stop()
    synced = _Informer()
    synced.synced.set()
    update_gauges(_Watch({"ClusterOverridePolicy": synced, "OverridePolicy": _Informer()}), handlers.metrics)  # type: ignore[arg-type]
    return handlers, client


async def test_every_documented_metric_moves(aiohttp_client: Any) -> None:
    handlers, client = await exercise(aiohttp_client)
    with collector.Pauses(handlers.metrics.collections.observe):  # as serve times them
        gc.collect(0)
        gc.collect()
    found = samples(await (await client.get("/metrics")).text())

    oversell, label_cm = "ClusterOverridePolicy oversell", "OverridePolicy default/label-cm"
    ignore, fail, protect = "ClusterOverridePolicy owner-ignore", "ClusterOverridePolicy owner-fail", \
        "ClusterValidatePolicy protect-ns"
    audit = "ClusterValidatePolicy cm-audit"
    expected = {
        ("kinitiras_webhook_requests_total", (("code", "200"), ("endpoint", "mutate"))): 7.0,
        ("kinitiras_webhook_requests_total", (("code", "400"), ("endpoint", "mutate"))): 1.0,
        ("kinitiras_webhook_requests_total", (("code", "403"), ("endpoint", "mutate"))): 1.0,  # owner-fail
        ("kinitiras_webhook_requests_total", (("code", "403"), ("endpoint", "validate"))): 1.0,
        ("kinitiras_webhook_requests_total", (("code", "200"), ("endpoint", "validate"))): 1.0,
        ("kinitiras_webhook_request_duration_seconds_count", (("endpoint", "mutate"),)): 9.0,
        ("kinitiras_webhook_request_duration_seconds_count", (("endpoint", "validate"),)): 2.0,
        ("kinitiras_webhook_requests_in_flight", (("endpoint", "mutate"),)): 0.0,
        ("kinitiras_policy_matched_total", (("policy", oversell),)): 5.0,
        ("kinitiras_policy_matched_total", (("policy", label_cm),)): 1.0,
        ("kinitiras_policy_matched_total", (("policy", ignore),)): 1.0,
        ("kinitiras_policy_matched_total", (("policy", fail),)): 1.0,
        ("kinitiras_policy_matched_total", (("policy", protect),)): 1.0,
        ("kinitiras_policy_patched_total", (("policy", oversell),)): 5.0,
        ("kinitiras_policy_patched_total", (("policy", label_cm),)): 1.0,
        ("kinitiras_policy_rejected_total", (("action", "Deny"), ("policy", protect))): 1.0,
        ("kinitiras_policy_rejected_total", (("action", "Audit"), ("policy", audit))): 1.0,
        ("kinitiras_policy_rejected_total", (("action", "Warn"), ("policy", audit))): 1.0,
        ("kinitiras_policy_matched_total", (("policy", audit),)): 1.0,
        ("kinitiras_webhook_certificate_expiration_timestamp_seconds", ()):
            authority.not_after(SERVING.cert).timestamp(),
        ("kinitiras_policy_errors_total", (("outcome", "ignored"), ("policy", ignore))): 1.0,
        ("kinitiras_policy_errors_total", (("outcome", "denied"), ("policy", fail))): 1.0,
        ("kinitiras_policy_errors_total", (("outcome", "ignored"), ("policy", "ClusterValidatePolicy cm-check"))): 1.0,
        ("kinitiras_policy_matched_total", (("policy", "ClusterValidatePolicy cm-check"),)): 1.0,
        ("kinitiras_policy_evaluation_seconds_count", (("policy", oversell),)): 5.0,
        # The second Deployment, the same as the first, is answered from the memory of mutations
        # (no rule runs), and so is the third, which comes in the API server's layout; the renamed
        # one is evaluated again, but its oversell program reads the same parts as before, so that
        # program's result is looked up. The fourth is the third but for its uid: its answer is
        # the third's, the review not even decoded.
        ("kinitiras_mutation_results_looked_up_total", ()): 2.0,
        ("kinitiras_mutation_answers_looked_up_total", ()): 1.0,
        ("kinitiras_mutation_answers_made_total", ()): 1.0,
        ("kinitiras_cel_results_looked_up_total", ()): 1.0,
        ("kinitiras_policy_evaluation_seconds_count", (("policy", label_cm),)): 1.0,
        ("kinitiras_policy_evaluation_seconds_count", (("policy", protect),)): 1.0,
        ("kinitiras_informer_synced", (("kind", "ClusterOverridePolicy"),)): 1.0,
        ("kinitiras_informer_synced", (("kind", "OverridePolicy"),)): 0.0,
        ("kinitiras_policies", (("kind", "ClusterOverridePolicy"),)): 3.0,
        ("kinitiras_policies", (("kind", "OverridePolicy"),)): 1.0,
        ("kinitiras_scan_objects_scanned_total", ()): 1.0,
        ("kinitiras_scan_queued_objects", ()): 0.0,
        ("kinitiras_scan_watched_objects", ()): 1.0,
        ("kinitiras_scan_leading", ()): 1.0,
        ("kinitiras_scan_period_seconds", ()): 3600.0,
        ("kinitiras_scan_results", (("result", "fail"),)): 1.0,
        ("kinitiras_scan_results", (("result", "warn"),)): 1.0,
        ("kinitiras_scan_results", (("result", "pass"),)): 1.0,
        ("kinitiras_scan_results", (("result", "skip"),)): 0.0,
        # cm-audit's rules 0 and 2 (Audit) fail, rule 1 (Warn only) warns: one PolicyReport.
        ("kinitiras_reports", (("kind", "PolicyReport"),)): 1.0,
        ("kinitiras_report_results", (("result", "fail"),)): 2.0,
        ("kinitiras_report_results", (("result", "warn"),)): 1.0,
        ("kinitiras_report_requests_total", (("operation", "apply"), ("outcome", "ok"))): 1.0,
        ("kinitiras_report_requests_total", (("operation", "list"), ("outcome", "ok"))): 2.0,
        ("kinitiras_report_leader", ()): 1.0,
    }
    assert {key: found.get(key) for key in expected} == expected
    assert found[("kinitiras_cel_results_evaluated_total", ())] >= 1.0
    assert found[("kinitiras_cel_results_bytes", ())] > 0
    assert found[("kinitiras_mutation_results_evaluated_total", ())] >= 1.0
    assert found[("kinitiras_mutation_results_bytes", ())] > 0
    assert found[("kinitiras_mutation_answers_bytes", ())] > 0
    assert found[("kinitiras_scan_last_full_pass_timestamp_seconds", ())] > 0
    assert found[("kinitiras_scan_pass_duration_seconds", ())] > 0
    for collection in ("young", "full"):
        assert found[("kinitiras_gc_pause_seconds_count", (("collection", collection),))] >= 1
    for name in ("kinitiras_webhook_request_duration_seconds_sum", "kinitiras_policy_evaluation_seconds_sum"):
        assert all(v > 0 for (sample, _labels), v in found.items() if sample == name)
    # Every family the registry exports is one this test moved.
    exported = {f.name for f in text_string_to_metric_families(handlers.metrics.render().decode())
                if not f.name.endswith("_created")}  # the client's creation timestamps
    moved = {name.removesuffix("_total").removesuffix("_count") for name, _labels in expected}
    moved |= {"kinitiras_report_pending"}  # back to 0 once written: the writer's tests see it move
    moved |= {"kinitiras_cel_results_evaluated", "kinitiras_cel_results_bytes", "kinitiras_mutation_results_evaluated",
              "kinitiras_mutation_results_bytes", "kinitiras_mutation_answers_bytes",
              "kinitiras_scan_last_full_pass_timestamp_seconds", "kinitiras_scan_pass_duration_seconds",
              "kinitiras_gc_pause_seconds"}
    assert exported == moved


async def test_in_flight_counts_a_request_while_it_runs(aiohttp_client: Any) -> None:
    # The owner lookup takes a second (SlowStore), so the request is in flight meanwhile.
    policy = owner_policy("Ignore")
    handlers = make_handlers([policy], SlowStore(), lookup_timeout=1.0)
    client: TestClient = await aiohttp_client(make_app(handlers))
    owned = {**SECRET, "metadata": {**SECRET["metadata"], "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "controller": True}]}}
    running = asyncio.create_task(post(client, "/mutate", review("CREATE", owned)))
    for _ in range(100):
        found = samples(await (await client.get("/metrics")).text())
        if value(found, "kinitiras_webhook_requests_in_flight", endpoint="mutate") == 1.0:
            break
        await asyncio.sleep(0.01)
    assert value(found, "kinitiras_webhook_requests_in_flight", endpoint="mutate") == 1.0
    await running
    found = samples(await (await client.get("/metrics")).text())
    assert value(found, "kinitiras_webhook_requests_in_flight", endpoint="mutate") == 0.0
