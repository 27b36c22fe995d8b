"""Fuzz: policies with every field type-confused, against the policy checker.

Invariant: ``compile_policy`` either accepts a policy or raises ``PolicyErrors`` whose every
problem names a field path (distinct problems, a non-empty reason), and a template's rendered
CEL never fails to compile (that error would name the template, not the user's field); it never
raises anything else. Two sources of policies:

* generated from the models' own declarations (``kinitiras_py.api.schema``), so every declared
  field is reached, each value either well typed (enums, patterns, numbers at their edges) or
  of another JSON type;
* the example policies, damaged at random paths with confusing values.

The profile (``ci`` or ``long``) comes from tests/fuzz/conftest.py.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.api import policies
from kinitiras_py.api.schema import Model, Node, fields_of
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.policies.compiling import compile_policy
from tests.jsonpaths import json_paths

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = [doc for path in sorted((DATA / "examples").rglob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]
# A field path: dotted keys with [index] or [map key] parts ("" for the policy itself).
FIELD_PATH = re.compile(r"^$|^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*|\[[^\]]*\])*(\.|\[|$)")

# Strings that have broken checkers before: numbers in disguise, pointers, regexes, CEL, URLs.
NASTY_STRINGS = ["", " ", "NaN", "-1", "1e400", "99999999999999999999999999Ei", "0", "-0", "0.5", "50%", "0%",
                 "/", "/a/~2", "/metadata/labels/a", "metadata.labels['x']", "a..b", "[0]", "/" + "a/" * 40,
                 "/spec/containers/12345678901234567890", "/" + "a/" * 253, "/metadata/finalizers/99999999999999999999",
                 "1e-400", "(?=a)b", r"(a)\1", "a{1001}", r"\pL", "[",
                 "file:///etc/passwd", "not a url", "http://{{metadata.name}}/x", "{{", "}}", "-1m", "1h",
                 "object", "[]", "[{\"op\": \"add\"}]", "range(10).size() > 0 ? [] : []", "true", "1 +",
                 "request.bogus", "params.x == 'a'", "namespaceObject.metadata.name == 'a'", "object.a == [][0]",
                 "quantity(object.metadata.name) == quantity('x')", "has(request.bogus) || [][0]",
                 "\x00", "é", "\u2028", "*", "CREATE", "Fail", "y", "off", "~", "a" * 300]
# Strings well formed for many fields (names, quantities, factors, pointers, CEL, durations, URLs).
PLAUSIBLE_STRINGS = ["app", "v1", "Pod", "apps/v1", "Deployment", "1", "500m", "1Gi", "0.5", "/metadata/name",
                     "/spec/containers/0/image", "body.team", "10m", "https://teams.example/api", "[]",
                     "true", "object.metadata.name == 'x'", "^[a-z]+$", "kubernetes.io/hostname", "Node",
                     "request.operation == 'CREATE'", "namespaceObject != null && namespaceObject.metadata.name != ''",
                     "function jsa_mutate(op, obj) { return {Result: obj} }",
                     "const jsa_validate = (obj) => ({Allowed: obj.kind !== 'Pod'})",
                     "function jsa_mutate(obj) {\n  return {Allowed: false,\n}"]
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(NASTY_STRINGS), st.text(max_size=8),
    st.lists(st.sampled_from(NASTY_STRINGS), max_size=2),
    st.dictionaries(st.sampled_from(["a", "op", "path", "value", "from"]), st.sampled_from(NASTY_STRINGS),
                    max_size=2),
)
MAX_DEPTH = 7


def _scalar(node: Node) -> st.SearchStrategy[Any]:
    if node.enum:
        return st.sampled_from(node.enum)
    if node.kind == "boolean":
        return st.booleans()
    numbers = st.one_of(st.sampled_from([0, 1, -1, 100, 2**31, 2**63 - 1, -(2**63)]), st.integers())
    strings = st.one_of(st.sampled_from(NASTY_STRINGS + PLAUSIBLE_STRINGS), st.text(max_size=12))
    if node.kind == "integer":
        return numbers
    if node.kind == "int-or-string":
        return numbers | strings
    if node.kind == "any":
        return JUNK
    return strings


def value_of(node: Node, depth: int) -> st.SearchStrategy[Any]:
    """A value for ``node``: usually well typed, sometimes anything else."""
    if depth > MAX_DEPTH:
        return JUNK
    well: st.SearchStrategy[Any]
    if node.kind == "object":
        assert node.model is not None
        well = model_of(node.model, depth + 1)
    elif node.kind == "array":
        assert node.item is not None
        well = st.lists(value_of(node.item, depth + 1), max_size=2)
    elif node.kind == "map":
        assert node.item is not None
        well = st.dictionaries(st.sampled_from(["a", "cpu", "memory", "x/y", "", "~"]) | st.text(max_size=4),
                               value_of(node.item, depth + 1), max_size=2)
    else:
        well = _scalar(node)
    # One value in ten is confused, so that most policies get past the first wrong type.
    return st.integers(0, 9).flatmap(lambda n: JUNK if n == 0 else well)


def model_of(cls: type[Model], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    """An object for model ``cls``: any subset of its fields (``cue`` is always refused: the
    damaged examples cover it), now and then with an unknown one."""
    specs = fields_of(cls)
    known = st.fixed_dictionaries(
        {f.json: value_of(f.node, depth) for f in specs if f.prop.required},
        optional={f.json: value_of(f.node, depth) for f in specs if not f.prop.required and f.json != "cue"},
    )
    return st.integers(0, 19).flatmap(
        lambda n: st.builds(lambda d, v: {**d, "unknownField": v}, known, JUNK) if n == 0 else known)


@st.composite
def generated_policies(draw: st.DrawFn) -> Any:
    cls = draw(st.sampled_from(policies.POLICY_CLASSES))
    doc: dict[str, Any] = {
        "apiVersion": draw(st.sampled_from([policies.API_VERSION] * 9 + ["v1"])),
        "kind": cls.INFO.kind,
        "metadata": {"name": draw(st.sampled_from(["p"] * 9 + ["x" * 300])), "namespace": "default"},
        "spec": draw(value_of(Node("object", model=cls.SPEC), 0)),
    }
    return draw(st.sampled_from([doc, doc, doc, doc, {k: v for k, v in doc.items() if k != "spec"}]))


@st.composite
def damaged_examples(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(json_paths(doc)))
        node = doc
        for key in path[:-1]:
            node = node[key]
        if draw(st.booleans()) and isinstance(node, dict):
            del node[path[-1]]
        else:
            node[path[-1]] = draw(JUNK)
    return doc


def check(policy: Any) -> None:
    """Accepted, or refused with distinct problems that each name a field."""
    try:
        compile_policy(policy)
    except PolicyErrors as e:
        found = [(err.path, err.reason) for err in e.errors]
        assert found, "refused without a reason"
        assert len(set(found)) == len(found), found
        for path, reason in found:
            assert isinstance(path, str) and FIELD_PATH.match(path), path
            assert isinstance(reason, str) and reason.strip(), (path, reason)
            # The user wrote no CEL in a template: a CEL error there must name the field that caused it.
            assert not (path.endswith(".template") and reason.startswith("invalid CEL: ERROR")), (path, reason)
        assert str(e)


@given(generated_policies())
def test_generated_policies_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)


@given(damaged_examples())
def test_damaged_examples_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)


@given(JUNK | st.lists(JUNK, max_size=3))
def test_documents_that_are_not_policies_are_refused(doc: Any) -> None:
    check(doc)


@given(generated_policies() | damaged_examples() | JUNK)
def test_partial_parsing_reports_what_parsing_does(policy: Any) -> None:
    """The compiler reads the partial model: it must report every problem ``parse_policy`` does, in
    the same order, and give the same model when there is none."""
    model, errors = policies.parse_policy_partial(policy)
    try:
        strict = policies.parse_policy(policy)
    except PolicyErrors as e:
        assert [(x.path, x.reason) for x in errors] == [(x.path, x.reason) for x in e.errors]
        return
    assert errors == [] and model == strict


TEXT = st.text(max_size=20) | st.sampled_from(NASTY_STRINGS + PLAUSIBLE_STRINGS)


@st.composite
def templates_with_odd_text(draw: st.DrawFn) -> Any:
    """Templates whose free-text fields (keys, values, paths, patterns, URLs) hold any text: what
    ends up inside CEL string literals and reference expressions."""
    ref: dict[str, Any] = {"from": draw(st.sampled_from(["current", "old", "owner", "http", "k8s"])),
                           "path": draw(TEXT)}
    if ref["from"] == "http":
        ref["http"] = {"url": "https://x.example/" + draw(TEXT), "params": {draw(TEXT): draw(TEXT)}}
    if ref["from"] == "k8s":
        ref["k8s"] = {"apiVersion": "v1", "kind": "ConfigMap", "name": draw(TEXT)}
    if draw(st.booleans()):
        value = draw(st.sampled_from([{"string": draw(TEXT)}, {"stringMap": {draw(TEXT): draw(TEXT)}},
                                      {"stringSlice": [draw(TEXT)]}, {"float": draw(TEXT)}]))
        template = {"type": draw(st.sampled_from(["labels", "annotations"])), "path": draw(TEXT),
                    "operation": draw(st.sampled_from(["add", "replace", "remove"])), "value": value}
        return {"apiVersion": policies.API_VERSION, "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
                "spec": {"overrideRules": [{"overriders": {"template": template}}]}}
    cond = {"cond": draw(st.sampled_from(["Equal", "In", "Regex", "Gt", "Exist"])), "dataRef": ref,
            "value": {"string": draw(TEXT)}, "message": draw(TEXT)}
    return {"apiVersion": policies.API_VERSION, "kind": "ClusterValidatePolicy", "metadata": {"name": "p"},
            "spec": {"validateRules": [{"template": {"type": "condition", "condition": cond}}]}}


@given(templates_with_odd_text())
def test_templates_with_any_text_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)


# Pieces of sidecar templates: per-pod values and constants in every YAML position, control flow
# on either, filters, and text that is not YAML.
SIDECAR_PIECES = ["{{ labels.app }}", "{{ labels['a/b'] }}", "{{ annotations.x | default('d') }}", "{{ appPorts }}",
                  "{{ namespace }}", "{{ name }}", "{{ generateName }}", "{{ object.spec.containers[0].name }}",
                  "{{ valueRefs.v }}", "{{ values.c }}", "{{ values.c | upper }}", "{{ labels.app | upper }}",
                  "{{ labels.app | tojson }}", "{% if values.c %}x{% endif %}", "{% if labels.a %}x{% endif %}",
                  "{% for p in appPorts %}{{ p }}{% endfor %}", "{{ labels }}", "{{ object }}", "{{", "{%",
                  "kinitirasPodValue0x", ": ", "- ", "\n", "\"", "'", "#", "&a", "*a", "!!binary", "~"]
SIDECAR_SHAPES = ["containers:\n  - name: {n}\n    image: \"{v}\"\n",
                  "containers: [{{name: {n}, image: x, env: [{{name: E, value: {v}}}]}}]",
                  "initContainers: [{{name: i, image: {v}}}]\nvolumes: [{{name: {n}, emptyDir: {{}}}}]",
                  "imagePullSecrets: [{{name: {n}}}]\nannotations: {{{n}: {v}}}",
                  "{v}"]


@st.composite
def sidecar_policies(draw: st.DrawFn) -> Any:
    """Sidecar templates assembled from pieces, with odd values, refs, labels and ConfigMap refs."""
    text = draw(st.sampled_from(SIDECAR_SHAPES)).format(
        n=draw(st.sampled_from(["envoy", "a b", "{{ name }}", "x" * 70, *SIDECAR_PIECES])),
        v="".join(draw(st.lists(st.sampled_from(SIDECAR_PIECES) | TEXT, max_size=4))))
    block: dict[str, Any] = {"values": {"c": draw(JUNK)}}
    if draw(st.booleans()):
        block["template"] = text
    else:
        block["configMapRef"] = draw(st.sampled_from([{"name": "t", "key": "k"},
                                                      {"namespace": "n", "name": "t", "key": "k"}]))
    if draw(st.booleans()):
        block["valueRefs"] = {draw(st.sampled_from(["v", "a-b", ""])): {
            "from": draw(st.sampled_from(["current", "k8s", "http", "owner", "nowhere"])), "path": draw(TEXT)}}
    if draw(st.booleans()):
        block["requiredLabels"] = draw(st.lists(TEXT, max_size=2))
    if draw(st.booleans()):
        block["group"] = draw(TEXT)
    block["requireContainerPorts"] = draw(st.booleans())
    template = {"type": "sidecar", "operation": draw(st.sampled_from(["add", "add", "replace"])), "sidecar": block}
    kind = draw(st.sampled_from(["ClusterOverridePolicy", "OverridePolicy"]))
    return {"apiVersion": policies.API_VERSION, "kind": kind,
            "metadata": {"name": draw(st.sampled_from(["p", "x" * 253])), "namespace": "default"},
            "spec": {"overrideRules": [{"overriders": {"template": template}}]}}


@given(sidecar_policies())
def test_sidecar_templates_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)


SELECT_TEXT = TEXT | st.sampled_from(["$.kind", "$.a[*].b", "$..x", "$.a[? @.b == 1]", "length($.a) > 0",
                                      "$.syntheticRefs.node.x", "$.syntheticRefs.namespace", "$.a[", "@.a"])


@st.composite
def kubemod_fields_with_odd_text(draw: st.DrawFn) -> Any:
    """matchConditions, fanned-out plaintext, value and message templates holding any text: what
    the select parser and the template splitter turn into CEL."""
    condition = draw(st.sampled_from([
        {"select": draw(SELECT_TEXT), "matchValue": draw(TEXT)},
        {"select": draw(SELECT_TEXT), "matchRegex": draw(TEXT), "matchFor": "All", "negate": True},
        {"select": draw(SELECT_TEXT), "matchValues": [draw(TEXT)]},
        {"expression": draw(TEXT)},
    ]))
    spec: dict[str, Any] = {"matchConditions": [condition]}
    if draw(st.booleans()):
        spec["valueRefs"] = {draw(st.sampled_from(["node", "x y", "namespace"])): {
            "from": "k8s", "k8s": {"apiVersion": "v1", "kind": "Node", "name": draw(TEXT)}}}
    if draw(st.booleans()):
        op = {"op": draw(st.sampled_from(["add", "replace", "remove"])), "path": draw(TEXT), "lenient": True,
              "select": draw(SELECT_TEXT), "valueTemplate": draw(TEXT | st.just("{{ selectedItem }}"))}
        spec.update(executionTier=draw(st.integers(-3, 3)),
                    overrideRules=[{"patchLastApplied": True, "overriders": {"plaintext": [op]}}])
        kind = "ClusterOverridePolicy"
    else:
        spec["validateRules"] = [{"messageTemplate": draw(TEXT | st.just("{{ target.metadata.name }}"))}]
        kind = "ClusterValidatePolicy"
    return {"apiVersion": policies.API_VERSION, "kind": kind, "metadata": {"name": "p"}, "spec": spec}


@given(kubemod_fields_with_odd_text())
def test_kubemod_fields_with_any_text_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)


INJECT_NAMES = st.sampled_from(["DB_PORT", "cache", "a-b.c", "_x", "v1"])


@st.composite
def inject_templates_with_odd_text(draw: st.DrawFn) -> Any:
    """Inject templates whose names, values, paths and volume sources hold any text or nesting (all of
    it is written into the rendered CEL as literals); mostly well formed, so that most get rendered."""
    def odd(well: st.SearchStrategy[Any]) -> Any:
        return draw(st.integers(0, 9).flatmap(lambda n: JUNK if n == 0 else well))

    free = TEXT

    def name(i: int) -> Any:  # distinct names, now and then any text
        return odd(st.integers(0, 3).flatmap(lambda n: TEXT if n == 0 else INJECT_NAMES.map(lambda v: f"{v}{i}")))

    env = [{"name": name(0), "value": odd(free)}, {"name": name(1), "valueFrom": {draw(st.sampled_from(
        ["configMapKeyRef", "secretKeyRef"])): {"name": odd(free), "key": odd(free)}}},
        {"name": name(2), "valueFrom": {"fieldRef": {"fieldPath": odd(free)}}}]
    env_from = [{"prefix": name(3), draw(st.sampled_from(["configMapRef", "secretRef"])): {"name": odd(free)}}]
    volume_names = st.sampled_from(["cache", "data-1", "v1"]) | TEXT
    mounts = [{"name": odd(volume_names), "mountPath": odd(free), "subPath": odd(free)}]
    source = draw(st.recursive(TEXT | st.integers() | st.booleans(), lambda inner: st.dictionaries(
        TEXT, inner, max_size=2) | st.lists(inner, max_size=2), max_leaves=30))
    kind = draw(st.sampled_from(["emptyDir", "configMap", "projected", "emptyDir", "configMap", "nope"]))
    volumes = [{"name": odd(volume_names), kind: source if isinstance(source, dict) else {"x": source}}]
    block = {key: value for key, value in (("env", env), ("envFrom", env_from), ("volumeMounts", mounts),
                                           ("volumes", volumes)) if draw(st.booleans())} or {"env": env}
    if draw(st.booleans()):
        block["onConflict"] = odd(st.sampled_from(["Skip", "Deny", "Override"]))
    if draw(st.booleans()):  # the annotation's key and value are written into the pod as given
        keys = st.sampled_from(["podpreset.admission.kubernetes.io/podpreset-db", "a/b/c", "x" * 64, "/x", "k"])
        marker = {"key": odd(keys | TEXT)} | ({"value": odd(free)} if draw(st.booleans()) else {})
        block["marker"] = odd(st.just(marker))
    template: dict[str, Any] = {"type": "inject", "inject": block}
    if draw(st.booleans()):
        template["containerNames"] = [odd(free)]
    kind = draw(st.sampled_from(["OverridePolicy", "ClusterOverridePolicy"]))
    return {"apiVersion": policies.API_VERSION, "kind": kind,
            "metadata": {"name": draw(st.sampled_from(["p"] * 5 + ["x" * 60])), "namespace": "default"},
            "spec": {"overrideRules": [{"overriders": {"template": template}}]}}


@given(inject_templates_with_odd_text())
def test_inject_templates_with_any_text_are_accepted_or_refused_by_field(policy: Any) -> None:
    check(policy)
