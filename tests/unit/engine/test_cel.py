"""The CEL adapter (engine.evaluation.cel) and its function library (engine.evaluation.celext)."""

from __future__ import annotations

import gc
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kinitiras_py.base.errors import CelCompileError, CelEvalError
from kinitiras_py.engine.evaluation import celext
from kinitiras_py.engine.evaluation.cel import (
    MAX_SOURCE_BYTES,
    Program,
    check_syntax,
    compile_program,
)
from kinitiras_py.engine.evaluation.celenv import VARIABLES

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "prod", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {"name": "app", "image": "nginx:1.27",
             "resources": {"limits": {"cpu": "1500m", "memory": "4Gi"}}},
            {"name": "sidecar", "image": "busybox", "imagePullPolicy": "Always"},
        ],
    },
}


def ev(source: str, **variables: Any) -> Any:
    return compile_program(source).evaluate(variables)


def eval_error(source: str, **variables: Any) -> str:
    with pytest.raises(CelEvalError) as info:
        ev(source, **variables)
    return str(info.value)


# -- compiling ------------------------------------------------------------------------------------


def test_syntax_error_carries_the_caret_diagram() -> None:
    with pytest.raises(CelCompileError) as info:
        compile_program("1 +")
    assert str(info.value).startswith("ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>'")
    assert str(info.value).endswith("\n | 1 +\n | ...^")


def test_undeclared_reference_is_a_compile_error() -> None:
    assert check_syntax("spec.replicas") == (
        "ERROR: <input>:1:5: undeclared reference to 'spec.replicas' (in container '')\n"
        " | spec.replicas\n"
        " | ....^"
    )


def test_check_syntax_is_none_for_valid_source() -> None:
    assert check_syntax("object.metadata.name == 'web'") is None


def test_ternary_branches_need_one_type_unless_wrapped_in_dyn() -> None:
    assert check_syntax("true ? {'a': 1} : {'b': 'x'}") is not None
    assert ev("true ? dyn({'a': 1}) : dyn({'b': 'x'})") == {"a": 1}


def test_expression_length_limit() -> None:
    longest = "'" + "a" * (MAX_SOURCE_BYTES - 2) + "'"
    assert ev(longest) == "a" * (MAX_SOURCE_BYTES - 2)
    with pytest.raises(CelCompileError, match="the expression is 65537 bytes long; the limit is 65536"):
        compile_program(longest + " ")


def test_an_optional_result_type_does_not_compile() -> None:
    with pytest.raises(CelCompileError, match=r"evaluates to optional_type<DYN>, which has no JSON form"):
        compile_program("object.?metadata")


def test_programs_are_cached_by_source() -> None:
    first = compile_program("object.kind")
    assert compile_program("object.kind") is first
    assert compile_program("object.kind ") is not first
    assert isinstance(first, Program)
    assert first.source == "object.kind"


def test_failed_compiles_are_not_cached() -> None:
    for _ in range(2):
        with pytest.raises(CelCompileError):
            compile_program("object.")


# -- evaluating -----------------------------------------------------------------------------------


def test_variables_not_supplied_are_null() -> None:
    assert VARIABLES == ("object", "oldObject", "request", "params", "namespaceObject")
    assert ev("oldObject == null && params == null && request == null", object=POD) is True


def test_unknown_variable_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown CEL variables \['self'\]"):
        ev("1", self=POD)


def test_program_is_reusable_across_inputs() -> None:
    program = compile_program("object.metadata.name")
    assert program.evaluate({"object": POD}) == "web"
    assert program.evaluate({"object": {"metadata": {"name": "db"}}}) == "db"


def test_missing_field_without_has_is_an_error() -> None:
    assert eval_error("object.spec.nodeName", object=POD) == "no such key: nodeName"


def test_field_of_null_is_an_error() -> None:
    assert eval_error("oldObject.metadata.name", object=POD) == (
        "cannot select a field of a value that is not a map (null?); compare it with null first"
    )


def test_has() -> None:
    assert ev("has(object.spec.nodeName)", object=POD) is False
    assert ev("has(object.metadata.labels)", object=POD) is True


def test_optional_chaining() -> None:
    assert ev("object.?metadata.?labels.orValue({})", object=POD) == {"app": "web"}
    assert ev("object.?metadata.?annotations.orValue({})", object=POD) == {}
    assert ev("object.spec.containers[?5].orValue(null)", object=POD) is None
    assert ev("object.metadata[?'name'].orValue('')", object=POD) == "web"


