"""`kinitiras-py serve` writes admission-time Audit and Warn findings into PolicyReports (the CRDs
installed, as `dev up` installs them: `--policy-reports` is on by default), and drops a deleted
policy's results."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster


def _policy(name: str, namespace: str) -> str:
    return json.dumps({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy", "metadata": {"name": name},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace}],
                 "validateRules": [
                     {"validationActions": ["Audit"], "cel": "has(object.metadata.labels) && "
                                                             "'team' in object.metadata.labels",
                      "message": "a team label is required"},
                     {"validationActions": ["Warn"], "cel": "object.metadata.name.size() < 8",
                      "message": "a short name is better"}]}})


def _report(cluster: Cluster, namespace: str, uid: str) -> dict[str, Any] | None:
    proc = cluster.kubectl("-n", namespace, "get", "policyreport", uid, "-o", "json")
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def _uid(cluster: Cluster, namespace: str, name: str) -> str:
    return str(json.loads(kubectl_ok(cluster, "-n", namespace, "get", "configmap", name, "-o", "json"))
               ["metadata"]["uid"])


def test_audit_and_warn_findings_land_in_the_objects_report(cluster: Cluster, webhook: Webhook,
                                                            namespace: str) -> None:
    policy = f"e2e-report-{uuid.uuid4().hex[:8]}"
    try:
        apply_policy(cluster, _policy(policy, namespace), "cvp", policy, 2)
        created = cluster.kubectl("-n", namespace, "create", "configmap", "long-named", "--from-literal=k=v")
        assert created.returncode == 0, created.stderr  # Audit and Warn admit it
        assert "a short name is better" in created.stderr  # the warning reached kubectl
        uid = _uid(cluster, namespace, "long-named")
        report = wait_for(lambda: _report(cluster, namespace, uid), 30)
        assert report, webhook.log_text()[-3000:]
        assert report["summary"] == {"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0}
        assert {(one["policy"], one["rule"], one["result"], one["message"]) for one in report["results"]} == {
            (policy, "validateRules[0]", "fail", "a team label is required"),
            (policy, "validateRules[1]", "warn", "a short name is better")}
        assert report["scope"]["name"] == "long-named" and report["results"][0]["source"] == "kinitiras-py"
        table = kubectl_ok(cluster, "get", "policyreport", "-A")
        assert [line.split()[2:7] for line in table.splitlines() if uid in line] == [["0", "1", "1", "0", "0"]]

        # Fixed by an update: its results turn pass.
        kubectl_ok(cluster, "-n", namespace, "label", "configmap", "long-named", "team=a")
        fixed = wait_for(lambda: (r := _report(cluster, namespace, uid)) and r["summary"]["fail"] == 0 and r, 30)
        assert fixed, (_report(cluster, namespace, uid), webhook.log_text()[-4000:])
        assert fixed["summary"] == {"pass": 1, "fail": 0, "warn": 1, "error": 0, "skip": 0}
    finally:
        cluster.kubectl("delete", "cvp", policy, "--ignore-not-found")
    # The policy deleted: its results go, and with nothing left, the report.
    assert wait_for(lambda: _report(cluster, namespace, uid) is None, 30), _report(cluster, namespace, uid)
