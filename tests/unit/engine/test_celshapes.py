"""CEL read against the declared shapes of its variables when a policy is admitted (issue 25, item 6):
undefined fields of ``request`` and ``params``, ``namespaceObject`` where it is always null, and
constant subexpressions that always fail are refused; what can succeed on some object is not."""

from __future__ import annotations

import pytest

from kinitiras_py.admission.pipeline import Request
from kinitiras_py.api.schema import parse_into
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.engine.checking import shapes
from kinitiras_py.engine.evaluation import cel, celshapes

DECLARED = celshapes.Shapes(shapes.REQUEST_FIELDS, frozenset({"valueRef", "team"}), namespace=False)
WITH_NAMESPACE = celshapes.Shapes(shapes.REQUEST_FIELDS, frozenset(), namespace=True)


def found(source: str, declared: celshapes.Shapes = DECLARED) -> tuple[str, ...]:
    return celshapes.problems(cel.compile_program(source), declared)


@pytest.mark.parametrize(("source", "fragment"), [
    ("request.bogus", "request has no field 'bogus'; it has operation, namespace, userInfo, dryRun"),
    ("request['name'] == 'x'", "request has no field 'name'"),
    ("has(object.a) ? request.uid : 'x'", "request has no field 'uid'"),
    ("params.x", "params has no 'x': the rule's parameters (its references and the policy's spec.valueRefs) "
                 "are team, valueRef"),
    ("object.items.exists(i, params['x'] == i)", "params has no 'x'"),
    ("namespaceObject.metadata.name == 'a'", "namespaceObject is null for every object the policy selects"),
    ("has(namespaceObject.metadata)", "namespaceObject is null"),
    ("object.a == [][0]", "the constant ([])[0] fails on every evaluation: Index error"),
    ("quantity(object.metadata.name) == quantity('x')", 'the constant quantity("x") fails on every evaluation'),
    ("object.a == {'a': 1}.b", 'the constant ({"a": 1}).b fails on every evaluation: no such key: b'),
    ("cel.bind(x, 'abc'.substring(5), object.a == x)", "the constant (\"abc\").substring(5) fails"),
    ("object.spec.containers.map(c, c.name) == [int('x')]", "the constant [int(\"x\")] fails"),
    ("[1, 2].map(x, x + object.a).size() > 1 / 0", "the constant (1 / 0) fails on every evaluation: divide by zero"),
])
def test_what_can_never_succeed_is_found(source: str, fragment: str) -> None:
    assert any(fragment in problem for problem in found(source)), found(source)


@pytest.mark.parametrize("source", [
    "has(request.bogus)", "request.?bogus.orValue(1) == 1", "request[?'bogus'].hasValue()",
    "request.operation == 'CREATE' && request.userInfo.username != '' && !request.dryRun",
    "request.namespace == ''", "params.team == 'a' && params.valueRef != ''", "has(params.x)",
    "params.?x.orValue('') == ''", "namespaceObject != null && namespaceObject.metadata.name == 'a'",
    "namespaceObject == null ? true : namespaceObject.metadata.name == 'a'",
    "has(object.a) ? [][0] : true", "int('x') == 1 || true", "false && quantity('x') == quantity('1')",
    "[].map(x, [][0]).size() == 0", "optional.none().orValue(1) == 1", "quantity('1Gi').isLessThan(quantity('2Gi'))",
    "[1, 2, 3][1] == 2 && {'a': 1}.a == 1 && -5 < 2 && 2u + 3u == 5u && 1e300 * 1.5 > 1.0",
    "duration('1h') > duration('1m') && b'x' == b'x' && 'a\\nb\"c' + 'é' != ''",
    "cel.bind(request, object, request.foo == 1)", "object.items.all(params, params.x == 1)",
    "object.spec.containers.all(c, c.image != '') || [][0]",
])
def test_what_can_succeed_on_some_object_is_not(source: str) -> None:
    assert found(source) == ()


def test_namespace_object_is_read_freely_where_a_namespace_can_be() -> None:
    assert found("namespaceObject.metadata.name == 'a'", WITH_NAMESPACE) == ()


def test_the_declared_request_fields_are_those_rules_see() -> None:
    assert tuple(Request(operation="CREATE", object={}).cel_request()) == shapes.REQUEST_FIELDS


@pytest.mark.parametrize(("sels", "absent"), [
    ([{"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}],
     True),
    ([{"apiVersion": "v1", "kind": "Node"}, {"apiVersion": "v1", "kind": "Pod"}], False),
    ([{"apiVersion": "v1", "kind": "Namespace"}], False),  # its request names the Namespace itself
    ([{"apiVersion": "example.com/v1", "kind": "Node"}], False),
    ([{"kind": "Node"}], False), ([{"apiVersion": "v1", "kind": "*"}], False), ([], False),
])
def test_namespace_object_is_absent_only_where_every_selected_kind_is_cluster_scoped(
        sels: list[dict[str, str]], absent: bool) -> None:
    written = [parse_into(ResourceSelector, sel, "sel", [], partial=True) for sel in sels]
    assert shapes.Kinds.of(written).without_namespace() is absent
