"""The memory of mutations: recalled answers, distinct inputs, no aliasing, what is kept, bounds."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import yaml

from kinitiras_py.admission import mutationmemo
from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.engine.evaluation import bounds
from kinitiras_py.engine.matching import selection
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.policies.results import Mutation, RuleId
from kinitiras_py.engine.running import overriding
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook import codec, shape
from kinitiras_py.webhook.metrics import Metrics

HEAD = """
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: %s}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
"""
ECHO = yaml.safe_load(HEAD % "echo" + """
  overrideRules:
  - overriders:
      cel: >
        [{'op': 'add', 'path': '/metadata/annotations', 'value': {'user': request.userInfo.username,
          'op': request.operation, 'ns': request.namespace, 'dry': string(request.dryRun),
          'image': object.spec.containers[0].image,
          'old': oldObject == null ? '' : oldObject.spec.containers[0].image}}]
  - overriders:
      template: {type: labels, operation: add, path: team, value: {string: a}}
  - overriders:  # the Pod's DB_PORT differs: a warning, nothing injected
      template: {type: inject, inject: {env: [{name: DB_PORT, value: "6379"}], onConflict: Skip}}
""")
ENV = yaml.safe_load(HEAD % "env" + """
  overrideRules:
  - overriders:
      cel: "[{'op': 'add', 'path': '/metadata/labels', 'value': {'env': namespaceObject.metadata.labels.env}}]"
""")
RULE_REF = yaml.safe_load(HEAD % "rule-ref" + """
  overrideRules:
  - overriders:
      template:
        type: labels
        operation: add
        path: team
        valueRef: {from: k8s, path: /data/team, k8s: {apiVersion: v1, kind: ConfigMap, name: cfg, namespace: team-a}}
""")
POLICY_REF = yaml.safe_load(HEAD % "policy-ref" + """
  valueRefs:
    cfg: {from: k8s, k8s: {apiVersion: v1, kind: ConfigMap, name: cfg, namespace: team-a}}
  overrideRules:
  - overriders:
      cel: "[{'op': 'add', 'path': '/metadata/labels', 'value': {'team': params.cfg.data.team}}]"
""")
FAILING = yaml.safe_load(HEAD % "failing" + """
  overrideRules:
  - failurePolicy: Fail
    overriders:
      cel: "[{'op': 'add', 'path': '/metadata/labels/x', 'value': object.spec.missing}]"
""")
SKIPPED = yaml.safe_load(HEAD % "skipped" + """
  overrideRules:
  - overriders:
      template: {type: labels, operation: add, path: team, value: {string: a}}
  - failurePolicy: Ignore
    overriders:
      cel: "[{'op': 'add', 'path': '/metadata/labels/x', 'value': object.spec.missing}]"
""")
OWNER = yaml.safe_load(HEAD % "owner" + """
  overrideRules:
  - failurePolicy: Ignore
    overriders:
      template: {type: labels, operation: add, path: owner, valueRef: {from: owner, path: metadata.name}}
""")
JS = yaml.safe_load(HEAD % "js" + """
  overrideRules:
  - overriders:
      javascript:
        source: "function jsa_mutate(obj) { obj.metadata.labels = {js: 'yes'}; return {Result: obj} }"
""")
LATE = yaml.safe_load(HEAD % "late" + """
  overrideRules:
  - overriders:
      template: {type: labels, operation: add, path: late, value: {string: "yes"}}
""")
SLOW = yaml.safe_load(HEAD % "slow" + """
  overrideRules:
  - failurePolicy: Ignore
    overriders:
      cel: "[{'op': 'add', 'path': '/metadata/labels', 'value': {'k': jsonpatch.escapeKey(object.metadata.name)}}]"
