"""Issue 24's live end to end: `kinitiras-py serve` scans, writes PolicyReports, and hands both over.

Against the real API server, with a short ``--scan-period``:

* violating Pods exist, then an Audit ClusterValidatePolicy is created: their reports say ``fail``
  within one scan period; a Pod fixed by a label turns ``pass``; a deleted Pod's report goes; the
  policy deleted, every result goes (and with it the reports) within one scan period;
* two replicas share the certificate Secret's Lease (as in test_high_availability.py); the leader
  is killed with SIGKILL, the follower takes the Lease, the scan and the reports over: a Pod created
  afterwards gets its ``fail``, a fix its ``pass``, earlier reports stay right, and each object
  has exactly one report (`kubectl get policyreport -A` shows the counts).

The replica's log shows it froze its long-lived state for the garbage collector once synced, after
each informer's list, after the policy was created and after a full scan pass; its /metrics has
the collector's pauses.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Callable

import pytest

from tests.cluster.test_scan_live import pod, policy
from tests.e2e import test_high_availability
from tests.e2e.conftest import wait_for
from tests.e2e.policyreports import report_of, reports_per_object, table_row, uid_of, verdicts
from tests.e2e.test_certificates_live import Replica, Rig, insecure_context
from tests.e2e.test_high_availability import HANDOVER_LIMIT, lease_holder, start_pair, wait_for_takeover

pytestmark = pytest.mark.cluster

rig = test_high_availability.rig
"""The fixture: a test's namespaces, names and processes, removed afterwards."""
PERIOD = 10.0
"""``--scan-period`` of the replicas: every change must show in the reports within it."""
SCAN = (f"--scan-period={PERIOD:g}",)
FAIL_SKIP = {"validateRules[0]": "fail", "validateRules[1]": "skip"}
"""A violating Pod the scan found: rule 1 reads request.userInfo, which a scan has not."""


def metric(replica: Replica, line_start: str) -> float:
    """The value of the sample whose line starts with ``line_start`` in the replica's /metrics (0 without)."""
    with urllib.request.urlopen(f"https://127.0.0.1:{replica.port}/metrics", timeout=5,
                                context=insecure_context()) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


def create_pod(rig: Rig, name: str) -> str:
    """Create a Pod without an owner label in the rig's objects namespace; its uid."""
    assert wait_for(lambda: rig.cluster.kubectl("apply", "-f", "-", input=pod(name, rig.objects)).returncode == 0,
                    30), f"Pod {name} not created"
    return uid_of(rig.cluster, "pod", rig.objects, name)


def audit_policy(rig: Rig) -> str:
    """Create the Audit policy requiring an owner label on the objects namespace's Pods; its name."""
    name = f"e2e-scan-{rig.suffix}"
    rig.kubectl_ok("apply", "-f", "-", input=policy(name, rig.objects))
    return name


def within(seconds: float, check: Callable[[], object], what: str) -> None:
    """``check()`` turns true within ``seconds``, or the test fails saying ``what``."""
    started = time.monotonic()
    assert wait_for(check, seconds, 0.3), f"{what}: not within {seconds:g} s"
    print(f"{what}: {time.monotonic() - started:.1f} s")


def says(rig: Rig, uid: str, policy_name: str, expected: dict[str, str]) -> Callable[[], bool]:
    return lambda: verdicts(report_of(rig.cluster, rig.objects, uid), policy_name) == expected


def test_reports_follow_a_policy_a_fix_and_deletions(rig: Rig) -> None:
    replica = rig.start("replica-a", extra=SCAN)
    rig.wait_ready(replica)
    uids = {name: create_pod(rig, name) for name in ("bad-a", "bad-b", "bad-c")}
    name = audit_policy(rig)
    try:
        for pod_name, uid in uids.items():
            within(PERIOD, says(rig, uid, name, FAIL_SKIP), f"{pod_name} fails")
        assert table_row(rig.cluster, uids["bad-a"]) == ["0", "1", "0", "0", "1"]
        # Every collection's pause is exported (base/collector.Pauses; young ones happen all the time).
        assert metric(replica, 'kinitiras_gc_pause_seconds_count{collection="young"}') > 0

        rig.kubectl_ok("-n", rig.objects, "label", "pod", "bad-a", "owner=me")
        # The update is admitted too: admission knows the user, so rule 1's skip gives way to its pass.
        within(PERIOD, says(rig, uids["bad-a"], name, {"validateRules[0]": "pass", "validateRules[1]": "pass"}),
               "bad-a fixed passes")
        assert table_row(rig.cluster, uids["bad-a"]) == ["2", "0", "0", "0", "0"]
        assert verdicts(report_of(rig.cluster, rig.objects, uids["bad-b"]), name) == FAIL_SKIP

        rig.kubectl_ok("-n", rig.objects, "delete", "pod", "bad-c", "--wait=false")
        within(PERIOD, lambda: report_of(rig.cluster, rig.objects, uids["bad-c"]) is None,
               "deleted bad-c's report goes")
    finally:
        rig.cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
    within(PERIOD, lambda: all(report_of(rig.cluster, rig.objects, uid) is None for uid in uids.values()),
           "the policy deleted, every report goes")
    log = replica.log.read_text(errors="replace")
    assert "Traceback" not in log, replica.log_tail()
    # The process froze its long-lived state once synced, and again after a full pass (base/collector.py).
    synced, passed = log.find("gc: policies loaded, informers synced"), log.find("gc: scan pass 1:")
    assert 0 <= synced < passed, replica.log_tail()
    # The policy, created after start, was settled too (collector.Later), and each informer's list.
    assert synced < log.find("gc: policy changes:", synced), replica.log_tail()
    assert "gc: list 1 of pods:" in log, replica.log_tail()