def test_error_values_raise() -> None:
    assert eval_error("1 / 0") == "divide by zero"
    assert eval_error("int('x')") == "cannot convert string to int"
    assert eval_error("object.spec.containers[5]", object=POD) == "Index error: index=5 size=2"


@pytest.mark.parametrize(("source", "where"), [
    ("dyn(object.?x)", "an argument of dyn()"),
    ("[object.?x, 1]", "a list element"),
    ("cel.bind(v, object.?x, [v])", "a list element"),
    ("[1].map(i, object.?x)", "a list element"),
    ("{'a': object.?x, 'b': 1}", "a map key or value"),
    ("cond.equal(object.?x, 1) || cond.equal(cel.bind(v, object.?x, v), 1)", "an argument of cond.equal()"),
    ("jsonpatch.escapeKey(optional.of('a').value()) + string(size(tolerations.remove(optional.none(), [])))",
     "an argument of tolerations.remove()"),
])
def test_optionals_inside_values_do_not_compile(source: str, where: str) -> None:
    # cel-expr-python 0.1.3 crashes the process converting such a value to Python.
    assert check_syntax(source) == (
        f"{where} is an optional value, which cel-expr-python cannot convert; "
        "unwrap it with .orValue(default) first"
    )


def test_unwrapped_optionals_are_fine() -> None:
    assert ev("[?object.?x, ?object.?y, 1]", object={"y": 2}) == [2, 1]
    assert ev("{?'a': object.?x, ?'b': object.?y}", object={"y": 2}) == {"b": 2}
    assert ev("[object.?x.orValue(0)]", object={"x": 5}) == [5]
    assert ev("cel.bind(d, optional.of(object)[?'a'], d.hasValue() && cond.equal(d.value(), '1'))",
              object={"a": 1}) is True


@pytest.mark.parametrize(("source", "message"), [
    ("b'x'", "result: a bytearray value has no JSON form; convert it with string()"),
    ("{'a': [duration('1s')]}", "result.a[0]: a timedelta value has no JSON form; convert it with string()"),
    ("{1: 'a'}", "result: map key 1 is not a string, which JSON requires"),
    # orjson would write these as null: a patch would set the field to null instead of failing.
    ("[{'op': 'add', 'path': '/x', 'value': 1.0 / 0.0}]",
     "result[0].value: the double inf has no JSON form (JSON numbers are finite)"),
    ("{'a': [null, -1.0 / 0.0]}", "result.a[1]: the double -inf has no JSON form (JSON numbers are finite)"),
    ("0.0 / 0.0", "result: the double nan has no JSON form (JSON numbers are finite)"),
])
def test_results_must_be_json(source: str, message: str) -> None:
    assert eval_error(source) == message


def test_string_conversions_of_non_json_values() -> None:
    assert ev("string(timestamp('2024-01-02T03:04:05Z'))") == "2024-01-02T03:04:05Z"
    assert ev("string(duration('90s'))") == "90s"
    assert ev("string(7) + '/' + string(1.5) + '/' + string(true)") == "7/1.5/true"


def test_integers_beyond_int64_become_floats() -> None:
    assert ev("object.n", object={"n": 2**64}) == 18446744073709551616.0
    assert ev("type(object.n) == double", object={"n": -(2**63) - 1}) is True
    assert ev("object.n + 1", object={"n": 2**63 - 1 - 1}) == 2**63 - 1


def test_inputs_that_are_not_json_are_refused_with_their_path() -> None:
    data = {"spec": {"s": [1, {2}]}}
    assert eval_error("object", object=data) == "object.spec.s[1]: a set is not a JSON value"
    assert eval_error("object", object={"n": 10**400}) == f"object.n: integer {10**400} is too large for CEL"


def test_tuples_inside_objects_are_refused_with_their_path() -> None:
    # Decoded JSON never holds tuples; the fast input path leaves them to cel-expr-python.
    with pytest.raises(CelEvalError, match=r"object\['items'\].*tuple"):
        ev("object.items.map(x, x * 2)", object={"items": (1, 2)})


