"""The report writer against a fake API server that keeps what is applied (the real one: tests/cluster).

Leader only, coalesced, rate-limited, idempotent on takeover, parts deleted when no longer needed,
objects without a uid looked up, passing errors tried again and lasting ones dropped.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base.ratelimit import TokenBucket
from kinitiras_py.cluster.client import ApiException
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports import build
from kinitiras_py.reports.writer import ReportWriter
from tests.unit.cluster.conftest import eventually

POD = ResourceRef("v1", "Pod", "ns", "web")
NODE = ResourceRef("v1", "Node", "", "n1")
A = PolicyId("ClusterValidatePolicy", None, "a")
GROUP = "/apis/wgpolicyk8s.io/v1alpha2"


def r(policy: PolicyId, rule: int, outcome: str) -> RuleResult:
    return RuleResult(policy, rule, "validate", outcome, f"rule {rule} {outcome}")


class FakeServer:
    """Keeps reports applied by path; lists them by collection; can fail the next requests."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[str, str]] = []
        self.failures: list[ApiException] = []

    async def request(self, method: str, path: str, *, query: Any = (), body: Any = None,
                      content_type: str = "application/json", timeout: float | None = None) -> dict[str, Any]:
        self.log.append((method, path))
        if self.failures:
            raise self.failures.pop(0)
        if method == "PATCH":
            assert content_type == "application/apply-patch+yaml"
            assert dict(query) == {"fieldManager": "kinitiras-py-reports", "force": "true"}
            self.objects[path] = copy.deepcopy(body)
            return body
        if method == "DELETE":
            if self.objects.pop(path, None) is None:
                raise ApiException(404, "Not Found")
            return {}
        if method == "GET" and path in (f"{GROUP}/policyreports", f"{GROUP}/clusterpolicyreports"):
            plural = path.rsplit("/", 1)[1]
            return {"items": [copy.deepcopy(o) for p, o in self.objects.items() if p.endswith(
                f"/{plural}/{o['metadata']['name']}")]}
        raise ApiException(404, "no route")

    def names(self) -> list[str]:
        return sorted(path.rsplit("/", 1)[1] for path in self.objects)

    def applies(self) -> int:
        return sum(1 for method, _ in self.log if method == "PATCH")


class Lead:
    def __init__(self, leading: bool = True) -> None:
        self.leading = leading

    def __call__(self) -> bool:
        return self.leading


def writer(server: FakeServer, lead: Lead, **kwargs: Any) -> ReportWriter:
    return ReportWriter(server, lead, poll=0.02, **{"writes_per_second": 1000.0, **kwargs})


async def test_only_the_leader_writes_and_the_latest_state_wins() -> None:
    server, lead = FakeServer(), Lead(False)
    w = writer(server, lead)
    w.start()
    try:
        for outcome in ("fail", "warn", "pass"):
            await w.publish(POD, "u1", [r(A, 0, outcome)])
        await asyncio.sleep(0.1)
        assert server.log == [] and w.stats.pending == 1
        lead.leading = True
        await asyncio.sleep(0.05)
        await w.idle()
        assert server.applies() == 1  # three publications, one write: the last
        (report,) = server.objects.values()
        assert report["results"][0]["result"] == "pass"
        assert f"{GROUP}/namespaces/ns/policyreports/u1" in server.objects
        assert w.stats.reports == {"PolicyReport": 1, "ClusterPolicyReport": 0}
        assert w.stats.results["pass"] == 1 and w.stats.leading
        await w.publish(POD, "u1", [r(A, 0, "pass")])  # the same again: nothing to write
        await w.idle()
        assert server.applies() == 1
        await w.publish(NODE, "u2", [r(A, 0, "fail")])
        await w.idle()
        assert f"{GROUP}/clusterpolicyreports/u2" in server.objects
        await w.publish(POD, "u1", [])
        await w.forget_resource(NODE, "u2")
        await w.idle()
        assert server.objects == {}
        assert w.stats.reports == {"PolicyReport": 0, "ClusterPolicyReport": 0}
        assert w.stats.results == dict.fromkeys(("pass", "fail", "warn", "error", "skip"), 0)
    finally:
        await w.stop()


