"""Answers remembered by the request's bytes but its uid (admission/answers.py), through the handlers."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import yaml

from kinitiras_py.admission import answers
from kinitiras_py.admission.engine import Engine
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics
from tests.functional.test_webhook import api_review

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}}


def policy(text: str) -> Any:
    return compile_policy(yaml.safe_load(text))


def override(name: str, overriders: str, failure_policy: str = "Fail") -> Any:
    """A ClusterOverridePolicy for every Pod with one rule of ``overriders`` (YAML flow)."""
    return policy(f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Pod}}]
  overrideRules:
  - failurePolicy: {failure_policy}
    overriders: {overriders}
""")


def labels(name: str) -> Any:
    """A policy adding the label ``name``."""
    return override(name, f'{{template: {{type: labels, operation: add, path: {name}, value: {{string: "yes"}}}}}}')


LABEL, OTHER_LABEL = labels("seen"), labels("other")
NAMESPACE_READER = override(
    "env", "{cel: \"[{'op': 'add', 'path': '/metadata/labels/env', 'value': namespaceObject.metadata.labels.env}]\"}")
MISSING = "{cel: \"[{'op': 'add', 'path': '/metadata/labels/x', 'value': object.spec.missing}]\"}"
IGNORED, FAILING = override("ignored", MISSING, "Ignore"), override("failing", MISSING)


class Counting(Engine):
    """An engine that counts the mutations asked of it."""

    asked = 0

    async def mutate(self, request: Any) -> Any:
        self.asked += 1
        return await super().mutate(request)


def handlers(*policies: Any, store: StaticStore | None = None) -> tuple[Handlers, Counting]:
    engine = Counting(policies, store=store or StaticStore())
    return Handlers(engine, Metrics()), engine


def answer(h: Handlers, body: bytes) -> tuple[bytes, int]:
    return asyncio.run(h.answer("mutate", body))


def with_uid(out: bytes, uid: str) -> bytes:
    return out.replace(f'"uid":"{uid}"'.encode(), b'"uid":"U"', 1)


def test_a_request_like_another_but_for_its_uid_gets_its_answer_without_evaluation() -> None:
    h, pipeline = handlers(LABEL)
    first, code = answer(h, api_review("CREATE", POD, "u-1"))
    second, code2 = answer(h, api_review("CREATE", POD, "u-2"))
    assert (code, code2, pipeline.asked) == (200, 200, 1)
    assert with_uid(first, "u-1") == with_uid(second, "u-2")
    assert orjson.loads(second)["response"]["uid"] == "u-2"
    assert (h.engine.answers.hits, h.engine.answers.misses) == (1, 1)
    # Counted per policy on both occasions, as if evaluated.
    assert h.metrics.per_policy._policies  # the policy is known to the metrics
    stats = next(iter(h.metrics.per_policy._policies.values()))
    assert (stats.matched, stats.patched) == (2, 2)


def test_a_different_object_or_layout_is_evaluated() -> None:
    h, pipeline = handlers(LABEL)
    answer(h, api_review("CREATE", POD, "u-1"))
    other = {**POD, "metadata": {**POD["metadata"], "name": "q"}}
    answer(h, api_review("CREATE", other, "u-2"))
    # The same review in another layout (apiVersion first) is not looked up at all.
    doc = orjson.loads(api_review("CREATE", POD, "u-3"))
    answer(h, orjson.dumps({"apiVersion": doc["apiVersion"], "kind": doc["kind"], "request": doc["request"]}))
    assert pipeline.asked == 3


def test_a_change_of_policies_is_never_answered_from_before() -> None:
    h, pipeline = handlers(LABEL)
    answer(h, api_review("CREATE", POD, "u-1"))
    h.engine.overrides.put(OTHER_LABEL)
    out, _ = answer(h, api_review("CREATE", POD, "u-2"))
    assert pipeline.asked == 2
    assert b"other" in __import__("base64").b64decode(orjson.loads(out)["response"]["patch"])
    answer(h, api_review("CREATE", POD, "u-3"))
    assert pipeline.asked == 2  # the new answer replaced the old one
    assert len(h.engine.answers) == 1


def test_an_answer_that_read_the_namespace_is_not_kept() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"env": "a"}}}
    h, pipeline = handlers(NAMESPACE_READER, store=StaticStore([namespace]))
    answer(h, api_review("CREATE", POD, "u-1"))
    answer(h, api_review("CREATE", POD, "u-2"))
    assert pipeline.asked == 2
    assert len(h.engine.answers) == 0


@pytest.mark.parametrize("failing", [IGNORED, FAILING])
def test_an_answer_in_which_a_rule_failed_is_not_kept(failing: Any) -> None:
    h, pipeline = handlers(LABEL, failing)
    answer(h, api_review("CREATE", POD, "u-1"))
    answer(h, api_review("CREATE", POD, "u-2"))
    assert pipeline.asked == 2
    assert len(h.engine.answers) == 0


def test_a_second_uid_member_keeps_the_request_out_of_memory() -> None:
    # orjson reads the last of two members of one name: the uid found first is not the request's.
    h, pipeline = handlers(LABEL)
    body = api_review("CREATE", POD, "u-1").replace(b'"dryRun":false', b'"dryRun":false,"uid":"u-9"')
    for _ in range(2):
        out, code = answer(h, body)
        assert (code, orjson.loads(out)["response"]["uid"]) == (200, "u-9")
    assert pipeline.asked == 2
    assert len(h.engine.answers) == 0


def test_nothing_is_kept_when_switched_off() -> None:
    h, pipeline = handlers(LABEL)
    h.engine.answers.configure(0)
    answer(h, api_review("CREATE", POD, "u-1"))
    answer(h, api_review("CREATE", POD, "u-2"))
    assert (pipeline.asked, len(h.engine.answers), h.engine.answers.misses) == (2, 0, 0)


def test_memory_stays_within_its_bound() -> None:
    h, _ = handlers(LABEL)
    h.engine.answers.configure(8 * 1024)
    for i in range(20):
        answer(h, api_review("CREATE", {**POD, "metadata": {**POD["metadata"], "name": f"p{i}"}}, f"u-{i}"))
    assert 0 < h.engine.answers.size <= 8 * 1024
    assert 0 < len(h.engine.answers) < 20


@pytest.mark.parametrize("uid", ["", "a\\u0041", "a b", "é", "a\x01", "x" * 257, "-leading"])
def test_only_plain_uids_are_looked_up(uid: str) -> None:
    body = api_review("CREATE", POD, "u").replace(b'"uid":"u"', b'"uid":"' + uid.encode() + b'"', 1)
    assert answers.request(body) is None


def test_the_key_is_the_body_but_its_uid() -> None:
    one, two = answers.request(api_review("CREATE", POD, "u-1")), answers.request(api_review("CREATE", POD, "u-22"))
    assert one is not None and two is not None
    assert (one.uid, two.uid, one.key == two.key) == ("u-1", "u-22", True)
    beta = api_review("CREATE", POD, "u-1").replace(b"admission.k8s.io/v1", b"admission.k8s.io/v1beta1", 1)
    found = answers.request(beta)
    assert found is not None and found.key != one.key