""")


def pod(image: str = "nginx", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", **meta},
            "spec": {"containers": [{"name": "app", "image": image, "env": [{"name": "DB_PORT", "value": "1"}]}]}}


def namespace(env: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": env}}}


def config(team: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team-a"},
            "data": {"team": team}}


def body(uid: str = "u-1", **request: Any) -> bytes:
    req = {"uid": uid, "operation": "CREATE", "namespace": "team-a", "userInfo": {"username": "alice"},
           "dryRun": False, "object": pod(), **request}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})


def pipeline(*policies: dict[str, Any]) -> Engine:
    return Engine(policies, store=StaticStore())


async def mutate(p: Engine | Pipeline, data: bytes) -> Mutation:
    return await p.mutate(codec.decode(data).request)


def fields(m: Mutation) -> tuple[Any, ...]:
    """Everything a mutation answers, but its timings."""
    return m.object, m.patch, m.applied, m.warnings, m.ignored, m.failure


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per time the override rules are run."""
    calls: list[int] = []
    real = overriding.mutate

    def counting(*args: Any, **kwargs: Any) -> Mutation:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(overriding, "mutate", counting)
    return calls


async def test_a_request_equal_but_for_its_uid_is_answered_from_memory(runs: list[int]) -> None:
    p = pipeline(ECHO)
    first = await mutate(p, body("u-1"))
    assert first.patch and first.applied and first.warnings and first.failure is None
    cel = (p.cel_results.hits, p.cel_results.misses)
    second = await mutate(p, body("u-2"))
    assert isinstance(second, mutationmemo.Recalled)
    assert p.mutations.hits == 1 and len(runs) == 1
    assert (p.cel_results.hits, p.cel_results.misses) == cel
    assert fields(second) == fields(first)
    assert set(second.timings) == set(first.timings)


@pytest.mark.parametrize(("base", "changed"), [
    ({}, {"object": pod("busybox")}),
    ({}, {"operation": "UPDATE", "oldObject": pod()}),
    ({"operation": "UPDATE", "oldObject": pod()}, {"operation": "UPDATE", "oldObject": pod("busybox")}),
    ({}, {"namespace": "team-b"}),
    ({}, {"userInfo": {"username": "bob"}}),
    ({}, {"dryRun": True}),
], ids=["object", "operation", "oldObject", "namespace", "userInfo", "dryRun"])
async def test_a_request_differing_in_anything_is_evaluated_afresh(runs: list[int], base: dict[str, Any],
                                                                   changed: dict[str, Any]) -> None:
    p = pipeline(ECHO)
    remembered = await mutate(p, body("u-1", **base))
    assert (await mutate(p, body("u-2", **base))).patch == remembered.patch and p.mutations.hits == 1
    answer = await mutate(p, body("u-3", **changed))
    assert p.mutations.hits == 1 and len(runs) == 2
    assert answer.patch != remembered.patch
    p.mutations.configure(0)
    assert fields(answer) == fields(await mutate(p, body("u-4", **changed)))


async def test_a_policy_replaced_in_the_index_gives_its_new_answer(runs: list[int]) -> None:
    p = pipeline(ECHO)
    await mutate(p, body("u-1"))
    changed = copy.deepcopy(ECHO)
    changed["spec"]["overrideRules"][1]["overriders"]["template"]["value"] = {"string": "b"}
    generation = p.overrides.generation
    p.overrides.put(compile_policy(changed))
    assert p.overrides.generation != generation
    answer = await mutate(p, body("u-2"))
    assert p.mutations.hits == 0 and len(runs) == 2
    assert answer.object["metadata"]["labels"] == {"team": "b"}


async def test_the_rules_matched_are_remembered_per_generation(runs: list[int]) -> None:
    p = pipeline(ECHO)
    await mutate(p, body("u-1"))
    p.overrides.put(compile_policy(LATE))
    answer = await mutate(p, body("u-2"))
    assert p.mutations.hits == 0 and len(runs) == 2
    assert answer.object["metadata"]["labels"] == {"team": "a", "late": "yes"}


@pytest.mark.parametrize(("policy", "stored", "label"), [
    (ENV, namespace, "env"), (RULE_REF, config, "team"), (POLICY_REF, config, "team")],
    ids=["namespaceObject", "rule valueRef", "policy valueRefs"])
