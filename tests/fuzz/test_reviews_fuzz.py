"""Fuzz: AdmissionReviews mutated at every path, posted to the webhook app over HTTP.

Valid reviews (objects several loaded policies match, a policy object, DELETE, UPDATE, CONNECT)
are damaged at random paths: a member deleted, replaced by a value of another type, a wrong or
huge string, a huge array, nesting beyond any limit; or the body itself is cut, or sent with
another content type. Invariants, for every answer:

* the HTTP status is 200 and the body a well-formed AdmissionReview (``apiVersion`` one of
  ours, ``kind``, ``response.uid`` a string, ``response.allowed`` a bool, a ``status`` with an
  integer code when denied);
* ``response.uid`` is the request's uid whenever that was a string;
* no 500: every input here is an expected class (bad requests are 400s, policies' verdicts 403);
* a ``patch`` is base64 of a JSON patch (``patchType: JSONPatch``) that applies to the object;
* the answer comes within the deadline, and /healthz probes sent meanwhile answer within it too;
* a review answered again, its CEL results now looked up (:mod:`celmemo`), and once more with
  the result cache off, gets the same answer.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.webhook.app import make_app
from kinitiras_py.webhook.codec import API_VERSIONS
from tests.functional.test_webhook import DENY_NS, OVERSELL, WARN_CM, make_handlers
from tests.jsonpaths import json_paths

DEADLINE = 2.5
"""The request deadline of `serve` (its default): no answer, and no probe, may take longer."""

POLICIES = [OVERSELL, DENY_NS, WARN_CM, *yaml.safe_load_all("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: pod-labels}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      template: {type: labels, operation: add, path: team, value: {string: a}}
      plaintext: [{op: add, path: /metadata/annotations, value: {seen: "yes"}}]
  - failurePolicy: Ignore
    overriders:
      cel: "object.spec.containers.map(c, {'op': 'add', 'path': '/metadata/annotations/' + c.name, 'value': 'x'})"
  - failurePolicy: Ignore
    overriders:  # one container: 1.0 / 0.0, a double JSON cannot hold (the rule fails, never writes null)
      cel: "[{'op': 'add', 'path': '/metadata/annotations/s', 'value': 1.0 / double(size(object.spec.containers) - 1)}]"
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: cm-labels, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders:
      cel: >
        has(object.metadata.labels) ? [] : [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: pod-names}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  validateRules:
  - cel: "object.metadata.name != 'forbidden'"
    message: forbidden name
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: pod-js}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      javascript:
        source: |
          function jsa_mutate(op, obj) {
            obj.metadata.annotations = {...obj.metadata.annotations, js: op};
            for (const c of obj.spec.containers) c.env = [...(c.env ?? []), {name: "JS", value: "1"}];
            if (obj.metadata.name === "spin") while (true) {}
            return {Allowed: obj.metadata.name !== "js-denied", Message: "denied by js", Result: obj};
          }
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: pod-js-check}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  validateRules:
  - javascript:
      source: |
        const jsa_validate = (obj) => obj.metadata.labels?.app === "js-refused" ? {Allowed: false} : undefined;
""")]
POLICIES.append({
    "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "deploy-deep"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}], "overrideRules": [{
        "failurePolicy": "Ignore",
        # Deeper than objects may nest, computed per object: the rule fails (the answer was a 500).
        "overriders": {"cel": "[{'op': 'add', 'value': 'x', 'path': '/spec/' + "
                              "string(object.metadata.name) + '" + "/a" * 260 + "'}]"}}]}})
POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1",
                                         "controller": True}]},
       "spec": {"containers": [{"name": "app", "image": "nginx",
                                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
              "spec": {"template": {"spec": {"containers": [
                  {"name": "a", "image": "x", "resources": {"limits": {"cpu": "2"}}}]}}}}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
             "data": {"k": "v"}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"protected": "y"}}}


def _review(operation: str, obj: Any = None, old: Any = None, kind: str = "Pod", **extra: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": kind.lower() + "s"}, "operation": operation,
        "namespace": "default", "name": "x", "dryRun": False, "subResource": "", "requestSubResource": "",
        "requestKind": {"group": "", "version": "v1", "kind": kind},
        "requestResource": {"group": "", "version": "v1", "resource": kind.lower() + "s"},
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl"},
        "userInfo": {"username": "alice", "uid": "u", "groups": ["system:authenticated"], "extra": {"k": ["v"]}},
        **extra}
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


