"""JavaScript rules: the sandbox's limits, parameter binding, the {Allowed, Message, Result} contract,
the patch built through the draft, and the errors a policy is refused with."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.evaluation import jsruntime
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rules import jsrules
from kinitiras_py.engine.running import overriding, validating

API = "policy.kcloudlabs.io/v1alpha1"
POD: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]}}


def override(source: str, name: str = "js", failure: str = "Fail", kind: str = "ClusterOverridePolicy",
             **limits: int) -> CompiledPolicy:
    meta: Obj = {"name": name} if kind.startswith("Cluster") else {"name": name, "namespace": "team-a"}
    return compile_policy({"apiVersion": API, "kind": kind, "metadata": meta, "spec": {"overrideRules": [
        {"failurePolicy": failure, "overriders": {"javascript": {"source": source, **limits}}}]}})


def validate_policy(source: str, failure: str = "Fail") -> CompiledPolicy:
    return compile_policy({"apiVersion": API, "kind": "ClusterValidatePolicy", "metadata": {"name": "v"},
                           "spec": {"validateRules": [{"failurePolicy": failure, "javascript": {"source": source}}]}})


def variables(op: str = "CREATE", old: Obj | None = None) -> dict[str, Any]:
    return {"request": {"operation": op}, "oldObject": old}


def run(policy: CompiledPolicy, obj: Obj = POD, op: str = "CREATE", old: Obj | None = None) -> Any:
    return overriding.mutate([(policy, policy.rules[0])], obj, variables(op, old))


def check(policy: CompiledPolicy, obj: Obj = POD, op: str = "CREATE") -> Any:
    return validating.validate([(policy, policy.rules[0])], {**variables(op), "object": obj})


def refusal(source: str, **limits: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyErrors) as e:
        override(source, **limits)
    return [(err.path, err.reason) for err in e.value.errors]


SOURCE_PATH = "spec.overrideRules[0].overriders.javascript.source"


@pytest.fixture(autouse=True)
def scripts_finished() -> Iterator[None]:
    """After each test, wait until the scripts it left running to their limits (a caller stops
    waiting before a runaway's CPU time is spent on a busy machine) have stopped: the loads of later
    tests are timed, and must not queue behind them."""
    yield
    for pool in list(jsruntime._pools):
        pool.submit(lambda: None).result()


# -- the result becomes a patch, applied through the draft ------------------------------------


def test_result_replaces_the_object_and_the_patch_turns_the_received_object_into_it() -> None:
    policy = override("""function jsa_mutate(obj) {
        obj.metadata.labels.b = "2"; delete obj.metadata.labels.a;
        obj.spec.containers.push({name: "sidecar", image: "s"});
        return {Allowed: true, Result: obj};
    }""")
    received = copy.deepcopy(POD)
    m = run(policy, received)
    assert received == POD  # never modified
    assert m.object["metadata"]["labels"] == {"b": "2"}
    assert [c["name"] for c in m.object["spec"]["containers"]] == ["c", "sidecar"]
    assert jsonpatch.apply_patch(POD, m.patch) == m.object  # strict RFC 6902, as the API server
    assert {op["path"] for op in m.patch} == {"/metadata/labels/a", "/metadata/labels/b", "/spec/containers/1"}


def test_an_unchanged_result_gives_an_empty_patch_even_for_numbers_js_cannot_tell_apart() -> None:
    obj = copy.deepcopy(POD)
    obj["spec"]["priority"] = 2.0  # JSON.stringify writes 2
    obj["spec"]["big"] = 2 ** 60 + 1  # a script sees the nearest double
    m = run(override("function jsa_mutate(obj) { return {Allowed: true, Result: obj} }"), obj)
    assert m.patch == []
    assert m.object is obj


def test_no_result_allowed_without_a_patch_and_a_falsy_allowed_that_is_not_false_allows() -> None:
    for body in ("return;", "return null;", "return 42;", "return {Allowed: 0, Message: 'no'};",
                 "return {Allowed: 'false'};", "return {Allowed: null};", "return {Allowed: true};"):
        m = run(override(f"function jsa_mutate(obj) {{ {body} }}"))
        assert m.failure is None, body
        assert m.patch == [], body


def test_allowed_false_denies_with_the_message_and_stops_the_chain_whatever_the_failure_policy() -> None:
    first = override("function jsa_mutate() { return {Allowed: false, Message: 'no pods today'} }", "a",
                     failure="Ignore")
    second = override("function jsa_mutate(obj) { obj.metadata.labels.z = '1'; return {Result: obj} }", "b")
    m = overriding.mutate([(first, first.rules[0]), (second, second.rules[0])], POD, variables())
    assert m.failure is not None and not m.failure.ignored
    assert m.failure.reason == "no pods today"
    assert m.patch == [] and m.object is POD


def test_allowed_false_without_a_message_names_the_function() -> None:
    m = run(override("function jsa_mutate() { return {Allowed: false} }"))
    assert m.failure is not None and m.failure.reason == "denied by jsa_mutate"


def test_op_is_a_plain_string_and_parameters_are_bound_by_name_in_any_order() -> None:
    policy = override("""function jsa_mutate(state, old, obj, sync, op) {
        obj.metadata.labels.seen = [typeof op, op, op === "UPDATE", typeof sync, sync, JSON.stringify(state),
                                    old.metadata.labels.a].join(",");
        return {Result: obj};
    }""")
    m = run(policy, op="UPDATE", old=POD)
    assert m.object["metadata"]["labels"]["seen"] == "string,UPDATE,true,boolean,true,{},1"


def test_arrow_functions_and_top_level_const_are_found() -> None:
    m = run(override("const jsa_mutate = (obj, op) => ({Result: {...obj, metadata: {...obj.metadata, "
                     "annotations: {op}}}});"))
    assert m.object["metadata"]["annotations"] == {"op": "CREATE"}


def test_modern_syntax_and_array_push_work() -> None:
    m = run(override("""function jsa_mutate(obj) {
        const names = [];
        for (const {name} of obj.spec.containers) names.push(name);
        obj.metadata.annotations ??= {};
        obj.metadata.annotations.names = names.join() + `:${obj.spec?.missing?.x ?? "none"}`;
        class Counter { #n = 0; inc() { return ++this.#n; } }
        obj.metadata.annotations.count = String(new Counter().inc());
        return {Result: obj};
    }"""))
    assert m.object["metadata"]["annotations"] == {"names": "c:none", "count": "1"}


def test_state_is_kept_only_by_a_function_that_declares_sync() -> None:
    kept = override("function jsa_mutate(obj, sync, state) { state.n = (state.n || 0) + 1; "
                    "obj.metadata.labels.n = String(state.n); return {Result: obj}; }")
    assert [run(kept).object["metadata"]["labels"]["n"] for _ in range(3)] == ["1", "2", "3"]
    frozen = override("function jsa_mutate(obj, state) { state.n = (state.n || 0) + 1; "
                      "obj.metadata.labels.n = String(state.n); return {Result: obj}; }")
    assert [run(frozen).object["metadata"]["labels"]["n"] for _ in range(2)] == ["undefined"] * 2  # read-only
    strict = override("'use strict'; function jsa_mutate(obj, state) { state.n = 1; }")
    assert "not extensible" in str(run(strict).failure)


def test_a_result_that_is_not_an_object_of_the_same_kind_is_a_rule_error() -> None:
    for result, reason in (("5", "not an object with apiVersion and kind"),
                           ("{kind: 'Pod'}", "not an object with apiVersion and kind"),
                           ("[obj]", "not an object with apiVersion and kind"),
                           ("{...obj, kind: 'Service'}", "kind is 'Service'"),
                           ("{...obj, n: 1e20}", "holds the integer 100000000000000000000, beyond 64 bits"),
                           ("(() => { let a = []; for (let i = 0; i < 300; i++) a = [a]; return {...obj, a} })()",
                            "is nested deeper than 200 levels")):
        m = run(override(f"function jsa_mutate(obj) {{ return {{Result: {result}}} }}"))
        assert m.failure is not None and reason in m.failure.reason, (result, m.failure)
        assert m.object is POD


# -- errors and limits --------------------------------------------------------------------------


def test_a_throw_is_a_rule_error_under_the_failure_policy() -> None:
    source = "function jsa_mutate(obj) {\n  throw new Error('broken ' + obj.kind);\n}"
    m = run(override(source))
    assert m.failure is not None and not m.failure.ignored
    assert "Error: broken Pod" in m.failure.reason and "line 2" in m.failure.reason
    ignored = run(override(source, failure="Ignore"))
    assert ignored.failure is None and ignored.patch == []
    assert ignored.ignored and "broken Pod" in ignored.ignored[0].reason


def test_the_time_limit_stops_a_script_and_the_next_call_starts_afresh() -> None:
    policy = override("""var calls = 0;
    function jsa_mutate(obj) {
        calls++;
        if (obj.metadata.name === "spin") while (true) {}
        obj.metadata.labels.calls = String(calls);
        return {Result: obj};
    }""", timeoutMs=50)
    assert run(policy).object["metadata"]["labels"]["calls"] == "1"
    spinning = copy.deepcopy(POD)
    spinning["metadata"]["name"] = "spin"
    started = time.process_time()  # CPU time: what the limit bounds, whatever the machine's load
    m = run(policy, spinning)
    assert time.process_time() - started < 1.0
    assert m.failure is not None and "ran longer than its 50 ms limit" in m.failure.reason
    # The interrupted context was dropped: the script was loaded again, its globals anew.
    assert run(policy).object["metadata"]["labels"]["calls"] == "1"


def test_the_default_time_limit_is_100_ms() -> None:
    started = time.process_time()  # CPU time: what the limit bounds, whatever the machine's load
    m = run(override("function jsa_mutate() { while (true) {} }"))
    assert m.failure is not None and "100 ms limit" in m.failure.reason
    assert time.process_time() - started < 1.0


def test_a_getter_in_the_result_runs_under_the_time_limit() -> None:
    m = run(override("function jsa_mutate() { return { get Allowed() { while (true) {} } } }", timeoutMs=30))
    assert m.failure is not None and "30 ms limit" in m.failure.reason


def test_the_memory_limit_stops_a_script() -> None:
    m = run(override("function jsa_mutate() { const a = []; while (true) a.push('x'.repeat(4096) + a.length); }",
                     memoryLimitMiB=4, timeoutMs=2000))
    assert m.failure is not None and "more than its 4 MiB memory limit" in m.failure.reason


def test_deep_recursion_is_a_rule_error() -> None:
    m = run(override("function f(n) { return f(n + 1) + 1 } function jsa_mutate() { f(0) }"))
    assert m.failure is not None and "stack overflow" in m.failure.reason


def test_results_json_cannot_hold_are_rule_errors_or_null() -> None:
    m = run(override("function jsa_mutate(obj) { return {Result: {...obj, n: 1n}} }"))
    assert m.failure is not None and "BigInt" in m.failure.reason
    cyclic = run(override("function jsa_mutate(obj) { obj.self = obj; return {Result: obj} }"))
    assert cyclic.failure is not None and "circular" in cyclic.failure.reason
    assert run(override("function jsa_mutate() { return () => 1 }")).failure is None


def test_the_request_deadline_bounds_every_script() -> None:
    policy = override("function jsa_mutate() { while (true) {} }", timeoutMs=2000)
    started = time.monotonic()
    with jsrules.request_deadline(0.05):
        m = run(policy)
    assert time.monotonic() - started < 1.5  # the script's own limit is 2 s
    assert m.failure is not None and "limit" in m.failure.reason
    echo = override("function jsa_mutate(obj) { return {Result: obj} }")  # loading, too, is bounded by a deadline
    with jsrules.request_deadline(-1):
        spent = run(echo)
    assert spent.failure is not None and "no time is left" in spent.failure.reason


def test_there_is_no_file_network_timer_or_module_access() -> None:
    probe = ("[typeof setTimeout, typeof setInterval, typeof require, typeof fetch, typeof process, typeof std, "
             "typeof os, typeof XMLHttpRequest, typeof importScripts].join()")
    m = run(override(f"function jsa_mutate(obj) {{ obj.metadata.labels.g = {probe}; return {{Result: obj}} }}"))
    assert set(m.object["metadata"]["labels"]["g"].split(",")) == {"undefined"}
    assert "SyntaxError" in " ".join(r for _, r in refusal("import * as os from 'os'; function jsa_mutate() {}"))


# -- refused at admission -----------------------------------------------------------------------


def test_a_syntax_error_refuses_the_policy_with_its_line() -> None:
    assert refusal("function jsa_mutate(obj) {\n  const x = ;\n  return x;\n}") == [
        (SOURCE_PATH, "line 2: SyntaxError: unexpected token in expression: ';'")]


def test_a_top_level_throw_refuses_the_policy_with_its_line() -> None:
    [(path, reason)] = refusal("\nvar config = JSON.parse('{');\nfunction jsa_mutate() {}")
    assert path == SOURCE_PATH and reason.startswith("line 2: SyntaxError")


def test_a_top_level_loop_is_stopped_at_admission() -> None:
    [(path, reason)] = refusal("while (true) {}\nfunction jsa_mutate() {}", timeoutMs=20)
    assert path == SOURCE_PATH and reason == "line 1: the script's top level ran longer than its 20 ms limit"


def test_loading_runs_the_top_level_for_at_most_500_ms_whatever_the_rule_limit() -> None:
    # Stopped by its CPU-time limit: offline, the wall-time wait is generous enough for a busy
    # machine (how a deadline bounds it is in test_javascript_waits.py).
    [(_path, reason)] = refusal("while (true) {}\nfunction jsa_mutate() {}", timeoutMs=2000)
    assert reason == "line 1: the script's top level ran longer than its 500 ms limit"


def test_the_function_must_exist_with_parameters_bound_by_name() -> None:
    assert refusal("function jsa_validate(obj) {}") == [
        (SOURCE_PATH, "the script must define a function jsa_mutate; it is undefined (jsa_validate runs in a "
                      "validate rule)")]
    assert refusal("var jsa_mutate = 3") == [(SOURCE_PATH, "the script must define a function jsa_mutate; "
                                                           "it is number")]
    [(_, unknown)] = refusal("function jsa_mutate(op, object) {}")
    assert "parameter 'object' is not one it is given" in unknown
    [(_, default)] = refusal("function jsa_mutate(op = 'CREATE', obj) {}")
    assert "write plain names" in default
    [(_, twice)] = refusal("function jsa_mutate(obj, obj) {}")
    assert "named twice" in twice


def test_limits_are_bounded() -> None:
    found = refusal("function jsa_mutate() {}", timeoutMs=0, memoryLimitMiB=100000)
    assert ("spec.overrideRules[0].overriders.javascript.timeoutMs", "must be from 1 to 2000; got 0") in found
    assert ("spec.overrideRules[0].overriders.javascript.memoryLimitMiB",
            "must be from 1 to 256; got 100000") in found


def test_watch_hooks_need_selectors_naming_their_kinds() -> None:
    with pytest.raises(PolicyErrors) as e:
        override("function jsa_init(state) {} function jsa_created(obj) {} function jsa_mutate() {}")
    assert e.value.errors[0].path == "spec.resourceSelectors" and "watch hooks" in e.value.errors[0].reason
    assert override("function jsa_init(state) { state.n = 1 } function jsa_mutate() {}").warnings == ()


def test_parameters_of_reads_every_function_form() -> None:
    assert jsrules.parameters_of("function jsa_mutate(op, /* the pod */ obj) {}", "f") == ("op", "obj")
    assert jsrules.parameters_of("async function jsa_mutate ( obj ) {}", "f") == ("obj",)
    assert jsrules.parameters_of("obj => obj", "f") == ("obj",)
    assert jsrules.parameters_of("(op,\n obj) => 1", "f") == ("op", "obj")
    assert jsrules.parameters_of("jsa_mutate(sync, state) { }", "f") == ("sync", "state")
    with pytest.raises(ValueError, match="plain names"):
        jsrules.parameters_of("function f({metadata}) {}", "f")
    with pytest.raises(ValueError, match="parentheses"):
        jsrules.parameters_of("class X {}", "f")


# -- validate rules -----------------------------------------------------------------------------


def test_jsa_validate_denies_only_with_allowed_exactly_false() -> None:
    denying = validate_policy("function jsa_validate(op, obj) { if (op === 'CREATE') "
                              "return {Allowed: false, Message: obj.metadata.name + ' refused'} }")
    verdict = check(denying)
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy v: p refused"
    assert check(denying, op="UPDATE").allowed
    assert check(validate_policy("function jsa_validate() { return {Allowed: 0} }")).allowed
    assert not check(validate_policy("function jsa_validate() { return {Allowed: false} }")).allowed


def test_a_failing_jsa_validate_follows_the_failure_policy() -> None:
    failing = check(validate_policy("function jsa_validate() { throw new TypeError('bad') }"))
    assert not failing.allowed and "TypeError: bad" in failing.message
    ignored = check(validate_policy("function jsa_validate() { throw new TypeError('bad') }", failure="Ignore"))
    assert ignored.allowed and ignored.ignored


# -- order --------------------------------------------------------------------------------------


def test_javascript_only_policies_run_namespaced_then_cluster_each_by_name() -> None:
    def tagger(name: str, kind: str) -> CompiledPolicy:
        return override(f"function jsa_mutate(obj) {{ obj.metadata.labels.order = (obj.metadata.labels.order || '') "
                        f"+ '{name},'; return {{Result: obj}} }}", name, kind=kind)
    policies = [tagger("b-cluster", "ClusterOverridePolicy"), tagger("a-cluster", "ClusterOverridePolicy"),
                tagger("b-ns", "OverridePolicy"), tagger("a-ns", "OverridePolicy")]
    cel_policy = compile_policy({"apiVersion": API, "kind": "OverridePolicy",
                                 "metadata": {"name": "z-cel", "namespace": "team-a"}, "spec": {"overrideRules": [
                                     {"overriders": {"plaintext": [{"op": "add", "path": "/metadata/labels/order",
                                                                     "value": "cel,"}]}}]}})
    ordered = sorted([*policies, cel_policy], key=CompiledPolicy.sort_key)
    m = overriding.mutate([(p, p.rules[0]) for p in ordered], POD, variables())
    assert m.object["metadata"]["labels"]["order"] == "cel,a-ns,b-ns,a-cluster,b-cluster,"


def test_scripts_run_on_their_own_thread_whichever_thread_calls() -> None:
    import concurrent.futures

    policy = override("function jsa_mutate(obj) { obj.metadata.labels.t = 'ok'; return {Result: obj} }")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: run(policy), range(16)))
    assert all(r.failure is None and r.object["metadata"]["labels"]["t"] == "ok" for r in results)


def test_a_runaway_script_does_not_hold_up_scripts_on_other_threads() -> None:
    import concurrent.futures

    spin = override("function jsa_mutate() { while (true) {} }", "spin", timeoutMs=1500)
    quick = [override("function jsa_mutate(obj) { return {Result: obj} }", f"quick-{i}")
             for i in range(jsruntime.THREADS)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        spinning = pool.submit(run, spin)
        time.sleep(0.05)
        started = time.monotonic()
        assert all(run(p).failure is None for p in quick if p.rules[0].javascript.script._thread
                   != spin.rules[0].javascript.script._thread)
        assert time.monotonic() - started < 1.0
        assert spinning.result().failure is not None


def test_load_errors_carry_the_line() -> None:
    with pytest.raises(jsruntime.JsLoadError) as e:
        jsruntime.Script("\n\n  }").load(())
    assert e.value.line == 3


def test_the_logging_utilities_write_to_our_log_bounded(caplog: pytest.LogCaptureFixture) -> None:
    policy = override("""function jsa_mutate(obj) {
        jsa_log("pod", obj.metadata.name, {a: 1});
        jsa_logf("%s has %d containers", obj.metadata.name, obj.spec.containers.length, "extra");
        jsa_debug("debugging");
        for (let i = 0; i < 100; i++) jsa_log("line " + i);
    }""", name="logger")
    with caplog.at_level("DEBUG", logger="kinitiras_py.javascript"):
        assert run(policy).failure is None
    lines = [r.getMessage() for r in caplog.records if r.name == "kinitiras_py.javascript"]
    assert lines[:3] == ['pod p {"a":1}', "p has 1 containers extra", "debugging"]
    assert len(lines) == jsruntime.LOG_LINES + 1 and "the rest are dropped" in lines[-1]
    assert caplog.records[0].script == "ClusterOverridePolicy logger: spec.overrideRules[0].overriders.javascript"




@pytest.mark.parametrize(("field", "value"), [("timeoutMs", 0), ("memoryLimitMiB", "64"), ("stateLimitKiB", True),
                                              ("marker", "jsadmissions.momiji.com/mutate")])
def test_a_limit_or_marker_the_model_refuses_leaves_the_script_unloaded(field: str, value: Any) -> None:
    """The model leaves the field out: loading the script anyway would report what it does under
    a default not written (here, that it is not JavaScript)."""
    found = refusal("this is not javascript", **{field: value})
    assert [path for path, _ in found] == [f"spec.overrideRules[0].overriders.javascript.{field}"]
    assert refusal("this is not javascript")[0][0] == SOURCE_PATH


def test_a_bad_marker_leaves_the_script_unloaded() -> None:
    bad = {"annotation": "not a key!", "name": "r"}
    found = refusal("this is not javascript", marker=bad)
    assert [path for path, _ in found] == ["spec.overrideRules[0].overriders.javascript.marker.annotation"]
    found = refusal("this is not javascript", marker=bad, timeoutMs=0)  # checked, though not loaded
    assert [path for path, _ in found] == ["spec.overrideRules[0].overriders.javascript.timeoutMs",
                                           "spec.overrideRules[0].overriders.javascript.marker.annotation"]