async def test_a_namespace_or_reference_that_differs_gives_its_own_answer(
        runs: list[int], policy: dict[str, Any], stored: Callable[[str], dict[str, Any]], label: str) -> None:
    index = PolicyIndex([compile_policy(policy)])  # one generation and one memory: the stores alone differ
    memory = mutationmemo.Mutations()
    a, b = (Pipeline(index, PolicyIndex(), StaticStore([stored(value)]), mutations=memory) for value in ("a", "b"))
    assert (await mutate(a, body("u-1"))).object["metadata"]["labels"] == {label: "a"}
    assert (await mutate(b, body("u-2"))).object["metadata"]["labels"] == {label: "b"}
    assert memory.hits == 0 and len(runs) == 2
    assert (await mutate(a, body("u-3"))).object["metadata"]["labels"] == {label: "a"}
    assert memory.hits == 1


async def test_changing_a_recalled_mutation_changes_no_later_recall() -> None:
    p = pipeline(ECHO)
    await mutate(p, body("u-1"))
    recalled = await mutate(p, body("u-2"))
    want = copy.deepcopy((recalled.object, recalled.patch))
    recalled.object["metadata"]["labels"]["team"] = "changed"
    recalled.object["spec"]["containers"].append({"name": "extra"})
    recalled.patch[0]["value"]["user"] = "mallory"
    recalled.patch.append({"op": "remove", "path": "/spec"})
    again = await mutate(p, body("u-3"))
    assert p.mutations.hits == 2
    assert (again.object, again.patch) == want


async def test_changing_the_remembered_mutation_changes_no_recall() -> None:
    p = pipeline(ECHO)
    first = await mutate(p, body("u-1"))
    want = copy.deepcopy((first.object, first.patch, first.warnings))
    first.object["metadata"]["annotations"]["user"] = "mallory"
    first.object["spec"]["containers"][0]["image"] = "evil"
    first.patch[0]["value"]["user"] = "mallory"
    first.patch.clear()
    first.warnings.append("changed")
    recalled = await mutate(p, body("u-2"))
    assert p.mutations.hits == 1
    assert (recalled.object, recalled.patch, recalled.warnings) == want


async def _owner_less(p: Engine, uid: str) -> Mutation:
    return await mutate(p, body(uid, object=pod(ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "name": "gone", "controller": True}])))


async def _direct(p: Engine, _uid: str) -> Mutation:
    return await p.mutate(Request("CREATE", pod(), namespace="team-a", user_info={"username": "alice"}))


async def _plain(p: Engine, uid: str) -> Mutation:
    return await mutate(p, body(uid))


@pytest.mark.parametrize(("policy", "send"), [(FAILING, _plain), (SKIPPED, _plain), (OWNER, _owner_less),
                                               (JS, _plain), (ECHO, _direct)],
                         ids=["failed", "rule skipped", "lookup failed", "javascript", "no fingerprint"])
async def test_what_is_not_remembered_is_evaluated_each_time(runs: list[int], policy: dict[str, Any],
                                                             send: Any) -> None:
    p = pipeline(policy)
    first = await send(p, "u-1")
    assert first.patch or first.failure is not None or first.ignored  # the rule did run
    second = await send(p, "u-2")
    assert p.mutations.hits == 0 and len(runs) == 2
    assert fields(second) == fields(first)


async def test_a_rule_stopped_by_the_time_limit_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    p = pipeline(SLOW)
    with monkeypatch.context() as m:
        m.setattr(bounds, "TIME_LIMIT", -1.0)  # every call of our functions is past the limit
        first = await mutate(p, body("u-1"))
    assert first.ignored and "ran longer" in first.ignored[0].reason
    assert (await mutate(p, body("u-2"))).patch == [{"op": "add", "path": "/metadata/labels", "value": {"k": "web"}}]
    assert p.mutations.hits == 0


