"""`kinitiras-py serve` scans existing objects: a Pod created before an Audit policy gets its
finding in its PolicyReport (the CRDs are installed, so `serve` writes reports by default), the
scan's and the reports' metrics are exported, and a fixed Pod's result turns pass."""

from __future__ import annotations

import ssl
import urllib.request
import uuid

import pytest

from tests.cluster.test_scan_live import pod, policy
from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, kubectl_ok, wait_for
from tests.e2e.policyreports import report_of, uid_of, verdicts

pytestmark = pytest.mark.cluster


def test_serve_scans_pods_that_exist_before_an_audit_policy(cluster: Cluster, webhook: Webhook,
                                                             namespace: str) -> None:
    name = f"scan-{uuid.uuid4().hex[:6]}"
    assert wait_for(lambda: cluster.kubectl("apply", "-f", "-", input=pod("lonely", namespace)).returncode == 0, 30)
    uid = uid_of(cluster, "pod", namespace, "lonely")
    try:
        apply_policy(cluster, policy(name, namespace), "cvp", name, 2)
        # Rule 0 fails on the Pod as it is; rule 1 reads request.userInfo, which a scan has not.
        found = {"validateRules[0]": "fail", "validateRules[1]": "skip"}
        report = wait_for(lambda: (r := report_of(cluster, namespace, uid)) and verdicts(r, name) == found and r, 30)
        assert report, (report_of(cluster, namespace, uid), webhook.log_text()[-3000:])
        messages = {one["rule"]: one["message"] for one in report["results"] if one["policy"] == name}
        assert messages["validateRules[0]"] == "every Pod needs an owner label"
        assert "reads request.userInfo" in messages["validateRules[1]"]
        assert report["scope"] == {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": "lonely",
                                   "uid": uid}
        context = ssl.create_default_context(cafile=str(webhook.ca))
        with urllib.request.urlopen(f"https://127.0.0.1:{webhook.port}/metrics", context=context) as answer:
            metrics = answer.read().decode()
        assert "kinitiras_scan_leading 1.0" in metrics
        assert 'kinitiras_scan_results{result="fail"}' in metrics
        assert "kinitiras_report_leader 1.0" in metrics
        assert 'kinitiras_report_requests_total{operation="apply",outcome="ok"}' in metrics

        kubectl_ok(cluster, "-n", namespace, "label", "pod", "lonely", "owner=me")
        # The update is admitted too: admission knows the user, so rule 1's skip gives way to its pass.
        fixed = {"validateRules[0]": "pass", "validateRules[1]": "pass"}
        assert wait_for(lambda: verdicts(report_of(cluster, namespace, uid), name) == fixed, 30), \
            (report_of(cluster, namespace, uid), webhook.log_text()[-3000:])
    finally:
        cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