BASES = [
    _review("CREATE", POD), _review("CREATE", DEPLOYMENT, kind="Deployment"), _review("CREATE", CONFIGMAP,
                                                                                      kind="ConfigMap"),
    _review("UPDATE", {**POD, "metadata": {**POD["metadata"], "name": "forbidden"}}, POD),
    _review("DELETE", None, NAMESPACE, kind="Namespace"), _review("CONNECT", None, kind="Pod"),
    {**_review("CREATE", POLICIES[3], kind="ClusterOverridePolicy"), "apiVersion": "admission.k8s.io/v1beta1"},
]
DEEP = "__kinitiras_fuzz_deep__"
"""Replaced in the encoded body by nesting deeper than orjson (or Python) objects can be built."""
RAW = {"__kinitiras_fuzz_bigint__": b"123456789012345678901234567890", "__kinitiras_fuzz_inf__": b"1e400",
       "__kinitiras_fuzz_negzero__": b"-0.0", "__kinitiras_fuzz_surrogate__": b'"\\ud800"',
       "__kinitiras_fuzz_low_surrogate__": b'"a\\udfffb"'}
"""Replaced in the encoded body by values orjson will not write: numbers beyond 64 bits, infinite;
strings with a lone surrogate, which it will not read either."""

NASTY = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1), st.sampled_from(list(RAW)),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.sampled_from(["", "false", "true", "0", "null", "CREATE", "Pod", "v1", "apps/v1", "/", "{}", "[]",
                     "policy.kcloudlabs.io/v1alpha1", "ClusterOverridePolicy", "\x00", "é", "\ud7ff"]),
    st.lists(st.sampled_from(["a", 1, None, True, {}, []]), max_size=3),
    st.dictionaries(st.sampled_from(["group", "version", "kind", "name", "a"]), st.sampled_from(["x", 1, None]),
                    max_size=3),
    # Fresh objects each time: a value shared between examples (st.just) would be changed in place.
    st.just("x" * 300_000), st.builds(lambda: list(range(20_000))),
    st.builds(lambda: {f"k{i}": "v" for i in range(5_000)}),
    st.builds(lambda depth: DEEP + str(depth), st.integers(min_value=150, max_value=400)),
    # Deeper than orjson decodes (1,024 levels): the body is scanned for its uid instead.
    st.builds(lambda depth: DEEP + str(depth), st.integers(min_value=1020, max_value=3000)),
)


@dataclass
class Change:
    """One damage at one path (a path into the document, as chosen by index among its paths)."""

    pick: int
    action: str
    value: Any


def _apply(doc: Any, change: Change) -> Any:
    paths = [(), *json_paths(doc)]
    path = paths[change.pick % len(paths)]
    if not path:
        return copy.deepcopy(change.value) if change.action != "delete" else {}
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if change.action == "delete":
        del parent[last]
    elif change.action == "wrap":
        parent[last] = [parent[last]]
    elif change.action == "add" and isinstance(parent[last], dict):
        parent[last]["extra"] = copy.deepcopy(change.value)
    else:
        parent[last] = copy.deepcopy(change.value)  # never the same object at two paths (no cycles)
    return doc


CHANGES = st.lists(st.builds(Change, st.integers(min_value=0), st.sampled_from(["replace", "delete", "wrap", "add"]),
                             NASTY), min_size=1, max_size=3)


def encode(doc: Any) -> bytes:
    """The JSON text of ``doc`` with every marker replaced by the text it stands for."""
    text = orjson.dumps(doc)
    for marker, raw in RAW.items():
        text = text.replace(b'"' + marker.encode() + b'"', raw)
    while DEEP.encode() in text:
        start = text.index(b'"' + DEEP.encode())
        end = text.index(b'"', start + 1)
        depth = int(text[start + 1 + len(DEEP):end])
        text = text[:start] + b'{"a":' * depth + b"1" + b"}" * depth + text[end + 1:]
    return text


class App:
    """The webhook app on a TestServer in an event loop of its own (hypothesis tests are sync)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        handlers = make_handlers(POLICIES, deadline=DEADLINE)
        self.engine = handlers.engine
        self.client = TestClient(TestServer(make_app(handlers)), loop=self.loop)
        self.loop.run_until_complete(self.client.start_server())

    def post(self, path: str, body: bytes, content_type: str = "application/json") -> tuple[int, Any]:
        """Post a review while probing /healthz; the probes and the answer must come within the deadline."""
        async def review() -> tuple[int, Any]:
            resp = await self.client.post(path, data=body, headers={"Content-Type": content_type})
            return resp.status, orjson.loads(await resp.read())

        async def probe_until(done: asyncio.Future[tuple[int, Any]]) -> None:
            while not done.done():
                started = time.monotonic()
                resp = await self.client.get("/healthz")
                assert resp.status == 200
                # A bound, not a speed target: a probe held past the request deadline is a stalled probe.
                assert time.monotonic() - started < DEADLINE, "a /healthz probe stalled behind a review"
                await asyncio.sleep(0.01)

        async def go() -> tuple[int, Any]:
            started = time.monotonic()
            task = asyncio.ensure_future(review())
            await probe_until(task)
            answer = await task
            assert time.monotonic() - started < DEADLINE + 1.0, "the review was answered after its deadline"
            return answer
        return self.loop.run_until_complete(go())

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    served = App()
    yield served
    served.close()


def parsed(body: bytes) -> Any:
    """The document the body holds, or None when it is not JSON. Python's own decoder is the
    reference: unlike orjson it reads any depth (given the recursion to do it) and lone surrogates."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(limit)