def test_the_key_is_none_for_inputs_not_to_remember() -> None:
    policy = compile_policy(ECHO)
    match = [(policy, policy.rules[0])]

    def key(**changed: Any) -> mutationmemo.Key | None:
        given: dict[str, Any] = {"fingerprint": b"fp", "generation": 1, "matches": match, "features": 0,
                                 "namespace_object": None, "params": {}, "errors": {}, "programs": {}, **changed}
        return mutationmemo.key(**given)

    assert key() is not None and key() == key() and key(generation=2) != key()
    assert key(fingerprint=None) is None
    assert key(errors={RuleId(policy.identity, 0): "not found"}) is None
    assert key(features=selection.JAVASCRIPT) is None
    assert key(features=selection.NAMESPACE, namespace_object={"spec": {"x": float("nan")}}) is None


async def test_a_recalled_patch_is_handed_on_as_remembered_and_read_as_its_own() -> None:
    p = pipeline(ECHO)
    first = await mutate(p, body("u-1"))
    recalled = await mutate(p, body("u-2"))
    assert recalled.patch_json() == first.patch_json() == orjson.dumps(first.patch)
    recalled.patch.append({"op": "remove", "path": "/spec"})
    assert orjson.loads(recalled.patch_json() or b"") == recalled.patch
    again = await mutate(p, body("u-3"))
    assert again.patch_json() == first.patch_json() and again.patch == first.patch
    assert p.mutations.hits == 2


async def test_a_recalled_empty_patch_is_none() -> None:
    p = pipeline(ECHO)
    done = {"metadata": {"name": "web", "namespace": "team-a", "labels": {"team": "a"},
                         "annotations": (await mutate(p, body("u-1"))).object["metadata"]["annotations"]}}
    same = [await mutate(p, body(f"u-{n}", object={**pod(), **done})) for n in (2, 3)]
    assert p.mutations.hits == 1 and isinstance(same[1], mutationmemo.Recalled)
    assert same[0].patch_json() is None and same[1].patch_json() is None  # before the patch is read
    assert same[0].patch == same[1].patch == []


MUTATIONS = mutationmemo.Mutations()
"""The memory the bound tests fill (each configures it, which starts it afresh)."""


def _remember(n: int, size: int = 1) -> None:
    MUTATIONS.remember((b"head-%d" % n, b"fp"), Mutation(object={"n": n, "pad": "x" * size},
                                                         patch=[{"op": "add", "path": "/pad", "value": "x" * size}]))


def _held(*ns: int) -> list[bool]:
    return [MUTATIONS.recall((b"head-%d" % n, b"fp"), {"n": n}) is not None for n in ns]


def test_the_least_recently_used_entries_leave_first() -> None:
    MUTATIONS.configure(mutationmemo.DEFAULT_BYTES)
    _remember(0)
    cost = MUTATIONS.size
    MUTATIONS.configure(3 * cost)
    for n in range(3):
        _remember(n)
    assert _held(0) == [True]  # 0 is now the most recently used
    _remember(3)
    assert MUTATIONS.size <= MUTATIONS.max_bytes
    assert _held(1, 0, 2, 3) == [False, True, True, True]


def test_the_memory_never_holds_more_than_its_budget() -> None:
    MUTATIONS.configure(20_000)
    for n in range(300):
        _remember(n, (n * 7919) % 6000)
        assert 0 < MUTATIONS.size <= 20_000
        assert _held(n) == [True]


@pytest.mark.parametrize(("budget", "size"), [(10 * mutationmemo.MAX_ENTRY_BYTES, mutationmemo.MAX_ENTRY_BYTES),
                                              (4000, 5000)], ids=["larger than an entry may be", "over budget"])
def test_an_entry_too_large_is_not_kept_and_pushes_nothing_out(budget: int, size: int) -> None:
    MUTATIONS.configure(budget)
    _remember(0)
    kept = MUTATIONS.size
    _remember(1, size)
    assert MUTATIONS.size == kept
    assert _held(1, 0) == [False, True]


