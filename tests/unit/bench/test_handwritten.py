"""The hand-written webhook makes of each Pod what our engine makes of it under the same policies,
so that comparing the two measures the price of policies and nothing else."""

from __future__ import annotations

import asyncio
import base64

import jsonpatch
import orjson
import pytest

from kinitiras_py.admission.pipeline import Request
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import handwritten, runner, webhook, workload


def _ours(policies: list[Obj], pod: Obj) -> Obj:
    pipeline, _ = runner.prepare(policies)
    decision = asyncio.run(pipeline.admit(Request("CREATE", pod, namespace=pod["metadata"]["namespace"])))
    assert decision.allowed, decision.message
    return decision.object


def _pods() -> list[Obj]:
    odd = workload.server_pod()
    odd["metadata"]["name"] = "odd"
    app, proxy, shipper, exporter = odd["spec"]["containers"]
    app["resources"]["limits"] = {"cpu": "1500", "memory": "1000M"}  # decimal forms, kept decimal
    del proxy["resources"]["requests"]  # added whole
    shipper["resources"] = {"limits": {"memory": "3Gi"}, "requests": {"cpu": "100m"}}  # no cpu limit: kept
    exporter["resources"]["limits"] = {"cpu": "1", "memory": "4097"}  # a plain byte count
    odd["spec"]["initContainers"] = [{"name": "init", "image": "registry.example.com/init:1",
                                      "resources": {"limits": {"cpu": "3", "memory": "1Gi"}}},
                                     # 4000 bytes: a binary quantity below 1Ki, written in decimal ("1k")
                                     {"name": "tiny", "image": "registry.example.com/tiny:1",
                                      "resources": {"limits": {"memory": "3.90625Ki"}}}]
    return [workload.distinct_server_pod(i, "lat") for i in (0, 1, 7, 10, 333, 1024, 4095)] + [
        workload.server_pod(), odd]


@pytest.mark.parametrize("matching", [1, 3])
def test_the_final_object_is_ours(matching: int) -> None:
    policies = workload.some_matching(12, matching)
    pods = _pods()
    assert len({orjson.dumps(p) for p in pods}) == len(pods)
    for pod in pods:
        final = jsonpatch.apply_patch(pod, handwritten.patch(pod, matching))
        assert final == _ours(policies, pod), pod["metadata"].get("name")
        assert final != pod


def test_a_pod_the_policies_do_not_select_is_left_alone() -> None:
    pod = workload.distinct_server_pod(5, "lat")
    pod["metadata"]["labels"]["app"] = "api"
    assert handwritten.patch(pod, 20) == []
    assert _ours(workload.some_matching(30, 20), pod) == pod


def test_it_answers_a_review_with_the_patch() -> None:
    pod = workload.distinct_server_pod(3, "lat")
    body = webhook.review(pod)
    response = orjson.loads(handwritten.answer(body, 2))["response"]
    assert response["uid"] == orjson.loads(body)["request"]["uid"] and response["allowed"] is True
    assert orjson.loads(base64.b64decode(response["patch"])) == handwritten.patch(pod, 2)
    assert webhook.patch_of(handwritten.answer(body, 2)) == handwritten.patch(pod, 2)


def test_distinct_pods_differ_in_name_and_limits_and_one_in_ten_is_slow() -> None:
    pods = [workload.distinct_server_pod(i, "p") for i in range(30)]
    assert len({p["metadata"]["name"] for p in pods}) == 30
    limits = [tuple(c["resources"]["limits"]["cpu"] for c in p["spec"]["containers"]) for p in pods]
    assert len(set(limits)) == 30
    assert [i for i, p in enumerate(pods) if workload.SLOW_LABEL in p["metadata"]["labels"]] == [0, 10, 20]
    assert pods[1]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2001m", "memory": "4097Mi"}
