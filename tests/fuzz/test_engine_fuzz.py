"""Fuzz: one object evaluated through :meth:`Engine.evaluate` gets what its review gets at /mutate.

The object path (what the offline CLI, Python callers and background scans use) builds the
request itself; the webhook decodes it from an AdmissionReview. Over random policy sets and Pods
(those of :mod:`tests.fuzz.test_cache_equivalence_fuzz`), with the Pod's namespace given or left
to the object, both must give the same allowed, patch and warnings, and every rule that matched
must have a result. The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.test_answers_fuzz import answer, body
from tests.fuzz.test_cache_equivalence_fuzz import PODS, RULES, STALE_COPY, handlers_for, request


@given(rules=RULES, pod=PODS, namespace_given=st.booleans())
@example(STALE_COPY[0], STALE_COPY[2], False)
def test_an_object_evaluated_gets_what_its_review_gets(rules: list[dict[str, Any]], pod: dict[str, Any],
                                                        namespace_given: bool) -> None:
    handlers = handlers_for(rules, [])
    out = answer(handlers, body("u-1", request(pod)))
    response = orjson.loads(out[:out.rindex(b"}") + 1])["response"]
    patch = orjson.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    engine = handlers_for(rules, []).engine  # a fresh engine: nothing remembered from the review
    if namespace_given:
        unplaced = {**pod, "metadata": {k: v for k, v in pod["metadata"].items() if k != "namespace"}}
        result = engine.evaluate_sync(unplaced, namespace="team-a", user_info={"username": "u"})
    else:
        result = engine.evaluate_sync(pod, user_info={"username": "u"})
    decision = result.decision
    assert (decision.allowed, decision.patch, decision.warnings) == (
        response["allowed"], patch, response.get("warnings", []))
    matched = {(r.policy.name, r.rule) for r in result.rules}
    assert len(matched) == len(result.rules) == len(rules)  # one policy per rule, each selects every Pod
