"""With PolicyReports off (`serve --no-policy-reports`, or no CRD), the scan's results are logged."""

from __future__ import annotations

import logging

import pytest

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.scan.sink import LoggingSink

POD = ResourceRef("v1", "Pod", "team-a", "web-0")
OWNER = PolicyId("ClusterValidatePolicy", None, "owner")


async def test_each_object_is_one_line_naming_its_failing_rules(caplog: pytest.LogCaptureFixture) -> None:
    sink = LoggingSink()
    caplog.set_level(logging.INFO, logger="kinitiras_py.scan.sink")
    await sink.publish(POD, "u1", [RuleResult(OWNER, 0, "validate", "fail", "an owner label is required"),
                                   RuleResult(OWNER, 1, "validate", "skip", "reads request.userInfo"),
                                   RuleResult(OWNER, 2, "validate", "pass", "")])
    await sink.forget_policy(OWNER)
    await sink.forget_resource(POD, "u1")
    (published, policy, deleted) = caplog.records
    assert published.getMessage() == "scan results for Pod team-a/web-0"
    assert published.__dict__["results"] == {"fail": 1, "skip": 1, "pass": 1}
    assert published.__dict__["findings"] == [f"{OWNER} rule 0: fail: an owner label is required"]
    assert "dropped: the policy was deleted" in policy.getMessage()
    assert deleted.getMessage() == "scan results for Pod team-a/web-0 dropped: the object was deleted"
