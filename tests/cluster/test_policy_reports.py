"""The report writer against the real API server: the CRDs installed as `dev up` installs them,
reports created, updated, split and shrunk, taken over by a new leader without duplicates,
forgotten, collected with their object, and `kubectl get policyreport -A` showing the counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports import build
from kinitiras_py.reports.writer import ReportWriter, uid_lookup
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

A = PolicyId("ClusterValidatePolicy", None, "require-team")
B = PolicyId("ValidatePolicy", "team-a", "no-latest")


def r(policy: PolicyId, rule: int, outcome: str, message: str | None = None) -> RuleResult:
    return RuleResult(policy, rule, "validate", outcome, f"{policy.name} {outcome}" if message is None else message)


def writer(api: Any, leading: Callable[[], bool] = lambda: True) -> ReportWriter:
    return ReportWriter(api, leading, writes_per_second=50, poll=0.05,
                        uid_lookup=uid_lookup(api, Discovery(api).resolve))


async def configmap(cluster: Cluster, namespace: str, name: str) -> tuple[ResourceRef, str]:
    await cluster.kubectl_ok("-n", namespace, "create", "configmap", name, "--from-literal=k=v")
    obj = json.loads(await cluster.kubectl_ok("-n", namespace, "get", "configmap", name, "-o", "json"))
    return ResourceRef("v1", "ConfigMap", namespace, name), obj["metadata"]["uid"]


async def reports(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    out = await cluster.kubectl_ok("-n", namespace, "get", "policyreports", "-o", "json")
    return {item["metadata"]["name"]: item for item in json.loads(out)["items"]}


async def until(check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.3)


async def run_until_idle(w: ReportWriter) -> None:
    w.start()
    await asyncio.sleep(0.1)
    await w.idle(30)


async def test_create_update_split_take_over_and_forget(cluster: Cluster, api: Any, namespace: str) -> None:
    pod, uid = await configmap(cluster, namespace, "web")
    w = writer(api)
    try:
        await w.publish(pod, uid, [r(A, 0, "fail", "label team is missing"), r(B, 0, "pass"), r(B, 1, "warn")])
        await run_until_idle(w)
        found = await reports(cluster, namespace)
        assert list(found) == [uid]
        report = found[uid]
        assert report["summary"] == {"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0}
        assert report["scope"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": "web",
                                   "uid": uid}
        assert report["metadata"]["ownerReferences"][0]["uid"] == uid
        assert report["results"][0]["message"] == "label team is missing"
        table = await cluster.kubectl_ok("get", "policyreport", "-A")
        header, *rows = table.splitlines()
        assert header.split() == ["NAMESPACE", "NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"]
        assert [row.split()[:7] for row in rows if row.split()[1] == uid] == [
            [namespace, uid, "1", "1", "1", "0", "0"]]

        # Fixed: the same report, updated in place (passes say nothing: no message).
        await w.publish(pod, uid, [r(A, 0, "pass", ""), r(B, 0, "pass", ""), r(B, 1, "pass", "")])
        await w.idle(30)
        found = await reports(cluster, namespace)
        assert list(found) == [uid] and found[uid]["summary"]["pass"] == 3 and found[uid]["summary"]["fail"] == 0

        # Many results: parts; fewer again: the extra parts go.
        many = [r(PolicyId("ClusterValidatePolicy", None, f"p{i:03d}"), 0, "fail")
                for i in range(build.MAX_RESULTS + 3)]
        await w.publish(pod, uid, many)
        await w.idle(30)
        found = await reports(cluster, namespace)
        assert sorted(found) == [uid, f"{uid}-1"]
        assert sum(one["summary"]["fail"] for one in found.values()) == build.MAX_RESULTS + 3
    finally:
        await w.stop()

    # A new leader holding the same results writes nothing again and duplicates nothing; it
    # shrinks the reports when the results shrink.
    new = writer(api)
    try:
        await new.publish(pod, uid, many)
        await run_until_idle(new)
        assert new.stats.requests.get(("apply", "ok"), 0) == 0
        assert sorted(await reports(cluster, namespace)) == [uid, f"{uid}-1"]
        await new.publish(pod, uid, [r(A, 0, "fail"), r(B, 0, "pass")])
        await new.idle(30)
        assert sorted(await reports(cluster, namespace)) == [uid]
        await new.forget_policy(A)
        await new.idle(30)
        assert (await reports(cluster, namespace))[uid]["summary"] == {"pass": 1, "fail": 0, "warn": 0, "error": 0,
                                                                       "skip": 0}
        await new.forget_resource(pod, uid)
        await new.idle(30)
        assert await reports(cluster, namespace) == {}
    finally:
        await new.stop()


async def test_only_the_leader_writes(cluster: Cluster, api: Any, namespace: str) -> None:
    pod, uid = await configmap(cluster, namespace, "quiet")
    leading = False
    w = writer(api, lambda: leading)
    w.start()
    try:
        await w.publish(pod, uid, [r(A, 0, "fail")])
        await asyncio.sleep(1.0)
        assert await reports(cluster, namespace) == {}
        leading = True
        await until(lambda: _has(cluster, namespace, uid), 30)
    finally:
        await w.stop()


async def _has(cluster: Cluster, namespace: str, name: str) -> bool:
    return name in await reports(cluster, namespace)


async def test_admission_findings_of_a_created_object_find_its_uid_and_go_with_it(cluster: Cluster, api: Any,
                                                                                  namespace: str) -> None:
    w = writer(api)
    try:
        # As on CREATE: the finding arrives before the API server gave the object a uid.
        await w.add_admission_findings(ResourceRef("v1", "ConfigMap", namespace, "fresh"), "",
                                       [r(A, 0, "fail", "audit finding")])
        _, uid = await configmap(cluster, namespace, "fresh")
        await run_until_idle(w)
        found = await reports(cluster, namespace)
        assert list(found) == [uid]
        assert found[uid]["results"][0]["message"] == "audit finding"
        # A cluster-scoped object: a ClusterPolicyReport.
        ns = json.loads(await cluster.kubectl_ok("get", "namespace", namespace, "-o", "json"))
        ns_uid = ns["metadata"]["uid"]
        await w.publish(ResourceRef("v1", "Namespace", "", namespace), ns_uid, [r(A, 0, "pass")])
        await w.idle(30)
        table = await cluster.kubectl_ok("get", "clusterpolicyreport", ns_uid)
        assert table.splitlines()[0].split() == ["NAME", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"]
        assert table.splitlines()[1].split()[:3] == [ns_uid, "1", "0"]
        await w.forget_resource(ResourceRef("v1", "Namespace", "", namespace), ns_uid)
        await w.idle(30)
        assert cluster.kubectl("get", "clusterpolicyreport", ns_uid).returncode != 0
    finally:
        await w.stop()
    # The object deleted: the garbage collector removes its report (it is the report's owner).
    await cluster.kubectl_ok("-n", namespace, "delete", "configmap", "fresh")
    await until(lambda: _gone(cluster, namespace, uid), 60)


async def _gone(cluster: Cluster, namespace: str, name: str) -> bool:
    return name not in await reports(cluster, namespace)
