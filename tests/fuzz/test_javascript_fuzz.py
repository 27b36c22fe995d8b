"""Fuzz: arbitrary JavaScript sources and results, against the policy checker and the engine.

Invariants:

* a ``javascript`` field with any source text (fragments of scripts spliced at random, any
  text) is accepted or refused with PolicyErrors naming ``...javascript.source`` or a limit;
* whatever an accepted ``jsa_mutate`` returns or does (any JSON, non-JSON values, getters,
  throws, loops, huge or deep values), ``overriding.mutate`` returns a Mutation: either a rule
  failure, with the received object untouched, or a patch that replays strictly (RFC 6902) to
  the final object; ``jsa_validate`` likewise always gives a Verdict;
* nothing takes much longer than the scripts' time limit;
* watch hooks (``jsa_init``, ``jsa_created``, ``jsa_updated``, ``jsa_deleted``) doing anything to
  ``state``, fed any sequence of events, never raise: the state stays JSON within its bound, and
  the rule that reads it answers a Verdict (failing clearly once the bound is passed); the same
  through ``kinitiras-py apply --context`` ends in exit 0, 1 or 2, never a traceback.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.cli.main import main
from kinitiras_py.convert import registry
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding, validating, watchhooks

API = "policy.kcloudlabs.io/v1alpha1"
POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}],
                                "priority": 1.5, "big": 2 ** 62 + 1}}
FRAGMENTS = ["function jsa_mutate(op, obj) {", "function jsa_validate(obj) {", "}", "{", "(", ")", ";", "return",
             "obj", "op", "=>", "const x = ", "let ", "var ", "while (true) {}", "throw new Error('x')", "`", "'",
             '"', "/*", "*/", "//", "\n", "class", "async", "await", "yield", "import", "export", "${", "?.",
             "??=", "#x", "function jsa_mutate(obj, obj) {}", "function jsa_mutate({a}) {}", "jsa_init", "\u2028",
             "\x00", "é", "return {Allowed: false}", "return {Result: obj}", "delete obj.metadata;",
             "function jsa_created(obj, sync, state) {", "function jsa_init(state) {", "function jsa_deleted(op) {",
             "state.n = 1;", "function jsa_updated(obj, old) {"]
# Expressions a jsa_mutate may return; `obj` is the object as the script received it.
RESULTS = ["undefined", "null", "0", "''", "'x'", "[]", "{}", "obj", "{Allowed: true}", "{Allowed: false}",
           "{Allowed: false, Message: 7}", "{Allowed: 'false'}", "{Result: null}", "{Result: 5}", "{Result: []}",
           "{Result: obj}", "{Result: {}}", "{Result: {...obj, kind: 'Service'}}", "{Result: {kind: 'Pod'}}",
           "{Result: {...obj, apiVersion: 1}}", "{Result: {...obj, metadata: null}}",
           "{Result: {...obj, spec: {containers: obj.spec.containers.concat(obj.spec.containers)}}}",
           "{Result: {...obj, spec: {...obj.spec, containers: []}}}",
           "{Result: {...obj, spec: {...obj.spec, priority: 1, big: 3}}}",
           "{Result: {...obj, extra: {'a/b': {'~c': [1, 2.5, true, null, 'é']}}}}",
           "{Result: {...obj, metadata: {...obj.metadata, labels: {'': ''}}}}",
           "{Result: {...obj, n: 1n}}", "{Result: {...obj, s: Symbol('x')}}", "{Result: {...obj, f: () => 1}}",
           "{Result: {...obj, u: undefined, nan: NaN, inf: -Infinity, d: new Date(0)}}",
           "{Result: {...obj, big: 'x'.repeat(100000)}}", "{get Result() { throw new Error('getter') }}",
           "{get Allowed() { while (true) {} }}", "{toJSON() { return {Allowed: false, Message: 'json'} }}",
           "(() => { const o = {...obj}; o.self = o; return {Result: o} })()",
           "(() => { let a = []; for (let i = 0; i < 5000; i++) a = [a]; return {Result: {...obj, a}} })()",
           "(() => { let a = []; for (let i = 0; i < 500; i++) a = [a]; return {Result: {...obj, a}} })()",
           "(() => { let a = []; for (let i = 0; i < 150; i++) a = [a]; return {Result: {...obj, a}} })()",
           "{Result: {...obj, n: 1e20, m: -(2 ** 63), k: 2 ** 63}}", "{Result: {...obj, n: 9007199254740993}}",
           "new Proxy({}, {get() { throw 1 }})", "Promise.resolve({Allowed: false})",
           "(() => { throw null })()", "(() => { throw {Allowed: false} })()"]

# Results that are well formed: they must never fail the rule.
WELL_FORMED = {"undefined", "null", "0", "''", "'x'", "[]", "{}", "obj", "{Allowed: true}", "{Allowed: 'false'}",
               "{Result: null}", "{Result: obj}", "{Result: {...obj, spec: {...obj.spec, containers: []}}}",
               "{Result: {...obj, spec: {...obj.spec, priority: 1, big: 3}}}",
               "{Result: {...obj, extra: {'a/b': {'~c': [1, 2.5, true, null, 'é']}}}}",
               "{Result: {...obj, metadata: {...obj.metadata, labels: {'': ''}}}}",
               "{Result: {...obj, spec: {containers: obj.spec.containers.concat(obj.spec.containers)}}}",
               "{Result: {...obj, s: Symbol('x')}}", "{Result: {...obj, f: () => 1}}",
               "{Result: {...obj, u: undefined, nan: NaN, inf: -Infinity, d: new Date(0)}}",
               "{Result: {...obj, big: 'x'.repeat(100000)}}", "Promise.resolve({Allowed: false})",
               "(() => { let a = []; for (let i = 0; i < 150; i++) a = [a]; return {Result: {...obj, a}} })()",
               "{Result: {...obj, n: 9007199254740993}}"}


def policy(kind: str, source: str, **limits: Any) -> dict[str, Any]:
    if kind == "ClusterValidatePolicy":
        spec: dict[str, Any] = {"validateRules": [{"javascript": {"source": source, **limits}}]}
    else:
        spec = {"overrideRules": [{"overriders": {"javascript": {"source": source, **limits}}}]}
    spec["resourceSelectors"] = [{"apiVersion": "v1", "kind": "Pod"}]  # what watch hooks follow
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "fuzz"}, "spec": spec}


@given(st.sampled_from(["ClusterOverridePolicy", "ClusterValidatePolicy"]),
       st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join) | st.text(max_size=40)
       | st.sampled_from(["\ud800", "function jsa_mutate() {}\ud800", "a\x00b"]))
def test_any_source_is_accepted_or_refused_by_field(kind: str, source: str) -> None:
    started = time.monotonic()
    try:
        compile_policy(policy(kind, source, timeoutMs=20))
    except PolicyErrors as e:
        assert e.errors
        for err in e.errors:
            assert err.path.endswith(".javascript.source"), (err.path, err.reason)
            assert err.reason.strip()
    assert time.monotonic() - started < 2.0


@given(st.sampled_from(RESULTS), st.sampled_from(["op", "obj", "op, obj", "obj, old, sync, state", ""]),
       st.booleans(), st.sampled_from(["CREATE", "UPDATE"]))
def test_any_result_gives_a_mutation_and_a_patch_that_replays(result: str, params: str, mutate_first: bool,
                                                              operation: str) -> None:
    prelude = "obj.metadata.labels.touched = 'yes';" if mutate_first and "obj" in params else ""
    compiled = compile_policy(policy("ClusterOverridePolicy",
                                     f"function jsa_mutate({params}) {{ {prelude} return {result}; }}",
                                     timeoutMs=50))
    received = copy.deepcopy(POD)
    started = time.monotonic()
    m = overriding.mutate([(compiled, compiled.rules[0])], received,
                          {"request": {"operation": operation}, "oldObject": POD})
    assert time.monotonic() - started < 2.0
    assert received == POD
    if m.failure is not None:
        bound = "obj" in params.split(", ") or "obj" not in result
        assert not (bound and result in WELL_FORMED), (result, m.failure.reason)
        assert m.object is received and m.patch == []
        assert isinstance(m.failure.reason, str) and m.failure.reason
    else:
        assert jsonpatch.apply_patch(POD, m.patch) == m.object


@given(st.sampled_from(RESULTS), st.sampled_from(["ClusterValidatePolicy"]))
def test_any_result_of_jsa_validate_gives_a_verdict(result: str, kind: str) -> None:
    compiled = compile_policy(policy(kind, f"function jsa_validate(obj) {{ return {result}; }}", timeoutMs=50))
    verdict = validating.validate([(compiled, compiled.rules[0])], {"object": POD, "request": {"operation": "CREATE"}})
    assert isinstance(verdict.allowed, bool)
    assert verdict.allowed or "ClusterValidatePolicy fuzz" in verdict.message


# What a hook may do to its state (and what it may throw or spin on).
STATEMENTS = ["state.n = (state.n || 0) + 1;", "state.log = (state.log || '') + obj.metadata.name;",
              "state.big = 'x'.repeat(2000);", "state.list = (state.list || []).concat([obj]);",
              "delete state.n;", "state.self = state;", "state.b = 1n;", "state.f = () => 1;",
              "state.d = new Date(0);", "state.toJSON = () => undefined;", "state.nan = NaN;",
              "Object.freeze(state);", "throw new Error('hook');", "while (true) {}", "state = null;",
              "jsa_log('seen', obj.metadata.name, state);",
              "state.deep = JSON.parse('['.repeat(3000) + ']'.repeat(3000));",
              "for (const k in state) delete state[k];", "state.old = old && old.metadata.name;"]
HEADS = {"jsa_init": ["state"], "jsa_created": ["obj", "sync", "state"],
         "jsa_updated": ["obj", "old", "sync", "state"], "jsa_deleted": ["obj", "sync", "state"]}
ODD = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"}},
       {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "é\u2028", "namespace": "default", "labels": {"x": "1"}}},
       {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n", "namespace": "default"}, "spec": {"n": 2 ** 62}},
       {"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "v1", "kind": "Pod", "metadata": None}]

hook_bodies = st.dictionaries(st.sampled_from(sorted(HEADS)),
                              st.tuples(st.booleans(), st.lists(st.sampled_from(STATEMENTS), max_size=3)), max_size=4)
events = st.lists(st.tuples(st.sampled_from(["created", "updated", "deleted"]), st.sampled_from(ODD),
                            st.sampled_from(ODD)), max_size=6)


def stateful(bodies: dict[str, tuple[bool, list[str]]]) -> str:
    functions = [f"function {hook}({', '.join(p for p in HEADS[hook] if p != 'sync' or keep)}) {{ {''.join(body)} }}"
                 for hook, (keep, body) in bodies.items()]
    return "\n".join([*functions, "function jsa_validate(obj, state) { return {Allowed: !state || !state.stop, "
                       "Message: JSON.stringify(state).slice(0, 50)}; }"])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(hook_bodies, events)
def test_hooks_doing_anything_to_state_keep_it_bounded_and_never_raise(bodies: dict[str, tuple[bool, list[str]]],
                                                                       sequence: list[tuple[str, Any, Any]]) -> None:
    compiled = compile_policy(policy("ClusterValidatePolicy", stateful(bodies), timeoutMs=20, stateLimitKiB=1))
    hooks = compiled.rules[0].javascript.hooks
    assert hooks is not None
    started = time.monotonic()
    if hooks.watches:
        hooks.start([ODD[0], ODD[2]]).result()
    for event, obj, old in sequence:
        if event == "updated":
            hooks.updated(obj, old)
        else:
            getattr(hooks, event)(obj)
    hooks.script.queue(lambda: None).result()
    assert len(hooks.state.text) <= 1024 and isinstance(orjson.loads(hooks.state.text), dict)
    verdict = validating.validate([(compiled, compiled.rules[0])], {"object": POD, "request": {"operation": "CREATE"}})
    assert isinstance(verdict.allowed, bool) and "Traceback" not in verdict.message
    assert verdict.allowed or "ClusterValidatePolicy fuzz" in verdict.message
    assert time.monotonic() - started < 2.0 + 0.05 * len(sequence)


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(hook_bodies, st.lists(st.sampled_from([*ODD, {"kind": "HTTPResponse", "url": "http://x", "body": "{}"}]),
                             max_size=4))
def test_apply_with_context_objects_and_hooks_never_ends_in_a_traceback(bodies: dict[str, tuple[bool, list[str]]],
                                                                        context: list[Any]) -> None:
    with tempfile_dir() as here:
        (here / "p.yaml").write_text(json.dumps(policy("ClusterValidatePolicy", stateful(bodies), timeoutMs=20,
                                                       stateLimitKiB=1)))
        (here / "c.yaml").write_text(yaml.safe_dump_all(context))
        (here / "r.yaml").write_text(json.dumps(POD))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["apply", "--policy", str(here / "p.yaml"), "--resource", str(here / "r.yaml"),
                         "--context", str(here / "c.yaml")])
    assert code in (0, 1, 2), err.getvalue()
    assert "Traceback" not in out.getvalue() + err.getvalue()


@contextlib.contextmanager
def tempfile_dir() -> Any:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def test_the_watched_kinds_are_those_selected() -> None:
    compiled = compile_policy(policy("ClusterValidatePolicy", stateful({"jsa_created": (True, [])})))
    assert watchhooks.kinds(compiled) == [("v1", "Pod")]


KIND_PARTS = ["v1", "apps", "batch", "/", ".", "pods", "Pod", "deployments", "Deployment", "cronjobs", "v2", "", " ",
              "networking.k8s.io", "ingresses", "é", "*"]


@given(st.lists(st.lists(st.sampled_from(KIND_PARTS), max_size=5).map("".join) | st.integers() | st.none(),
                max_size=4),
       st.sampled_from([ODD[0]["metadata"], {"name": "n", "namespace": "team-a"}]))
def test_any_kinds_of_a_jsadmission_convert_or_are_reported_by_index(kinds: list[Any], meta: dict[str, Any]) -> None:
    doc = {"apiVersion": "momiji.com/v1", "kind": "JsAdmission", "metadata": meta,
           "spec": {"kinds": kinds, "js": "function jsa_created(obj, sync, state) { state.n = 1 }\n"
                                         "function jsa_mutate(obj) { return {Result: obj} }"}}
    result = registry.convert_all([doc], "in.yaml")
    for problem in result.problems:
        assert problem.field.startswith("spec.kinds") and problem.reason, problem
    if not result.problems:
        for converted in result.documents:
            compile_policy(converted)  # every selector names an apiVersion and a kind
