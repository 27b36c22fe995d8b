"""The PolicyReport builder: shape, summary counts, splitting, cluster vs namespaced objects."""

from __future__ import annotations

import orjson
import pytest

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports import build
from kinitiras_py.reports.build import Stamped, build_reports
from tests.unit.api.test_crds import BY_KIND, validate

POD = ResourceRef("v1", "Pod", "team-a", "web")
NODE = ResourceRef("v1", "Node", "", "node-1")
UID = "0b6f3c1e-5a4d-4c1e-9a53-7d2f3f6c9a10"
CVP = PolicyId("ClusterValidatePolicy", None, "require-team")
VP = PolicyId("ValidatePolicy", "team-a", "no-latest")


def result(policy: PolicyId, rule: int, outcome: str, message: str = "", kind: str = "validate") -> RuleResult:
    return RuleResult(policy, rule, kind, outcome, message)


def test_one_pod_gets_one_policy_report_in_its_namespace_owned_by_it() -> None:
    results = [Stamped(result(VP, 1, "warn", "image uses latest"), 1700000000.25),
               Stamped(result(CVP, 0, "fail", "no team label"), 1700000001.0),
               Stamped(result(VP, 0, "pass"), 1700000002.5)]
    (report,) = build_reports(POD, UID, results)
    assert report["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and report["kind"] == "PolicyReport"
    meta = report["metadata"]
    assert (meta["name"], meta["namespace"]) == (UID, "team-a")
    assert meta["labels"] == {"app.kubernetes.io/managed-by": "kinitiras-py",
                              "kinitiras.kcloudlabs.io/resource-uid": UID, "kinitiras.kcloudlabs.io/report-part": "0"}
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": UID}]
    assert report["scope"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "web", "uid": UID}
    assert report["summary"] == {"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    # Ordered by policy kind, namespace, name and rule, whatever order they came in.
    assert [(r["policy"], r["rule"], r["result"]) for r in report["results"]] == [
        ("require-team", "validateRules[0]", "fail"), ("team-a/no-latest", "validateRules[0]", "pass"),
        ("team-a/no-latest", "validateRules[1]", "warn")]
    first = report["results"][0]
    assert first == {"source": "kinitiras-py", "policy": "require-team", "rule": "validateRules[0]",
                     "result": "fail", "scored": True, "message": "no team label",
                     "timestamp": {"seconds": 1700000001, "nanos": 0},
                     "resources": [report["scope"]],
                     "properties": {"policyKind": "ClusterValidatePolicy", "ruleType": "validate"}}
    assert report["results"][2]["timestamp"] == {"seconds": 1700000000, "nanos": 250000000}
    assert "message" not in report["results"][1]  # an empty one is left out (server-side apply refuses it)
    assert validate(BY_KIND["PolicyReport"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"], report) == []


def test_a_cluster_scoped_object_gets_a_cluster_policy_report() -> None:
    (report,) = build_reports(NODE, UID, [Stamped(result(CVP, 0, "error", "lookup failed"), 5.0)])
    assert report["kind"] == "ClusterPolicyReport"
    assert "namespace" not in report["metadata"]
    assert report["scope"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": UID}
    assert report["summary"] == {"pass": 0, "fail": 0, "warn": 0, "error": 1, "skip": 0}
    assert validate(BY_KIND["ClusterPolicyReport"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
                    report) == []


def test_no_results_no_report_and_a_uid_or_key_is_needed() -> None:
    assert build_reports(POD, UID, []) == []
    with pytest.raises(ValueError, match="uid"):
        build_reports(POD, "", [Stamped(result(CVP, 0, "pass"), 1.0)])
    (offline,) = build_reports(POD, "", [Stamped(result(CVP, 0, "pass"), 1.0)], key=build.offline_key(POD))
    assert offline["metadata"]["name"].startswith("kinitiras-") and "ownerReferences" not in offline["metadata"]


def test_override_rules_are_named_for_their_list() -> None:
    (report,) = build_reports(POD, UID, [Stamped(result(CVP, 3, "pass", kind="override"), 1.0)])
    assert report["results"][0]["rule"] == "overrideRules[3]"
    assert report["results"][0]["properties"]["ruleType"] == "override"


def test_many_results_are_split_into_parts_each_with_its_summary() -> None:
    outcomes = ("pass", "fail", "warn", "error", "skip")
    results = [Stamped(result(PolicyId("ClusterValidatePolicy", None, f"p{i:04d}"), 0, outcomes[i % 5]), 1.0)
               for i in range(2 * build.MAX_RESULTS + 7)]
    reports = build_reports(POD, UID, results)
    assert [r["metadata"]["name"] for r in reports] == [UID, f"{UID}-1", f"{UID}-2"]
    assert [len(r["results"]) for r in reports] == [build.MAX_RESULTS, build.MAX_RESULTS, 7]
    assert [r["metadata"]["labels"]["kinitiras.kcloudlabs.io/report-part"] for r in reports] == ["0", "1", "2"]
    assert "annotations" in reports[0]["metadata"] and "annotations" not in reports[1]["metadata"]
    for report in reports:
        assert report["summary"] == build.summary(report["results"])
    total = {k: sum(r["summary"][k] for r in reports) for k in outcomes}
    assert total == {k: sum(1 for s in results if s.result.result == k) for k in outcomes}
    names = [one["policy"] for r in reports for one in r["results"]]
    assert names == sorted(names) and len(set(names)) == len(results)  # nothing lost, nothing twice


def test_a_huge_result_set_never_makes_a_report_too_large() -> None:
    """10,000 results with the longest names and messages (4-byte characters): every part stays
    well under etcd's 1.5 MiB limit."""
    long_name = "n" * 253
    message = "\U0001F4A5" * 50_000
    results = [Stamped(result(PolicyId("ValidatePolicy", "x" * 63, f"{long_name[:-5]}{i:05d}"), i % 7, "fail",
                              message), 1.0) for i in range(10_000)]
    resource = ResourceRef("example.com/v1", "K" * 63, "x" * 63, long_name)
    reports = build_reports(resource, UID, results)
    assert len(reports) == -(-10_000 // build.MAX_RESULTS)
    sizes = [len(orjson.dumps(r)) for r in reports]
    assert max(sizes) < 1024 * 1024, max(sizes)
    assert all(len(one["message"]) <= build.MESSAGE_CHARS for r in reports for one in r["results"])
    assert reports[0]["results"][0]["message"].endswith("…")


def test_the_digest_ignores_timestamps_and_order_but_not_results() -> None:
    a = [Stamped(result(CVP, 0, "fail", "x"), 1.0), Stamped(result(VP, 0, "pass"), 2.0)]
    b = [Stamped(result(VP, 0, "pass"), 9.0), Stamped(result(CVP, 0, "fail", "x"), 8.0)]
    c = [Stamped(result(CVP, 0, "pass", "x"), 1.0), Stamped(result(VP, 0, "pass"), 2.0)]
    assert build.digest(a) == build.digest(b) != build.digest(c)
