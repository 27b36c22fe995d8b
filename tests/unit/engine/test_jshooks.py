"""js-admissions' watch hooks and state (engine/rules/jshooks.py) and its marker annotation, on small
examples of our own: the order hooks see objects in, sync and read-only state, a state per policy
version, its bound, failures, the caches, and the marker's names in run order."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest

from kinitiras_py.admission.engine import Engine
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert import registry
from kinitiras_py.engine.evaluation import jsruntime
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rules import jshooks
from kinitiras_py.engine.running import overriding, validating, watchhooks
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics
from tests.functional.test_webhook import api_review

API = "policy.kcloudlabs.io/v1alpha1"
MARK = "jsadmissions.momiji.com/mutate"
# Records, in state, the names of the pods the hooks saw, in order; jsa_validate denies a third pod.
LEDGER = """
function jsa_init(state) { state.seen = []; state.live = {}; }
function jsa_created(obj, sync, state) {
  state.seen.push('+' + obj.metadata.name); state.live[obj.metadata.name] = 1;
}
function jsa_updated(obj, old, sync, state) { state.seen.push(old.metadata.labels.v + '>' + obj.metadata.labels.v); }
function jsa_deleted(obj, sync, state) {
  state.seen.push('-' + obj.metadata.name); delete state.live[obj.metadata.name];
}
function jsa_validate(op, obj, state) {
  if (Object.keys(state.live).length >= 2) return {Allowed: false, Message: 'seen ' + state.seen.join(' ')};
}
function jsa_mutate(obj, state) {
  obj.metadata.labels = {seen: state.seen.join('.')}; return {Result: obj};
}
"""


@pytest.fixture(autouse=True)
def idle_threads() -> None:
    """Scripts of earlier tests may still be running to their limits on the shared JavaScript
    threads (a runaway's caller stops waiting first): wait for them, so that the loads here are not
    timed against them."""
    for pool in list(jsruntime._pools):
        pool.submit(lambda: None).result()


def pod(name: str, namespace: str = "team-a", v: str = "1") -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": {"v": v}}}


def policy(source: str, kind: str = "ClusterValidatePolicy", name: str = "p", **javascript: Any) -> CompiledPolicy:
    meta: Obj = {"name": name} if kind.startswith("Cluster") else {"name": name, "namespace": "team-a"}
    script = {"source": source, **javascript}
    rules = ({"validateRules": [{"javascript": script}]} if "Validate" in kind
             else {"overrideRules": [{"failurePolicy": "Ignore", "overriders": {"javascript": script}}]})
    return compile_policy({"apiVersion": API, "kind": kind, "metadata": meta,
                           "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], **rules}})


def hooks_of(compiled: CompiledPolicy) -> jshooks.Hooks:
    [hooks] = watchhooks.watching(compiled)
    return hooks


def check(compiled: CompiledPolicy, obj: Obj) -> tuple[bool, str]:
    verdict = validating.validate([(compiled, compiled.rules[0])], {"object": obj, "request": {"operation": "CREATE"}})
    return verdict.allowed, verdict.message


def state(compiled: CompiledPolicy) -> Any:
    hooks = hooks_of(compiled)
    hooks.script.queue(lambda: None).result()  # every queued hook has run
    return orjson.loads(hooks.state.text)


# -- hooks and state ------------------------------------------------------------------------------


def test_hooks_see_existing_objects_then_each_change_in_order() -> None:
    compiled = policy(LEDGER)
    hooks = hooks_of(compiled)
    hooks.start([pod("a"), pod("b")]).result()
    assert state(compiled)["seen"] == ["+a", "+b"]
    hooks.updated(pod("a", v="2"), pod("a", v="1"))
    hooks.deleted(pod("b"))
    hooks.created(pod("c"))
    assert state(compiled)["seen"] == ["+a", "+b", "1>2", "-b", "+c"]
    allowed, message = check(compiled, pod("d"))
    assert not allowed and message.endswith("seen +a +b 1>2 -b +c")


def test_a_call_without_sync_reads_the_state_and_cannot_change_it() -> None:
    compiled = policy("""
        function jsa_init(state) { state.n = 1; }
        function jsa_created(obj, state) { state.n = 100; }
        function jsa_deleted(obj, sync, state) { state.n += 1; }
        function jsa_validate(state) { state.n = 50; return {Allowed: false, Message: String(state.n)}; }""")
    hooks = hooks_of(compiled)
    hooks.start([pod("a")]).result()
    hooks.deleted(pod("a"))
    assert state(compiled) == {"n": 2}
    assert check(compiled, pod("x")) == (False, "ClusterValidatePolicy p: 2")
    assert state(compiled) == {"n": 2}


def test_before_its_hooks_start_a_rule_that_reads_the_state_fails_clearly() -> None:
    allowed, message = check(policy(LEDGER), pod("x"))
    assert not allowed and "state is not built yet" in message


def test_each_policy_version_starts_with_jsa_init() -> None:
    first = policy(LEDGER)
    hooks_of(first).start([pod("a")]).result()
    second = policy(LEDGER)  # what a new generation compiles to
    hooks_of(second).start([]).result()
    assert state(first)["seen"] == ["+a"] and state(second)["seen"] == []


def test_a_state_beyond_its_bound_fails_the_rule_and_is_not_kept() -> None:
    compiled = policy("""
        function jsa_init(state) { state.big = ''; }
        function jsa_created(obj, sync, state) { state.big += 'x'.repeat(600); }
        function jsa_validate(state) { return {Allowed: state.big.length < 10000}; }""", stateLimitKiB=1)
    hooks = hooks_of(compiled)
    hooks.start([pod("a")]).result()
    assert check(compiled, pod("x"))[0]
    hooks.created(pod("b"))  # 1,200 characters: beyond 1 KiB
    assert len(state(compiled)["big"]) == 600
    allowed, message = check(compiled, pod("x"))
    assert not allowed and "more than its limit of 1024" in message and "jsa_created" in message


def test_a_failing_jsa_init_fails_the_rule_and_a_failing_hook_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    broken = policy("function jsa_init(state) { throw new Error('no'); }\n"
                    "function jsa_created(obj) {} function jsa_validate(state) {}")
    hooks_of(broken).start().result()
    allowed, message = check(broken, pod("x"))
    assert not allowed and "jsa_init failed" in message and "Error: no" in message
    caplog.set_level(logging.WARNING, "kinitiras_py.javascript")
    shaky = policy("function jsa_created(obj, sync, state) { if (obj.metadata.name == 'bad') throw 1; state.n = 1 }"
                   "\nfunction jsa_validate(state) { return {Allowed: false, Message: JSON.stringify(state)} }")
    hooks_of(shaky).start([pod("bad")]).result()
    assert check(shaky, pod("x")) == (False, "ClusterValidatePolicy p: {}")
    hooks_of(shaky).created(pod("good"))
    assert state(shaky) == {"n": 1}
    assert any("jsa_created failed for Pod team-a/bad" in r.getMessage() for r in caplog.records)


def test_hook_parameters_are_bound_by_name_and_checked() -> None:
    compiled = policy("function jsa_updated(state, old, sync, obj) { state.v = old.metadata.name + obj.metadata.name }"
                      "\nfunction jsa_validate() {}")
    hooks = hooks_of(compiled)
    hooks.start().result()
    hooks.updated(pod("new"), pod("old"))
    assert state(compiled) == {"v": "oldnew"}
    with pytest.raises(PolicyErrors, match="jsa_deleted: parameter 'op' is not one it is given"):
        policy("function jsa_deleted(op) {} function jsa_validate() {}")


def test_watch_hooks_need_their_kinds_named() -> None:
    with pytest.raises(PolicyErrors, match=r"resourceSelectors\[0\].*apiVersion and kind"):
        compile_policy({"apiVersion": API, "kind": "ClusterValidatePolicy", "metadata": {"name": "p"}, "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "*"}],
            "validateRules": [{"javascript": {"source": "function jsa_deleted() {} function jsa_validate() {}"}}]}})


def test_offline_objects_reach_the_hooks_of_the_policies_selecting_them_in_a_stable_order() -> None:
    cluster, namespaced = policy(LEDGER), policy(LEDGER, "ValidatePolicy")
    context = [pod("z"), pod("m", "elsewhere"), pod("b"), {"kind": "HTTPResponse", "url": "http://x"},
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "team-a"}}]
    watchhooks.start_offline([cluster, namespaced], context)
    assert state(cluster)["seen"] == ["+m", "+b", "+z"]  # by namespace, then name
    assert state(namespaced)["seen"] == ["+b", "+z"]  # only its own namespace


def test_a_mutation_that_reads_the_state_is_never_answered_from_memory() -> None:
    compiled = policy(LEDGER, "ClusterOverridePolicy")
    hooks = hooks_of(compiled)
    hooks.start([pod("a")]).result()
    handlers = Handlers(Engine([compiled], store=StaticStore()), Metrics())

    def labels(uid: str) -> Any:
        out, _ = asyncio.run(handlers.answer("mutate", api_review("CREATE", pod("new"), uid)))
        return orjson.loads(out)["response"]["patch"]

    first = labels("u-1")
    hooks.created(pod("b"))
    state(compiled)
    assert labels("u-2") != first  # the same request: the state changed in between
    assert handlers.engine.answers.hits == 0


# -- the marker -------------------------------------------------------------------------------------


def admission(name: str, js: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "momiji.com/v1", "kind": "JsAdmission" if namespace else "ClusterJsAdmission",
            "metadata": meta, "spec": {"kinds": ["pods"], "js": js}}


ECHO = "function jsa_mutate(obj) { return {Allowed: true, Result: obj}; }"


def mutate(docs: list[Obj], obj: Obj, op: str = "CREATE") -> Any:
    converted = registry.convert_all(docs, "f")
    assert converted.problems == []
    compiled = sorted((compile_policy(d) for d in converted.documents), key=CompiledPolicy.sort_key)
    return overriding.mutate([(p, r) for p in compiled for r in p.rules], obj,
                             {"request": {"operation": op}, "oldObject": None})


def test_the_marker_names_each_admission_that_returned_a_result_in_run_order() -> None:
    docs = [admission("z-cluster", ECHO), admission("b", ECHO, "team-a"),
            admission("a-quiet", "function jsa_mutate() {}"), admission("a", ECHO, "team-a")]
    m = mutate(docs, pod("p"))
    assert m.failure is None
    # Namespaced admissions first, then cluster ones, each by name; a mutate without Result is not named.
    assert m.object["metadata"]["annotations"] == {MARK: "team-a.a,team-a.b,z-cluster"}
    assert m.patch == [{"op": "add", "path": "/metadata/annotations", "value": {MARK: "team-a.a,team-a.b,z-cluster"}}]


def test_an_echoing_mutate_yields_a_patch_and_a_previous_marker_is_replaced() -> None:
    old = pod("p")
    old["metadata"]["annotations"] = {MARK: "team-a.gone", "keep": "1"}
    m = mutate([admission("echo", ECHO)], old, "UPDATE")
    assert m.patch == [{"op": "replace", "path": "/metadata/annotations/jsadmissions.momiji.com~1mutate",
                        "value": "echo"}]
    assert mutate([admission("echo", ECHO)], m.object, "UPDATE").patch == []


def test_a_rule_that_fails_or_denies_adds_no_name() -> None:
    failing = "function jsa_mutate(obj) { return {Result: {...obj, kind: 'Service'}}; }"
    m = mutate([admission("a-fails", failing), admission("b", ECHO)], pod("p"))
    assert m.failure is not None and "kind is 'Service'" in m.failure.reason
    # The script returns a Result, then the rule's plaintext fails: the rule is skipped, unnamed.
    skipped = compile_policy({"apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "a"}, "spec": {
        "overrideRules": [{"failurePolicy": "Ignore", "overriders": {
            "javascript": {"source": ECHO, "marker": {"annotation": MARK, "name": "a"}},
            "plaintext": [{"op": "replace", "path": "/spec/missing", "value": 1}]}}]}})
    echo = policy(ECHO, "ClusterOverridePolicy", "b", marker={"annotation": MARK, "name": "b"})
    m = overriding.mutate([(skipped, skipped.rules[0]), (echo, echo.rules[0])], pod("p"),
                          {"request": {"operation": "CREATE"}, "oldObject": None})
    assert m.ignored and m.object["metadata"]["annotations"] == {MARK: "b"}


def test_a_native_javascript_rule_writes_no_marker_and_only_overriders_may_have_one() -> None:
    native = policy(ECHO, "ClusterOverridePolicy")
    m = overriding.mutate([(native, native.rules[0])], pod("p"),
                          {"request": {"operation": "CREATE"}, "oldObject": None})
    assert m.patch == [] and "annotations" not in m.object["metadata"]
    with pytest.raises(PolicyErrors, match=r"javascript\.marker: only an overrider"):
        policy("function jsa_validate() {}", marker={"annotation": MARK, "name": "x"})
    with pytest.raises(PolicyErrors, match=r"marker\.annotation: must be an annotation key"):
        policy(ECHO, "ClusterOverridePolicy", marker={"annotation": "bad key!", "name": "x"})