def test_repeated_evaluation_keeps_none_alive() -> None:
    # cel-expr-python drops a reference to None per null converted; before Python 3.12 that
    # ends in "Fatal Python error: none_dealloc" unless the adapter compensates.
    results = compile_program("[null, {'a': null, 'b': [null]}]")
    arguments = compile_program("cond.equal(null, object.a) && [null, null].flatten().size() == 2")
    before = sys.getrefcount(None)
    for _ in range(3000):
        assert results.evaluate({}) == [None, {"a": None, "b": [None]}]
        assert arguments.evaluate({"object": {"a": None}}) is True
    assert sys.getrefcount(None) - before > -1000  # a leak would lose 15000


def test_library_calls_release_their_arguments_and_results() -> None:
    # cel-expr-python never releases a Python function's arguments or result; the adapter does.
    program = compile_program("object.spec.containers.map(c, affinity.add(c, {}))")
    program.evaluate({"object": POD})
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(300):
        program.evaluate({"object": POD})
    gc.collect()
    assert len(gc.get_objects()) - before < 100  # leaking, it keeps about 16 containers per call


def test_programs_are_shared_by_threads() -> None:
    program = compile_program("object.spec.containers.map(c, c.name + '/' + quantity('1.5Gi'))")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: program.evaluate({"object": POD}), range(200)))
    assert results == [["app/1536Mi", "sidecar/1536Mi"]] * 200


def test_inputs_are_not_modified() -> None:
    data = {"n": 2**64, "l": (1,)}
    ev("object", object=data)
    assert data == {"n": 2**64, "l": (1,)}


def test_extensions_are_enabled() -> None:
    assert ev("'a,b'.split(',')") == ["a", "b"]
    assert ev("'%s-%d'.format(['a', 1])") == "a-1"
    assert ev("math.greatest(1, 5, 3)") == 5
    assert ev("base64.encode(b'hi')") == "aGk="
    assert ev("cel.bind(n, 3, n * n)") == 9
    assert ev("optional.none().orValue('x')") == "x"


# -- the function library -------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "expected"), [
    ("quantity('1.5Gi')", "1536Mi"),
    ("string(quantity('1000'))", "1k"),
    ("quantity('1500m').canonical()", "1500m"),
    ("'0.5'.canonical()", "500m"),
    ("isQuantity('1.3Gi')", True),
    ("isQuantity('200K')", False),
    ("quantity('150Mi').isGreaterThan(quantity('100Mi'))", True),
    ("quantity('50Mi').isGreaterThan(quantity('100Mi'))", False),
    ("quantity('50M').isLessThan(quantity('100M'))", True),
    ("quantity('100M').isLessThan(quantity('50M'))", False),
    ("quantity('200M').compareTo(quantity('0.2G'))", 0),
    ("quantity('50M').compareTo(quantity('50Mi'))", -1),
    ("quantity('50Mi').compareTo(quantity('50M'))", 1),
    ("quantity('50k').add('20k')", "70k"),
    ("quantity('50k').add(20)", "50020"),
    ("quantity('50k').sub('20k')", "30k"),
    ("quantity('50k').sub(20000)", "30k"),
    ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000)", "20"),
    ("quantity('0').add(5000)", "5e3"),
    ("quantity('50k').asInteger()", 50000),
    ("quantity('50000000G').isInteger()", True),
    ("quantity('1.5').isInteger()", False),
    ("quantity('9999999999999999999999999999999999999G').isInteger()", False),
    ("quantity('50k').sub(20000).asApproximateFloat()", 30000.0),
    ("quantity('-1m').sign()", -1),
    ("quantity('0').sign()", 0),
    ("sign(quantity('2Ki'))", 1),
    ("quantity('4Gi').scale('0.2', '1')", "858993459"),
    ("quantity('1500m').scale('0.5', '0.001')", "750m"),
    ("quantity('1Gi') == quantity('1024Mi')", True),
    ("quantity('1Ki') == quantity('1024')", False),
    ("quantity('1Ki').compareTo(quantity('1024')) == 0", True),
    # An error of a library function returning a scalar is absorbed like any CEL error.
    ("quantity('x') == '1' || true", True),
])
def test_quantity_library(source: str, expected: Any) -> None:
    assert ev(source) == expected