def _expected_uid(doc: Any) -> str:
    """The uid to echo: the request's, unless it is no string or holds a lone surrogate (no JSON
    text in UTF-8 can carry it back)."""
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    if not isinstance(uid, str):
        return ""
    try:
        uid.encode()
    except UnicodeEncodeError:
        return ""
    return uid


def check_answer(status: int, answer: Any, sent: Any, uid: str | None = None) -> None:
    """The invariants of the module docstring; ``sent`` is the document posted (None if not JSON),
    ``uid`` the one to echo when it is not ``sent``'s."""
    assert status == 200
    assert isinstance(answer, dict) and answer.get("kind") == "AdmissionReview"
    assert answer.get("apiVersion") in API_VERSIONS
    response = answer["response"]
    assert isinstance(response["uid"], str) and response["uid"] == (_expected_uid(sent) if uid is None else uid)
    assert isinstance(response["allowed"], bool)
    assert all(isinstance(w, str) for w in response.get("warnings", []))
    assert all(isinstance(v, str) for v in response.get("auditAnnotations", {}).values())
    if not response["allowed"]:
        assert isinstance(response["status"]["code"], int) and isinstance(response["status"]["message"], str)
        assert response["status"]["code"] != 500, response["status"]["message"]
    if "patch" in response:
        assert response["allowed"] is True and response["patchType"] == "JSONPatch"
        patch = orjson.loads(base64.b64decode(response["patch"], validate=True))
        assert isinstance(patch, list) and patch
        request = sent["request"]
        target = request.get("object") if request.get("operation") != "DELETE" else request.get("oldObject")
        jsonpatch.apply_patch(target, patch)  # raises when an op does not apply


def damaged(base: dict[str, Any], changes: list[Change]) -> bytes:
    """``base`` with ``changes`` applied, encoded."""
    doc: Any = copy.deepcopy(base)
    for change in changes:
        doc = _apply(doc, change)
    return encode(doc)


@given(base=st.sampled_from(BASES), changes=CHANGES, path=st.sampled_from(["/mutate", "/validate"]))
def test_damaged_reviews_get_well_formed_answers(app: App, base: dict[str, Any], changes: list[Change],
                                                 path: str) -> None:
    body = damaged(base, changes)
    status, answer = app.post(path, body)
    check_answer(status, answer, parsed(body))


@given(base=st.sampled_from(BASES), cut=st.integers(min_value=0), path=st.sampled_from(["/mutate", "/validate"]),
       content_type=st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]))
def test_cut_bodies_and_content_types_get_well_formed_answers(app: App, base: dict[str, Any], cut: int, path: str,
                                                              content_type: str) -> None:
    body = orjson.dumps(base)
    body = body[:cut % (len(body) + 1)]
    status, answer = app.post(path, body, content_type)
    sent = parsed(body)
    # Cut short, the body still shows its uid once the member after it has begun.
    uid = base["request"]["uid"]
    shown = b'"request":{"uid":' + orjson.dumps(uid) + b"," in body
    check_answer(status, answer, sent, None if sent is not None else uid if shown else "")


@given(base=st.sampled_from(BASES), path=st.sampled_from(["/mutate", "/validate"]))
def test_undamaged_reviews_are_served(app: App, base: dict[str, Any], path: str) -> None:
    status, answer = app.post(path, orjson.dumps(base))
    check_answer(status, answer, base)
    assert "status" not in answer["response"] or answer["response"]["status"]["code"] == 403


@given(base=st.sampled_from(BASES), changes=CHANGES, path=st.sampled_from(["/mutate", "/validate"]))
def test_remembered_results_change_no_answer(app: App, base: dict[str, Any], changes: list[Change],
                                             path: str) -> None:
    body = damaged(base, changes)
    app.engine.cel_results.configure(celmemo.DEFAULT_BYTES)
    answers = [app.post(path, body) for _ in range(2)]
    app.engine.cel_results.configure(0)
    answers.append(app.post(path, body))
    assert answers[0] == answers[1] == answers[2]
    check_answer(*answers[0], parsed(body))

