"""Fuzz: arbitrary JavaScript sources and results, against the policy checker and the engine.

Invariants:

* a ``javascript`` field with any source text (fragments of scripts spliced at random, any
  text) is accepted or refused with PolicyErrors naming ``...javascript.source`` or a limit;
* whatever an accepted ``jsa_mutate`` returns or does (any JSON, non-JSON values, getters,
  throws, loops, huge or deep values), ``overriding.mutate`` returns a Mutation: either a rule
  failure, with the received object untouched, or a patch that replays strictly (RFC 6902) to
  the final object; ``jsa_validate`` likewise always gives a Verdict;
* nothing takes much longer than the scripts' time limit.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import jsonpatch
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine import overriding, validating
from kinitiras_py.engine.compiling import compile_policy

API = "policy.kcloudlabs.io/v1alpha1"
POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}],
                                "priority": 1.5, "big": 2 ** 62 + 1}}
FRAGMENTS = ["function jsa_mutate(op, obj) {", "function jsa_validate(obj) {", "}", "{", "(", ")", ";", "return",
             "obj", "op", "=>", "const x = ", "let ", "var ", "while (true) {}", "throw new Error('x')", "`", "'",
             '"', "/*", "*/", "//", "\n", "class", "async", "await", "yield", "import", "export", "${", "?.",
             "??=", "#x", "function jsa_mutate(obj, obj) {}", "function jsa_mutate({a}) {}", "jsa_init", "\u2028",
             "\x00", "é", "return {Allowed: false}", "return {Result: obj}", "delete obj.metadata;"]
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