@pytest.mark.parametrize(("source", "message"), [
    ("quantity('200K')", "invalid quantity '200K': unknown suffix 'K'"),
    ("'x'.add('1')", "invalid quantity 'x': expected a number"),
    ("'1'.isLessThan('Mi')", "invalid quantity 'Mi': expected a number"),
    ("quantity('1.5').asInteger()", "cannot convert quantity 1500m to integer"),
    ("quantity('1e30').asInteger()", "cannot convert quantity 1e30 to integer"),
    ("'1'.scale('abc', '1')", "scale: factor 'abc' is not a decimal number"),
    ("'1'.scale('0.5', 'NaN')", "scale: roundTo 'NaN' is not a finite number"),
    ("'1'.scale('0.5', '0')", "round_to must be positive, got 0"),
])
def test_quantity_library_errors(source: str, message: str) -> None:
    assert eval_error(source).startswith(message)


@pytest.mark.parametrize(("source", "expected"), [
    ("jsonpatch.escapeKey('k8s.io/x~y')", "k8s.io~1x~0y"),
    ("jsonpatch.escapeKey('plain')", "plain"),
    ("'abc 123'.find('[0-9]+')", "123"),
    ("'abc 123'.find('xyz')", ""),
    ("'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
    ("'123 abc 456'.findAll('[0-9]+', 1)", ["123"]),
    ("'123 abc 456'.findAll('[0-9]+', 0)", []),
    ("'123 abc 456'.findAll('xyz')", []),
    # Go's FindAllString semantics: no empty match right after a match.
    ("'12 3'.findAll('[0-9]*')", ["12", "3"]),
    ("'1 a'.findAll('[0-9]*')", ["1", "", ""]),
    ("'a1b2'.matches('^[a-z0-9]+$')", True),
])
def test_string_library(source: str, expected: Any) -> None:
    assert ev(source) == expected


def test_invalid_regex_is_an_error(capfd: pytest.CaptureFixture[str]) -> None:
    # A pattern known only when the rule runs (a literal one is refused when compiled, below).
    assert eval_error("'abc'.find(params.p)", params={"p": "("}) == "Illegal regex '(': missing ): ("
    assert eval_error("'abc'.findAll(params.p, 2)", params={"p": "["}) == "Illegal regex '[': missing ]: ["
    assert capfd.readouterr().err == ""  # the reason is the rule's error, not a line RE2 logs


@pytest.mark.parametrize(("source", "reason"), [
    ("'aa'.find('(a)\\\\1')", "find: the pattern '(a)\\\\1' is not a regular expression RE2 (and Kubernetes) "
                               "accepts: invalid escape sequence: \\1"),  # a backreference
    ("'aa'.findAll('(?=a)', 1)", "findAll: the pattern '(?=a)' is not a regular expression RE2 (and Kubernetes) "
                                "accepts: invalid perl operator: (?="),  # look-ahead
    ("['aa'].all(s, s.matches('a{1001}'))", "matches: the pattern 'a{1001}'"),
    ("matches('aa', '[')", "matches: the pattern '['"),
    ("{'k': regexReplaceAll('(', 'a', 'b')}", "regexReplaceAll: the pattern '('"),
])
def test_a_literal_pattern_re2_refuses_is_a_compile_error(source: str, reason: str) -> None:
    # Kubernetes runs find/findAll on Go's regexp (RE2's syntax), as `matches` runs here; a
    # policy whose rule could never run is refused when admitted, naming the pattern.
    with pytest.raises(CelCompileError) as info:
        compile_program(source)
    assert str(info.value).startswith(reason)


FIND_BACKTRACKING = """
from kinitiras_py.engine.evaluation import cel
program = cel.compile_program("object.name.find('(a+)+$') + '|' + object.name.findAll('(a|aa)+$').join(',')")
print(program.evaluate({"object": {"name": "a" * 2000 + "!"}}), program.evaluate({"object": {"name": "aaa"}}))
"""


def test_find_on_a_backtracking_pattern_finishes() -> None:
    # A backtracking engine takes a second for (a+)+$ on 24 a's and a '!', twice that for each
    # further a: one object's field would hold the webhook (a call cannot be interrupted). Run
    # apart, so that a regression fails here instead of hanging the suite.
    done = subprocess.run([sys.executable, "-c", FIND_BACKTRACKING], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["|", "aaa|aaa"]


@pytest.mark.parametrize(("source", "expected"), [
    ("[1, 2, 2, 3].isSorted()", True),
    ("['a', 'b', 'b', 'c'].isSorted()", True),
    ("[2.0, 1.0].isSorted()", False),
    ("[1, 2.5, 3].isSorted()", True),
    ("[].isSorted()", True),
    ("[1, 3].sum()", 4),
    ("[1.0, 3.0].sum()", 4.0),
    ("[].sum()", 0),
    ("[1, 3].min()", 1),
    ("[1, 3].max()", 3),
    ("['b', 'a'].min()", "a"),
    ("range(3)", [0, 1, 2]),
    ("range(0)", []),
    ("lists.range(2)", [0, 1]),
    ("['a', 'b'].enumerate()", [{"index": 0, "value": "a"}, {"index": 1, "value": "b"}]),
    ("[].enumerate()", []),
    ("[1, [2, [3, [4]]]].flatten()", [1, 2, [3, [4]]]),
    ("[1, [2, [3, [4]]]].flatten(2)", [1, 2, 3, [4]]),
    ("[[1], [2]].flatten(0)", [[1], [2]]),
    ("[3, 1, 2].sort()", [1, 2, 3]),
    ("['b', 'c', 'a'].sort()", ["a", "b", "c"]),
    ("[].sort()", []),
])
def test_list_library(source: str, expected: Any) -> None:
    assert ev(source) == expected


@pytest.mark.parametrize(("source", "message"), [
    ("[].min()", "min called on empty list"),
    ("[].max()", "max called on empty list"),
    ("[1, 'a'].min()", "min: the elements are not mutually comparable"),
    ("[[1], [2]].isSorted()", "isSorted: the elements are not mutually comparable"),
    ("[1, 2.0].sum()", "sum: the elements must be all int or all double"),
    ("[9223372036854775807, 1].sum()", "sum: int64 overflow"),
    ("range(-1)", "range: -1 is negative"),
    ("[1].flatten(-1)", "flatten: the depth must not be negative"),
    ("[1, 'a'].sort()", "sort: the elements are not mutually comparable"),
])
def test_list_library_errors(source: str, message: str) -> None:
    assert eval_error(source) == message


def test_list_functions_accept_dyn_receivers() -> None:
    assert ev("object.spec.containers.enumerate().map(e, e.index)", object=POD) == [0, 1]
    assert ev("object.spec.containers.map(c, c.name).isSorted()", object=POD) is True


def test_list_index_of_is_the_strings_extension_only() -> None:
    # The strings extension owns indexOf; a list overload cannot be declared next to it.
    assert ev("'abc'.indexOf('c')") == 2
    assert check_syntax("[1].indexOf(1)") is not None


def test_kinitiras_helpers_are_registered() -> None:
    names = {f.name for f in celext.FUNCTIONS}
    assert {"workload.podSpecPath", "tolerations.add", "affinity.remove", "cond.isIn"} <= names
    assert ev("workload.podSpecPath(object.apiVersion, object.kind)", object=POD) == "/spec"
    assert ev("cond.isIn('1', [1, 2]) && cond.equal('2', 2) && cond.compare('10', 9) == 1") is True


def test_realistic_mutation_rule_returns_a_json_patch() -> None:
    rule = """
        object.spec.containers.enumerate()
          .filter(e, !has(e.value.imagePullPolicy))
          .map(e, {
            "op": "add",
            "path": "/spec/containers/" + string(e.index) + "/imagePullPolicy",
            "value": e.value.image.endsWith(":latest") ? "Always" : "IfNotPresent",
          })
        + [has(object.metadata.annotations)
            ? {"op": "add", "path": "/metadata/annotations/" + jsonpatch.escapeKey("kinitiras.io/mutated"),
               "value": "true"}
            : {"op": "add", "path": "/metadata/annotations", "value": {"kinitiras.io/mutated": "true"}}]
        + range(size(object.spec.containers))
            .filter(i, has(object.spec.containers[i].resources)
                       && object.spec.containers[i].resources.?limits.?cpu.hasValue())
            .map(i, {
              "op": "add",
              "path": "/spec/containers/" + string(i) + "/resources/requests",
              "value": {"cpu": object.spec.containers[i].resources.limits.cpu.scale("0.5", "0.001")},
            })
    """
    assert ev(rule, object=POD) == [
        {"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "IfNotPresent"},
        {"op": "add", "path": "/metadata/annotations", "value": {"kinitiras.io/mutated": "true"}},
        {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"cpu": "750m"}},
    ]