async def test_a_new_leader_overwrites_instead_of_duplicating_and_removes_parts_no_longer_needed() -> None:
    server = FakeServer()
    many = [r(PolicyId("ClusterValidatePolicy", None, f"p{i:03d}"), 0, "fail")
            for i in range(2 * build.MAX_RESULTS + 1)]
    old = writer(server, Lead())
    old.start()
    await old.publish(POD, "u1", many)
    await old.publish(NODE, "u2", [r(A, 0, "pass")])
    await old.idle()
    await old.stop()
    assert server.names() == ["u1", "u1-1", "u1-2", "u2"]
    before = server.applies()
    new = writer(server, Lead())
    await new.publish(NODE, "u2", [r(A, 0, "pass")])  # says what the old leader wrote: not written again
    await new.publish(POD, "u1", [r(A, 0, "fail")])  # now fits in one part
    new.start()
    try:
        await asyncio.sleep(0.05)
        await new.idle()
        assert server.names() == ["u1", "u2"]
        assert server.applies() == before + 1
        assert new.stats.reports == {"PolicyReport": 1, "ClusterPolicyReport": 1}
        assert {op for op, _ in new.stats.requests} == {"list", "apply", "delete"}
    finally:
        await new.stop()


async def test_after_the_first_scan_a_new_leader_deletes_the_reports_nobody_holds() -> None:
    server = FakeServer()
    old = writer(server, Lead())
    old.start()
    await old.publish(POD, "u1", [r(A, 0, "fail")])
    await old.publish(NODE, "u2", [r(A, 0, "pass")])
    await old.idle()
    await old.stop()
    # While no replica led, the policy of u1's result went: the new leader's scan publishes u2 only.
    lead = Lead(False)
    new = writer(server, lead)
    new.start()
    try:
        await new.publish(NODE, "u2", [r(A, 0, "pass")])
        await new.sweep()  # a follower's: nothing to do
        await asyncio.sleep(0.05)
        assert server.names() == ["u1", "u2"]
        lead.leading = True
        await new.sweep()  # the scan's first pass ended before this writer listed what exists
        await eventually(lambda: server.names() == ["u2"])
        await new.idle()
        assert new.stats.reports == {"PolicyReport": 0, "ClusterPolicyReport": 1}
        await new.publish(POD, "u3", [r(A, 0, "fail")])
        await new.idle()
        await new.sweep()  # now while leading: what it holds stays
        await new.idle()
        assert server.names() == ["u2", "u3"]
    finally:
        await new.stop()


async def test_an_object_without_a_uid_is_looked_up_and_dropped_when_it_never_exists() -> None:
    server = FakeServer()
    answers = {POD: [None, None, "u9"], NODE: [None] * 10}

    async def lookup(resource: ResourceRef) -> str | None:
        return answers[resource].pop(0)

    w = writer(server, Lead(), uid_lookup=lookup, uid_wait=0.01)
    w.start()
    try:
        await w.add_admission_findings(POD, "", [r(A, 0, "warn")])
        await w.add_admission_findings(NODE, "", [r(A, 0, "warn")])
        await asyncio.sleep(0.05)
        await w.idle(5)
        assert server.names() == ["u9"]
        assert len(w.ledger) == 1  # the Node never came to exist: its findings are gone
    finally:
        await w.stop()


async def test_passing_errors_are_tried_again_lasting_ones_dropped() -> None:
    server = FakeServer()
    w = writer(server, Lead(), retry_delay=0.01)
    w.start()
    try:
        await eventually(lambda: w.stats.leading)
        server.failures = [ApiException(500, "busy"), ApiException(429, "slow down")]
        await w.publish(POD, "u1", [r(A, 0, "fail")])
        await asyncio.sleep(0.05)
        await w.idle(10)
        assert server.names() == ["u1"]
        assert w.stats.requests[("apply", "error")] == 2 and w.stats.requests[("apply", "ok")] == 1
        server.failures = [ApiException(422, "Unprocessable")]
        await w.publish(NODE, "u2", [r(A, 0, "fail")])
        await w.idle()
        assert server.names() == ["u1"] and w.stats.pending == 0
    finally:
        await w.stop()


async def test_writes_are_rate_limited() -> None:
    server = FakeServer()
    w = writer(server, Lead(), writes_per_second=40.0)
    for i in range(80):
        await w.publish(POD, f"u{i}", [r(A, 0, "pass")])
    started = time.monotonic()
    w.start()
    try:
        await w.idle(10)
        elapsed = time.monotonic() - started
    finally:
        await w.stop()
    # 2 lists and 80 applies; a burst of 40, then 40 per second.
    assert server.applies() == 80
    assert 0.9 <= elapsed < 5, elapsed


async def test_the_token_bucket_refuses_a_rate_of_zero() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0)
