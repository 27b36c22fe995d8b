"""Fuzz: the memory of mutations (:mod:`.mutationmemo`) changes no answer.

Random Pods (labels, containers with resources) under a few policies (oversell, labels, a
plaintext operation, CEL rules reading the request and the Namespace, one failing now and then)
and operations, sent through the webhook's handlers: a request, then requests differing from it
in one field (operation, namespace, userInfo, dryRun, object, oldObject), all twice with the
memory on and once with it off. Invariants:

* each request's three answers are the same bytes but for the uid, and so are the final objects
  the engine gives with the memory on (a recalled one is the request's object with the
  remembered patch applied) and off;
* the second time, a request is answered from memory (no rule runs) unless no rule matched it
  or one failed (a skipped rule, too).

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import orjson
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.admission.engine import Engine
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import Mutation
from kinitiras_py.engine.running import overriding
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook import codec
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics

POLICIES: list[CompiledPolicy] = [compile_policy(doc) for doc in yaml.safe_load_all("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: a-oversell}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [CREATE]
    overriders:
      template: {type: resourcesOversell, operation: replace, resourcesOversell: {cpuFactor: "0.5"}}
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: b-labels}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod, labelSelector: {matchLabels: {app: web}}}]
  overrideRules:
  - overriders:
      template: {type: labels, operation: add, path: team, value: {string: a}}
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: c-plaintext}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - targetOperations: [UPDATE]
    overriders:
      plaintext: [{op: add, path: /metadata/annotations, value: {updated: "yes"}}]
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: d-cel}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      cel: >
        [{'op': 'add', 'path': '/metadata/labels/seen-by', 'value': request.userInfo.username + '-' +
          string(request.dryRun) + '-' + request.operation + '-' + request.namespace + '-' +
          string(size(object.spec.containers))}]
  - failurePolicy: Ignore
    overriders:  # an image "x": an error, the rule skipped with a warning
      cel: >
        object.spec.containers.exists(c, c.image == 'x') ?
          [{'op': 'add', 'path': '/metadata/labels/x', 'value': object.spec.missing}] :
          [{'op': 'add', 'path': '/metadata/labels/first',
            'value': (size(object.spec.containers) == 0 ? 'none' : object.spec.containers[0].name) + '-' +
                     (oldObject == null ? 'new' : string(size(oldObject.spec.containers)))}]
  - overriders:
      cel: >
        [{'op': 'add', 'path': '/metadata/labels/env',
          'value': namespaceObject == null ? 'none' : namespaceObject.metadata.labels.env}]
---
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: e-fail}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - failurePolicy: Fail
    overriders:  # a tier label "x": an error, the request denied
      cel: >
        has(object.metadata.labels.tier) && object.metadata.labels.tier == 'x' ?
          [{'op': 'add', 'path': '/metadata/labels/t', 'value': object.spec.missing}] : []
""")]
NAMESPACES = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}]
"""The Namespaces there are (requests come in team-a, c and d)."""

WORDS = st.sampled_from(["web", "app", "db", "x", "team", "é"])
"""Names, label values and images (an image x makes a rule of d-cel fail, a label tier=x e-fail)."""
QUANTITIES = st.sampled_from(["100m", "250m", "1", "2", "1.5", "3500m"])
RESOURCES = st.fixed_dictionaries({}, optional={
    "limits": st.fixed_dictionaries({}, optional={"cpu": QUANTITIES, "memory": st.sampled_from(["128Mi", "1Gi"])}),
    "requests": st.fixed_dictionaries({}, optional={"cpu": QUANTITIES})})
CONTAINERS = st.lists(st.fixed_dictionaries({"image": WORDS}, optional={"resources": RESOURCES}), max_size=3).map(
    lambda cs: [{"name": f"c{i}", **c} for i, c in enumerate(cs)])
PODS = st.builds(
    lambda name, labels, containers: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
                                      "spec": {"containers": containers}},
    WORDS, st.dictionaries(st.sampled_from(["app", "tier", "team"]), WORDS, max_size=3), CONTAINERS)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "operation": st.sampled_from(["CREATE", "UPDATE"]), "namespace": st.sampled_from(["team-a", "c", "d"]),
    "userInfo": st.fixed_dictionaries({"username": st.sampled_from(["alice", "bob"])}), "dryRun": st.booleans(),
    "object": PODS, "oldObject": PODS}
"""What a request holds, each drawn on its own."""


def review(uid: str, request: dict[str, Any]) -> bytes:
    req = {"uid": uid, **request}
    if req["operation"] == "CREATE":
        del req["oldObject"]
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})


def answer(handlers: Handlers, uid: str, request: dict[str, Any]) -> bytes:
    """The webhook's answer to the review, with its uid written as ``uid-0``."""
    out, _code = asyncio.run(handlers._mutate(codec.decode(review(uid, request))))
    return out.replace(f'"uid":"{uid}"'.encode(), b'"uid":"uid-0"', 1)


def final(engine: Engine, uid: str, request: dict[str, Any]) -> bytes:
    """The JSON of the object the engine makes of the review."""
    return orjson.dumps(asyncio.run(engine.mutate(codec.decode(review(uid, request)).request)).object)


@contextlib.contextmanager
def counted() -> Iterator[list[Mutation]]:
    """The mutations the override rules make meanwhile (not a fixture: hypothesis runs many examples)."""
    runs: list[Mutation] = []
    real = overriding.mutate

    def counting(*args: Any, **kwargs: Any) -> Mutation:
        runs.append(real(*args, **kwargs))
        return runs[-1]

    overriding.mutate = counting
    try:
        yield runs
    finally:
        overriding.mutate = real


@given(chosen=st.sets(st.sampled_from(range(len(POLICIES))), min_size=1), base=st.fixed_dictionaries(FIELDS),
       changes=st.fixed_dictionaries(FIELDS))
def test_an_answer_from_memory_is_the_answer(chosen: set[int], base: dict[str, Any], changes: dict[str, Any]) -> None:
    # The base request, then requests differing from it in one field each (or not at all: the same again).
    requests = [base, *({**base, name: value} for name, value in changes.items())]
    engine = Engine([POLICIES[i] for i in sorted(chosen)], store=StaticStore(NAMESPACES))
    handlers = Handlers(engine, Metrics())
    with counted() as runs:
        remembered = [answer(handlers, f"uid-{i}", request) for i, request in enumerate(requests)]
        again = []
        for i, request in enumerate(requests):
            hits, ran = engine.mutations.hits, len(runs)
            again.append(answer(handlers, f"again-{i}", request))
            if engine.mutations.hits > hits:
                assert len(runs) == ran  # answered from memory: no rule ran
            else:  # not remembered: no rule matched, or one failed (a rule skipped, too)
                assert len(runs) == ran or runs[-1].ignored or runs[-1].failure is not None
        objects = [final(engine, f"object-{i}", request) for i, request in enumerate(requests)]
    engine.mutations.configure(0)
    fresh = [answer(handlers, f"fresh-{i}", request) for i, request in enumerate(requests)]
    assert remembered == again == fresh
    assert objects == [final(engine, f"fresh-object-{i}", request) for i, request in enumerate(requests)]
