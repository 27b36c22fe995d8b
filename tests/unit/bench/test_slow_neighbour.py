"""The e2e benchmark's slow neighbour (a JavaScript rule running to its time limit on one Pod in
ten) holds up no other Pod's admission: the script runs off the event loop, and a cheap request
arriving meanwhile is answered while it still runs."""

from __future__ import annotations

import asyncio

from kinitiras_py.admission.pipeline import Request
from kinitiras_py.bench import runner, workload


def _request(index: int) -> Request:
    pod = workload.distinct_server_pod(index, "pod")
    return Request("CREATE", pod, namespace=pod["metadata"]["namespace"])


async def test_a_cheap_request_is_answered_while_the_slow_rule_runs() -> None:
    # A limit of 1 s of CPU: far longer than a cheap admission takes, however busy the machine.
    policies = [workload.matching_policy(0), workload.slow_policy(workload.NAMESPACE, timeout_ms=1000)]
    pipeline, _ = runner.prepare(policies)
    slow, cheap = _request(10), _request(11)
    assert workload.SLOW_LABEL in slow.object["metadata"]["labels"]
    assert workload.SLOW_LABEL not in cheap.object["metadata"]["labels"]
    await pipeline.admit(cheap)  # compiled and warm: what is timed below is the request alone
    running = asyncio.create_task(pipeline.admit(slow))
    await asyncio.sleep(0.05)  # the slow rule has started
    decision = await pipeline.admit(cheap)
    assert not running.done(), "the cheap request waited for the slow rule"
    assert decision.allowed and workload.policy_label(0) in decision.object["metadata"]["labels"]
    slowed = await running
    # The slow rule ran to its limit and was skipped (failurePolicy Ignore); the rest applied.
    assert slowed.allowed and workload.policy_label(0) in slowed.object["metadata"]["labels"]
    assert any("slow-neighbour" in w for w in slowed.warnings), slowed.warnings
