"""Reading PolicyReports back through kubectl, for the live tests of what `serve` writes."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tests.conftest import Cluster
from tests.e2e.conftest import kubectl_ok


def uid_of(cluster: Cluster, resource: str, namespace: str, name: str) -> str:
    """The uid of one object."""
    return str(json.loads(kubectl_ok(cluster, "-n", namespace, "get", resource, name, "-o", "json"))
               ["metadata"]["uid"])


def report_of(cluster: Cluster, namespace: str, uid: str) -> dict[str, Any] | None:
    """The PolicyReport of the object ``uid`` (named after it), or None while there is none."""
    proc = cluster.kubectl("-n", namespace, "get", "policyreport", uid, "-o", "json")
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def verdicts(report: dict[str, Any] | None, policy: str) -> dict[str, str]:
    """``{rule: result}`` of ``policy``'s results in ``report`` (empty without a report)."""
    return {one["rule"]: one["result"] for one in (report or {}).get("results") or [] if one["policy"] == policy}


def reports_per_object(cluster: Cluster, namespace: str, kind: str) -> Counter[str]:
    """How many PolicyReports of ``namespace`` are about each object of ``kind``, by the object's uid."""
    items = json.loads(kubectl_ok(cluster, "-n", namespace, "get", "policyreports", "-o", "json"))["items"]
    return Counter(str(item["scope"]["uid"]) for item in items if item["scope"]["kind"] == kind)


def table_row(cluster: Cluster, uid: str) -> list[str]:
    """PASS, FAIL, WARN, ERROR and SKIP of the report named ``uid`` in `kubectl get policyreport -A`,
    checking the header names those columns."""
    table = kubectl_ok(cluster, "get", "policyreport", "-A").splitlines()
    assert table and table[0].split()[2:7] == ["PASS", "FAIL", "WARN", "ERROR", "SKIP"], table[:1]
    rows = [line.split()[2:7] for line in table[1:] if line.split()[1:2] == [uid]]
    assert len(rows) == 1, table
    return rows[0]