def test_a_new_leader_takes_scan_and_reports_over_without_duplicates(rig: Rig) -> None:
    pair = start_pair(rig, fallback=True, extra=SCAN)
    holder, follower = pair.holder, pair.follower
    uids = {pod_name: create_pod(rig, pod_name) for pod_name in ("bad-a", "bad-b")}
    name = audit_policy(rig)
    try:
        for pod_name, uid in uids.items():
            within(PERIOD, says(rig, uid, name, FAIL_SKIP), f"{pod_name} fails (the first leader)")
        assert metric(holder, "kinitiras_scan_leading ") == 1 and metric(follower, "kinitiras_scan_leading ") == 0
        assert metric(holder, "kinitiras_report_leader ") == 1 and metric(follower, "kinitiras_report_leader ") == 0
        assert metric(follower, 'kinitiras_report_requests_total{operation="apply"') == 0  # followers never write

        os.kill(holder.proc.pid, signal.SIGKILL)
        holder.proc.wait(30)
        wait_for_takeover(rig, follower, HANDOVER_LIMIT)
        taken_over = time.time()
        within(PERIOD, lambda: metric(follower, "kinitiras_scan_leading ") == 1
               and metric(follower, "kinitiras_report_leader ") == 1, "the new leader scans and writes")

        uids["bad-c"] = create_pod(rig, "bad-c")
        # Created with the policy in force: admission (rule 1 passes) and the scan (rule 0 fails).
        within(PERIOD, says(rig, uids["bad-c"], name, {"validateRules[0]": "fail", "validateRules[1]": "pass"}),
               "bad-c, created after the kill, fails")
        rig.kubectl_ok("-n", rig.objects, "label", "pod", "bad-a", "owner=me")
        within(PERIOD, says(rig, uids["bad-a"], name, {"validateRules[0]": "pass", "validateRules[1]": "pass"}),
               "bad-a fixed after the kill passes")
        assert metric(follower, 'kinitiras_report_requests_total{operation="apply",outcome="ok"}') > 0
        # The new leader's first full pass has gone over every Pod: what the old leader wrote stays right.
        within(PERIOD, lambda: metric(follower, "kinitiras_scan_last_full_pass_timestamp_seconds ") >= taken_over,
               "the new leader's first full pass")
        assert verdicts(report_of(rig.cluster, rig.objects, uids["bad-b"]), name) == FAIL_SKIP

        per_object = reports_per_object(rig.cluster, rig.objects, "Pod")
        assert per_object == {uid: 1 for uid in uids.values()}, json.dumps(per_object)
        table = {pod_name: table_row(rig.cluster, uid) for pod_name, uid in uids.items()}
        assert table == {"bad-a": ["2", "0", "0", "0", "0"], "bad-b": ["0", "1", "0", "0", "1"],
                         "bad-c": ["1", "1", "0", "0", "0"]}, table
    finally:
        rig.cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
    within(PERIOD, lambda: sum(reports_per_object(rig.cluster, rig.objects, "Pod").values()) == 0,
           "the policy deleted, the new leader removes every report")
    assert metric(follower, 'kinitiras_report_requests_total{operation="delete"') >= len(uids)
    assert "Traceback" not in follower.log.read_text(errors="replace"), follower.log_tail()


def test_a_policy_deleted_while_no_replica_leads_loses_its_reports_at_the_takeover(rig: Rig) -> None:
    pair = start_pair(rig, fallback=True, extra=SCAN)
    holder, follower = pair.holder, pair.follower
    uid = create_pod(rig, "bad-a")
    name = audit_policy(rig)
    try:
        within(PERIOD, says(rig, uid, name, FAIL_SKIP), "bad-a fails (the first leader)")
        os.kill(holder.proc.pid, signal.SIGKILL)
        holder.proc.wait(30)
        # Deleted before the follower leads: it never held the Pod's results, and its scan no longer
        # watches Pods; the report the dead leader wrote is found on taking over, and held by nobody.
        rig.kubectl_ok("delete", "cvp", name)
        assert lease_holder(rig).startswith(f"{holder.name}_"), "the follower led before the policy was deleted"
        wait_for_takeover(rig, follower, HANDOVER_LIMIT)
    finally:
        rig.cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
    # Run alone, only the new leader's sweep can remove it. In a whole session the session's webhook
    # (it scans every policy too, and writes the same report names) may remove it first on seeing the
    # policy deleted, so the sweep itself is pinned by tests/unit/reports and tests/unit/scan.
    within(PERIOD, lambda: report_of(rig.cluster, rig.objects, uid) is None, "the new leader removes the stale report")
    assert "Traceback" not in follower.log.read_text(errors="replace"), follower.log_tail()