async def test_configure_zero_turns_the_memory_off(runs: list[int]) -> None:
    p = Engine([ECHO], store=StaticStore(), mutation_results_bytes=0)
    first, second = await mutate(p, body("u-1")), await mutate(p, body("u-2"))
    assert p.mutations.hits == 0 and len(runs) == 2 and len(p.mutations) == 0 and p.mutations.size == 0
    assert fields(first) == fields(second)


def request_of(**fields: Any) -> Request:
    return codec.decode(body(**fields)).request


def test_the_fingerprint_ignores_the_uid_only() -> None:
    same = request_of(uid="a").fingerprint
    assert same is not None and same == request_of(uid="b").fingerprint
    update: dict[str, Any] = {"operation": "UPDATE", "oldObject": pod()}
    variants: list[dict[str, Any]] = [{}, {"namespace": "team-b"}, {"userInfo": {"username": "bob"}}, {"userInfo": {}},
                {"dryRun": True}, {"object": pod("busybox")}, update, {**update, "oldObject": pod("busybox")},
                {"operation": "DELETE", "object": None, "oldObject": pod()}]
    prints = [request_of(**v).fingerprint for v in variants]
    assert None not in prints and len(set(prints)) == len(variants)


def test_no_fingerprint_for_an_object_without_exact_json() -> None:
    # orjson reads an integer beyond 64 bits as a double (which it writes): decoded, it has one.
    text = body().replace(b'"image":"nginx"', b'"image":1180591620717411303424')
    decoded = codec.decode(text).request
    assert isinstance(decoded.object["spec"]["containers"][0]["image"], float) and decoded.fingerprint is not None
    # Built in Python, the same integer has no JSON: no fingerprint, so nothing is remembered.
    obj = pod()
    obj["spec"]["containers"][0]["image"] = 2**70
    written = shape.check_request({"object": obj})
    assert "object" not in written
    assert codec._fingerprint("CREATE", "", {}, False, obj, None, written) is None
    assert codec._fingerprint("CREATE", "", {"uid": 2**70}, False, pod(), None, {"object": b"{}"}) is None


def _policy_lines(metrics: Metrics) -> list[str]:
    return [line for line in metrics.render().decode().splitlines()
            if line.startswith(("kinitiras_policy_matched", "kinitiras_policy_patched",
                                "kinitiras_policy_evaluation_seconds_count"))]


async def test_a_recalled_mutation_counts_in_the_metrics_as_the_first() -> None:
    p = pipeline(ECHO)
    first = await mutate(p, body("u-1"))
    recalled = await mutate(p, body("u-2"))
    assert isinstance(recalled, mutationmemo.Recalled)
    counted = []
    for mutation in (first, recalled):
        metrics = Metrics()
        metrics.observe_mutation(mutation)
        counted.append(_policy_lines(metrics))
    assert counted[0] == counted[1]
    assert 'kinitiras_policy_patched_total{policy="ClusterOverridePolicy echo"} 2.0' in counted[0]
    assert 'kinitiras_policy_matched_total{policy="ClusterOverridePolicy echo"} 1.0' in counted[0]


async def test_a_recalled_object_is_the_recalling_request_s_own_with_the_patch_applied() -> None:
    p = pipeline(ECHO)
    first = await mutate(p, body("u-1"))
    request = codec.decode(body("u-2")).request
    received = copy.deepcopy(request.object)
    recalled = await p.mutate(request)
    assert isinstance(recalled, mutationmemo.Recalled)
    assert recalled.object == first.object and orjson.dumps(recalled.object) == orjson.dumps(first.object)
    assert request.object == received  # copy-on-write: the request's object is left as it came
    assert recalled.object["spec"] is request.object["spec"]  # what no rule changed is shared, as afresh


async def test_the_memory_counts_a_pod_in_its_keys_only_not_again_as_the_final_object() -> None:
    p = pipeline(ECHO)
    big = pod()
    big["spec"]["hostname"] = "x" * 20_000  # kept in the final object
    mutation = await mutate(p, body("u-1", object=big))
    assert mutation.patch and len(p.mutations) == 2  # the matches and the mutation, each keyed by the request
    assert 2 * 20_000 < p.mutations.size < 3 * 20_000
