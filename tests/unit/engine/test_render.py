"""Rendering override templates to CEL: the exact text, its stability, escaping and refusals,
and what the resources and resourcesOversell programs compute (quantity maths, containers).

Every type x operation x kind, label values, tolerations, affinity, overrider order and failure
policies are in ``test_overriding.py``; generated workloads in ``test_override_properties.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.engine.evaluation import celbridge
from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding
from tests.compiling import render_override

Obj = dict[str, Any]
TEMPLATE_PATH = "spec.overrideRules[0].overriders.template"


def _policy(template: Obj) -> Obj:
    return {
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
        "metadata": {"name": "render-test"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                 "overrideRules": [{"overriders": {"template": template}}]},
    }


def _compile_errors(template: Obj) -> list[PolicyError]:
    with pytest.raises(PolicyErrors) as info:
        compile_policy(_policy(template))
    return info.value.errors


def _mutated(template: Obj, obj: Obj) -> Obj:
    compiled = compile_policy(_policy(template))
    mutation = overriding.mutate(PolicyIndex([compiled]).matching(obj, "CREATE"), obj, {})
    assert mutation.failure is None, mutation.failure
    return mutation.object


# -- exact text (written by hand; a change to the templates must update these on purpose) --------

LABELS_CONST = {"type": "labels", "operation": "add", "path": "app.kubernetes.io/name", "value": {"string": "web"}}
LABELS_CONST_CEL = """\
// labels template, operation add: labels of any object
cel.bind(have, object.metadata[?"labels"].orValue(dyn(null)),
  type(have) != map
    ? [{"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/name": "web"}}]
    : (have[?"app.kubernetes.io/name"] == optional.of("web") ? []
      : [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "web"}])
)
"""

LABELS_REMOVE = {"type": "labels", "operation": "remove", "path": "example.com/team"}
LABELS_REMOVE_CEL = """\
// labels template, operation remove: labels of any object
cel.bind(have, object.metadata[?"labels"].orValue(dyn(null)),
  type(have) == map && "example.com/team" in have
    ? [{"op": "remove", "path": "/metadata/labels/example.com~1team"}] : []
)
"""

ANNOTATIONS_REF = {"type": "annotations", "operation": "replace", "path": "restart",
                   "valueRef": {"from": "current", "path": "/spec/restartPolicy"}}
ANNOTATIONS_REF_CEL = """\
// annotations template, operation replace: annotations of any object
cel.bind(have, object.metadata[?"annotations"].orValue(dyn(null)),
  cel.bind(v, optional.of(object)[?"spec"][?"restartPolicy"],
    !v.hasValue() || v.value() == null ? [] : cel.bind(value, string(v.value()),
      type(have) != map ? [{"op": "add", "path": "/metadata/annotations", "value": {"restart": value}}]
      : have[?"restart"] == optional.of(value) ? []
      : [{"op": "add", "path": "/metadata/annotations/restart", "value": value}]))
)
"""

OVERSELL = {"type": "resourcesOversell", "operation": "replace", "containerNames": ["app"],
            "resourcesOversell": {"cpuFactor": "0.5", "memoryFactor": "0.20"}}
OVERSELL_CEL = """\
// resourcesOversell template, operation replace, requests = limits x factor, containers: ["app"].
// the pod spec: where it is depends on the kind (and API group); {} when missing or not a map;
// a v1 Pod's place is known without a call into the kind table
cel.bind(at, object.?apiVersion.orValue("") == "v1" && object.?kind.orValue("") == "Pod" ? "/spec"
  : workload.podSpecPath(object.?apiVersion.orValue(""), object.?kind.orValue("")),
cel.bind(spec, cel.bind(s, (
    at == "/spec" ? object[?"spec"] :
    at == "/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/template/spec" ? object[?"template"]
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/spec/jobTemplate/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"jobTemplate"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    optional.none()).orValue({}), type(s) == map ? s : dyn({})),
// per container, then init container named ["app"]: its requests (null when missing), where they are and
// what the factors make of its limits; only names and resources are read
cel.bind(entries,
  cel.bind(items, spec[?"containers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .map(i, type(items[i]) == map && items[i].?name.orValue("") in ["app"],
        cel.bind(resources, items[i][?"resources"].orValue({}),
        cel.bind(requests, type(resources) == map ? resources[?"requests"].orValue(dyn(null)) : dyn(null),
        cel.bind(limits, type(resources) == map ? resources[?"limits"].orValue({}) : {}, {
          "requests": type(requests) == map ? requests : dyn(null),
          "path": at + "/containers/" + string(i) + "/resources/requests",
          "wanted": type(limits) != map ? {} : {
            ?"cpu": limits[?"cpu"].optFlatMap(q, q == null ? optional.none()
              : optional.of(string(q).scale("0.5", "0.001"))),
            ?"memory": limits[?"memory"].optFlatMap(q, q == null ? optional.none()
              : optional.of(string(q).scale("0.2", "1")))
          }
        })))))
  + cel.bind(items, spec[?"initContainers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .map(i, type(items[i]) == map && items[i].?name.orValue("") in ["app"],
        cel.bind(resources, items[i][?"resources"].orValue({}),
        cel.bind(requests, type(resources) == map ? resources[?"requests"].orValue(dyn(null)) : dyn(null),
        cel.bind(limits, type(resources) == map ? resources[?"limits"].orValue({}) : {}, {
          "requests": type(requests) == map ? requests : dyn(null),
          "path": at + "/initContainers/" + string(i) + "/resources/requests",
          "wanted": type(limits) != map ? {} : {
            ?"cpu": limits[?"cpu"].optFlatMap(q, q == null ? optional.none()
              : optional.of(string(q).scale("0.5", "0.001"))),
            ?"memory": limits[?"memory"].optFlatMap(q, q == null ? optional.none()
              : optional.of(string(q).scale("0.2", "1")))
          }
        }))))),
  // missing requests are added whole; present ones are set one by one where they differ
  entries.filter(c, c.requests == null && size(c.wanted) > 0)
    .map(c, {"op": "add", "path": c.path, "value": c.wanted})
  + entries.filter(c, c.requests != null && "cpu" in c.wanted
      && c.requests[?"cpu"] != c.wanted[?"cpu"])
    .map(c, {"op": "add", "path": c.path + "/cpu", "value": c.wanted["cpu"]})
  + entries.filter(c, c.requests != null && "memory" in c.wanted
      && c.requests[?"memory"] != c.wanted[?"memory"])
    .map(c, {"op": "add", "path": c.path + "/memory", "value": c.wanted["memory"]})
)))
"""

OVERSELL_REMOVE = {"type": "resourcesOversell", "operation": "remove",
                   "resourcesOversell": {"cpuFactor": "0.5", "diskFactor": "0.1"}}
OVERSELL_REMOVE_CEL = """\
// resourcesOversell template, operation remove, requests = limits x factor, containers: all.
// the pod spec: where it is depends on the kind (and API group); {} when missing or not a map;
// a v1 Pod's place is known without a call into the kind table
cel.bind(at, object.?apiVersion.orValue("") == "v1" && object.?kind.orValue("") == "Pod" ? "/spec"
  : workload.podSpecPath(object.?apiVersion.orValue(""), object.?kind.orValue("")),
cel.bind(spec, cel.bind(s, (
    at == "/spec" ? object[?"spec"] :
    at == "/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/template/spec" ? object[?"template"]
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/spec/jobTemplate/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"jobTemplate"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    optional.none()).orValue({}), type(s) == map ? s : dyn({})),
// per container, then init container: its requests (null when missing), where they are and
// which limits it has; only names and resources are read
cel.bind(entries,
  cel.bind(items, spec[?"containers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .filter(i, type(items[i]) == map)
      .map(i, cel.bind(resources, items[i][?"resources"].orValue({}),
        cel.bind(requests, type(resources) == map ? resources[?"requests"].orValue(dyn(null)) : dyn(null),
        cel.bind(limits, type(resources) == map ? resources[?"limits"].orValue({}) : {}, {
          "requests": type(requests) == map ? requests : dyn(null),
          "path": at + "/containers/" + string(i) + "/resources/requests",
          "limited": type(limits) == map ? limits.filter(name, limits[name] != null) : []
        })))))
  + cel.bind(items, spec[?"initContainers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .filter(i, type(items[i]) == map)
      .map(i, cel.bind(resources, items[i][?"resources"].orValue({}),
        cel.bind(requests, type(resources) == map ? resources[?"requests"].orValue(dyn(null)) : dyn(null),
        cel.bind(limits, type(resources) == map ? resources[?"limits"].orValue({}) : {}, {
          "requests": type(requests) == map ? requests : dyn(null),
          "path": at + "/initContainers/" + string(i) + "/resources/requests",
          "limited": type(limits) == map ? limits.filter(name, limits[name] != null) : []
        }))))),
  entries.filter(c, c.requests != null && "cpu" in c.requests && "cpu" in c.limited)
    .map(c, {"op": "remove", "path": c.path + "/cpu"})
  + entries.filter(c, c.requests != null && "ephemeral-storage" in c.requests && "ephemeral-storage" in c.limited)
    .map(c, {"op": "remove", "path": c.path + "/ephemeral-storage"})
)))
"""

RESOURCES_REMOVE = {"type": "resources", "operation": "remove",
                    "resources": {"limits": {"memory": "0"}, "requests": {"cpu": "0"}}}
RESOURCES_REMOVE_CEL = """\
// resources template, operation remove, containers: all.
// the pod spec: where it is depends on the kind (and API group); {} when missing or not a map;
// a v1 Pod's place is known without a call into the kind table
cel.bind(at, object.?apiVersion.orValue("") == "v1" && object.?kind.orValue("") == "Pod" ? "/spec"
  : workload.podSpecPath(object.?apiVersion.orValue(""), object.?kind.orValue("")),
cel.bind(spec, cel.bind(s, (
    at == "/spec" ? object[?"spec"] :
    at == "/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/template/spec" ? object[?"template"]
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/spec/jobTemplate/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"jobTemplate"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    optional.none()).orValue({}), type(s) == map ? s : dyn({})),
// containers then init containers, each with its JSON pointer
cel.bind(containers,
  cel.bind(items, spec[?"containers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .filter(i, type(items[i]) == map)
      .map(i, {"container": dyn(items[i]), "path": at + "/containers/" + string(i)}))
  + cel.bind(items, spec[?"initContainers"].orValue([]),
    type(items) != list || size(items) == 0 ? [] : range(size(items))
      .filter(i, type(items[i]) == map)
      .map(i, {"container": dyn(items[i]), "path": at + "/initContainers/" + string(i)})),
// per container: its resources, requests and limits (null when missing or not a map)
cel.bind(entries, containers.map(c, cel.bind(resources, c.container[?"resources"].orValue(dyn(null)),
  cel.bind(requests, type(resources) == map ? resources[?"requests"].orValue(dyn(null)) : dyn(null),
  cel.bind(limits, type(resources) == map ? resources[?"limits"].orValue(dyn(null)) : dyn(null), {
    "resources": type(resources) == map ? resources : dyn(null),
    "requests": type(requests) == map ? requests : dyn(null),
    "limits": type(limits) == map ? limits : dyn(null),
    "path": c.path + "/resources"
  })))),
  entries.filter(c, c.requests != null && "cpu" in c.requests)
    .map(c, {"op": "remove", "path": c.path + "/requests/cpu"})
  + entries.filter(c, c.limits != null && "memory" in c.limits)
    .map(c, {"op": "remove", "path": c.path + "/limits/memory"})
))))
"""

TOLERATIONS = {"type": "tolerations", "operation": "add",
               "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}
TOLERATIONS_CEL = """\
// tolerations template, operation add: pod spec of a pod-bearing object; an empty result drops the field
// the pod spec: where it is depends on the kind (and API group); {} when missing or not a map;
// a v1 Pod's place is known without a call into the kind table
cel.bind(at, object.?apiVersion.orValue("") == "v1" && object.?kind.orValue("") == "Pod" ? "/spec"
  : workload.podSpecPath(object.?apiVersion.orValue(""), object.?kind.orValue("")),
cel.bind(spec, cel.bind(s, (
    at == "/spec" ? object[?"spec"] :
    at == "/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/template/spec" ? object[?"template"]
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    at == "/spec/jobTemplate/spec/template/spec" ? object[?"spec"]
      .optFlatMap(v, type(v) == map ? v[?"jobTemplate"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"template"] : optional.none())
      .optFlatMap(v, type(v) == map ? v[?"spec"] : optional.none()) :
    optional.none()).orValue({}), type(s) == map ? s : dyn({})),
at == "" ? [] : cel.bind(have, spec[?"tolerations"].orValue(dyn(null)),
  cel.bind(wanted, tolerations.add(have,
      [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]),
    size(wanted) == 0
      ? ("tolerations" in spec ? [{"op": "remove", "path": at + "/tolerations"}] : [])
      : "tolerations" in spec && have == wanted ? [] : [{"op": "add", "path": at + "/tolerations", "value": wanted}])
)))
"""


@pytest.mark.parametrize(("template", "expected"), [
    (LABELS_CONST, LABELS_CONST_CEL), (LABELS_REMOVE, LABELS_REMOVE_CEL), (ANNOTATIONS_REF, ANNOTATIONS_REF_CEL),
    (OVERSELL, OVERSELL_CEL), (OVERSELL_REMOVE, OVERSELL_REMOVE_CEL), (RESOURCES_REMOVE, RESOURCES_REMOVE_CEL),
    (TOLERATIONS, TOLERATIONS_CEL),
], ids=["labels-const", "labels-remove", "annotations-ref", "oversell", "oversell-remove", "resources-remove",
        "tolerations"])
def test_rendered_text_is_exactly(template: Obj, expected: str) -> None:
    assert render_override(template, TEMPLATE_PATH) == expected
    # compile_policy keeps the same text per rule index (it is written back as renderedCel).
    assert compile_policy(_policy(template)).rendered == {0: expected}


AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}}
EVERY_TEMPLATE = [
    {"type": "annotations", "path": "example.com/team", "value": {"string": "payments"}},
    {"type": "labels", "path": "owner", "valueRef": {"from": "owner", "path": "metadata.name"}},
    {"type": "resources", "containerNames": ["b", "a"], "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}},
    {"type": "resourcesOversell", "resourcesOversell": {"diskFactor": "0.1", "cpuFactor": "0.5", "memoryFactor": ".2"}},
    {"type": "tolerations", "tolerations": [{"key": "b", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]},
    {"type": "affinity", "affinity": AFFINITY},
]


@pytest.mark.parametrize("operation", ["add", "replace", "remove"])
@pytest.mark.parametrize("template", EVERY_TEMPLATE, ids=lambda t: t["type"])
def test_rendering_is_deterministic(template: Obj, operation: str) -> None:
    template = {**template, "operation": operation}
    first = render_override(template, TEMPLATE_PATH)
    again = render_override(copy.deepcopy(template), TEMPLATE_PATH)
    assert first == again
    assert first.encode() == compile_policy(_policy(template)).rendered[0].encode()
    assert first.endswith(")\n") or first.endswith("]\n") or first.endswith(".flatten()\n")
    assert all(line == line.rstrip() and line for line in first[:-1].split("\n"))


def test_string_map_entries_are_rendered_sorted_by_key() -> None:
    text = render_override({"type": "annotations", "operation": "add",
                            "value": {"stringMap": {"zeta": "1", "alpha": "2", "mid/x": "3"}}}, TEMPLATE_PATH)
    assert '"value": {"alpha": "2", "mid/x": "3", "zeta": "1"}' in text
    assert text.index('have[?"alpha"]') < text.index('have[?"mid/x"]') < text.index('have[?"zeta"]')


# -- what the programs do: small library calls, strict RFC 6902 operations -------------------------

def _container(name: str, resources: Obj | None) -> Obj:
    env = [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(20)]  # a container too big to miss
    return {"name": name, "image": f"registry.example.com/{name}:1", "env": env,
            **({"resources": resources} if resources is not None else {})}


def _rich_spec() -> Obj:
    return {"containers": [_container("a", {"limits": {"cpu": "2", "memory": "1Gi"}}),
                           _container("b", {"limits": {"cpu": "1"}, "requests": {"cpu": "500m", "x/y": "1"}})],
            "initContainers": [_container("i", None)],
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "affinity": {"podAntiAffinity": {}}}


OBJECTS = [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"owner": "x"}}, "spec": _rich_spec()},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "annotations": None},
     "spec": {"template": {"metadata": {}, "spec": _rich_spec()}}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
     "spec": {"jobTemplate": {"spec": {"template": {"spec": _rich_spec()}}}}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n", "labels": None}, "spec": {
        "containers": [{"name": "a", "resources": None}, "not a container",
                       {"name": "b", "resources": {"limits": {"cpu": "1", "memory": None}, "requests": None}},
                       {"name": "c", "resources": {"limits": None, "requests": {"cpu": "1"}}}],
        "initContainers": None, "tolerations": None}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"spec": "x"}},
]


@pytest.mark.parametrize("obj", OBJECTS, ids=["pod", "deployment", "cronjob", "nulls", "configmap"])
@pytest.mark.parametrize("operation", ["add", "replace", "remove"])
@pytest.mark.parametrize("template", EVERY_TEMPLATE, ids=lambda t: t["type"])
def test_operations_apply_strictly_and_give_the_final_object(template: Obj, operation: str, obj: Obj) -> None:
    # The ops go to the API server as they are: each must hold under strict RFC 6902 (no missing
    # parent, no absent path removed), and together they must reach the object mutate() returns.
    template = {**template, "operation": operation}
    ops = compile_program(render_override(template, TEMPLATE_PATH)).evaluate({"object": obj, "params": {}})
    assert isinstance(ops, list)
    policy = _policy(template)
    policy["spec"]["resourceSelectors"] = [{"apiVersion": obj["apiVersion"], "kind": obj["kind"]}]
    compiled = compile_policy(policy)
    mutation = overriding.mutate(PolicyIndex([compiled]).matching(obj, "CREATE"), obj, {})
    assert mutation.failure is None, mutation.failure
    assert jsonpatch.apply_patch(obj, ops) == mutation.object


def _holds(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_holds(v, key) for v in value.values())
    return isinstance(value, list | tuple) and any(_holds(v, key) for v in value)


def test_library_calls_never_get_the_object_or_a_container(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: templates handed the whole object (workload.containers(object)) and each
    # container (patch.merge(c.container, ...)) to Python, converted anew at every call.
    seen: list[tuple[Any, ...]] = []
    release = celbridge.release

    def spy() -> None:
        seen.extend(args for args, _ in celbridge.calls_pending())
        release()

    monkeypatch.setattr(celbridge, "release", spy)
    for template in EVERY_TEMPLATE:
        for operation in ("add", "replace", "remove"):
            source = render_override({**template, "operation": operation}, TEMPLATE_PATH)
            compile_program(source).evaluate({"object": OBJECTS[0], "params": {}})
    assert seen  # the spy sees the calls
    assert [args for args in seen if _holds(args, "containers") or _holds(args, "image")] == []


# -- escaping: user text reaches CEL only as literals --------------------------------------------

NASTY = 'say "hi"\\ \n\t\\(x) {{ y }} {% z %} ${w} \'q\' // not a comment'


def test_a_value_with_quotes_backslashes_newlines_and_template_syntax_renders_as_one_literal() -> None:
    text = render_override({"type": "annotations", "operation": "add", "path": "k", "value": {"string": NASTY}},
                           TEMPLATE_PATH)
    literal = r'"say \"hi\"\\ \n\t\\(x) {{ y }} {% z %} ${w} ' + "'q' // not a comment\""
    assert text == ('// annotations template, operation add: annotations of any object\n'
                    'cel.bind(have, object.metadata[?"annotations"].orValue(dyn(null)),\n'
                    '  type(have) != map\n'
                    '    ? [{"op": "add", "path": "/metadata/annotations", "value": {"k": ' + literal + '}}]\n'
                    '    : (have[?"k"] == optional.of(' + literal + ') ? []\n'
                    '      : [{"op": "add", "path": "/metadata/annotations/k", "value": ' + literal + '}])\n'
                    ')\n')


@pytest.mark.parametrize("value", [
    NASTY, "x\u2028y", "a \x85b", "\r\n", "é😀", " pad ", "", "nul\x00l",
], ids=["nasty", "u2028", "nel", "crlf", "unicode", "spaces", "empty", "nul"])
def test_a_value_lands_verbatim(value: str) -> None:
    # Regression: str.splitlines() split rendered text at U+2028/U+0085 inside string literals;
    # and an empty string constant was refused as "empty". A NUL survives since constants reach
    # the patch as CEL literals (cel-expr-python cuts strings at NUL only when it hands them to
    # a Python function or reads them from an object).
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    got = _mutated({"type": "annotations", "operation": "add", "path": "example.com/note",
                    "value": {"string": value}}, pod)
    assert got["metadata"] == {"name": "p", "annotations": {"example.com/note": value}}


def test_container_names_cannot_escape_the_comment_line() -> None:
    # Regression: containerNames were written raw into a `//` comment, so a newline in a name
    # injected the rest of the name as CEL code.
    template = {"type": "resources", "operation": "add", "containerNames": ["x\n[1]", "app"],
                "resources": {"limits": {"cpu": "1"}}}
    text = render_override(template, TEMPLATE_PATH)
    assert text.split("\n")[0] == '// resources template, operation add, containers: ["x\\n[1]", "app"].'
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app"}, {"name": "x\n[1]"}, {"name": "other"}]}}
    got = _mutated(template, pod)
    assert got["spec"]["containers"] == [{"name": "app", "resources": {"limits": {"cpu": "1"}}},
                                         {"name": "x\n[1]", "resources": {"limits": {"cpu": "1"}}},
                                         {"name": "other"}]


# -- refused at compile time, with the field path --------------------------------------------------

@pytest.mark.parametrize("factor", ["0", "1.5", "abc", "-0.5", "0.0", "NaN", "Infinity", "1e3"])
def test_bad_oversell_factors_are_refused(factor: str) -> None:
    errors = _compile_errors({"type": "resourcesOversell", "operation": "add",
                              "resourcesOversell": {"cpuFactor": "0.5", "memoryFactor": factor}})
    assert [e.path for e in errors] == [f"{TEMPLATE_PATH}.resourcesOversell.memoryFactor"]


@pytest.mark.parametrize("field", ["cpuFactor", "memoryFactor", "diskFactor"])
@pytest.mark.parametrize("factor", ["0", "1.5", "abc"])
def test_each_factor_names_its_own_path(field: str, factor: str) -> None:
    errors = _compile_errors({"type": "resourcesOversell", "operation": "replace",
                              "resourcesOversell": {field: factor}})
    assert [e.path for e in errors] == [f"spec.overrideRules[0].overriders.template.resourcesOversell.{field}"]


@pytest.mark.parametrize("factor", ["1", "0.001", "1e-1", ".5", "0.999999"])
def test_factors_in_range_are_accepted(factor: str) -> None:
    compile_policy(_policy({"type": "resourcesOversell", "operation": "add",
                            "resourcesOversell": {"cpuFactor": factor}}))


@pytest.mark.parametrize(("template", "path"), [
    ({"type": "resourcesOversell", "operation": "add", "resourcesOversell": {}}, ".resourcesOversell"),
    ({"type": "resources", "operation": "add", "resources": {}}, ".resources"),
    ({"type": "resources", "operation": "add", "resources": {"limits": {"cpu": "1x"}}}, ".resources.limits[cpu]"),
    ({"type": "labels", "operation": "add", "value": {"string": "v"}}, ".path"),
    ({"type": "labels", "operation": "remove"}, ".path"),
    ({"type": "annotations", "operation": "add", "path": "k"}, ".value"),
    ({"type": "annotations", "operation": "add", "path": "k", "valueRef": {"from": "k8s"}}, ".valueRef.k8s"),
    ({"type": "annotations", "operation": "add", "path": "k", "valueRef": {"from": "http", "http": {}}},
     ".valueRef.http.url"),
    ({"type": "tolerations", "operation": "add", "tolerations": []}, ".tolerations"),
    ({"type": "affinity", "operation": "add"}, ".affinity"),
], ids=["oversell-empty", "resources-empty", "bad-quantity", "no-key", "remove-no-key", "no-value",
        "k8s-without-block", "http-without-url", "no-tolerations", "no-affinity"])
def test_malformed_templates_are_refused_with_the_field_path(template: Obj, path: str) -> None:
    errors = _compile_errors(template)
    assert [e.path for e in errors] == [TEMPLATE_PATH + path]


# -- what the pod-spec templates do (one template on a Pod; every kind is in test_overriding) ----

def _pod(spec: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _oversell(operation: str, factors: Obj, spec: Obj, names: list[str] | None = None) -> Obj:
    extra = {"containerNames": names} if names else {}
    return _mutated({"type": "resourcesOversell", "operation": operation, "resourcesOversell": factors, **extra},
                    _pod(spec))["spec"]


@pytest.mark.parametrize(("factor_field", "resource", "limit", "factor", "expected"), [
    ("cpuFactor", "cpu", "2", "0.5", "1"),
    ("cpuFactor", "cpu", "1500m", "0.5", "750m"),
    ("cpuFactor", "cpu", "0.5", "0.333", "166m"),  # rounded down to whole millicores
    ("cpuFactor", "cpu", "1", "0.333", "333m"),
    ("cpuFactor", "cpu", "1.5", "0.5", "750m"),
    ("cpuFactor", "cpu", "+2", "0.5", "1"),
    ("cpuFactor", "cpu", "7m", "0.5", "3m"),
    ("cpuFactor", "cpu", "2500u", "0.5", "1m"),
    ("cpuFactor", "cpu", "100n", "0.5", "0"),
    ("cpuFactor", "cpu", "3k", "0.5", "1500"),
    ("cpuFactor", "cpu", "1e3", "0.5", "500"),
    ("cpuFactor", "cpu", "2e3", "0.5", "1e3"),  # DecimalExponent stays in that format
    ("cpuFactor", "cpu", "4", "1", "4"),
    ("memoryFactor", "memory", "4Gi", "0.2", "858993459"),  # rounded down to whole bytes
    ("memoryFactor", "memory", "1000M", "0.2", "200M"),
    ("memoryFactor", "memory", "1k", "0.5", "500"),
    ("memoryFactor", "memory", "1Ki", "0.5", "512"),
    ("memoryFactor", "memory", "2Mi", "0.5", "1Mi"),
    ("memoryFactor", "memory", "1Mi", "0.3", "314572"),
    ("memoryFactor", "memory", "0.5Gi", "0.5", "256Mi"),
    ("memoryFactor", "memory", "1.5Gi", "0.5", "768Mi"),
    ("memoryFactor", "memory", "1Ti", "0.5", "512Gi"),
    ("memoryFactor", "memory", "1Pi", "0.25", "256Ti"),
    ("memoryFactor", "memory", "1Ei", "0.5", "512Pi"),
    ("memoryFactor", "memory", "1G", "0.5", "500M"),
    ("memoryFactor", "memory", "1.5G", "0.5", "750M"),
    ("memoryFactor", "memory", "1T", "0.1", "100G"),
    ("memoryFactor", "memory", "1P", "0.5", "500T"),
    ("memoryFactor", "memory", "1E", "0.5", "500P"),
    ("memoryFactor", "memory", "5e6", "0.2", "1e6"),
    ("memoryFactor", "memory", "129e6", "0.5", "64500e3"),
    ("memoryFactor", "memory", "3", "0.5", "1"),
    ("memoryFactor", "memory", "1500m", "0.5", "0"),
    ("diskFactor", "ephemeral-storage", "10Gi", "0.1", "1Gi"),
    ("diskFactor", "ephemeral-storage", "1G", "0.1", "100M"),
])
def test_oversell_quantity_maths(factor_field: str, resource: str, limit: str, factor: str, expected: str) -> None:
    spec = _oversell("add", {factor_field: factor}, {"containers": [{"name": "app", "resources": {
        "limits": {resource: limit}}}]})
    assert spec["containers"] == [{"name": "app", "resources": {"limits": {resource: limit},
                                                                "requests": {resource: expected}}}]


def _box(name: str, limits: Obj | None, requests: Obj | None = None) -> Obj:
    resources = {**({"limits": limits} if limits is not None else {}),
                 **({"requests": requests} if requests is not None else {})}
    return {"name": name, "resources": resources}


OVERSELL_SPEC = {
    "containers": [_box("a", {"cpu": "2", "memory": "1Gi"}), _box("b", {"memory": "2Gi"}, {"cpu": "3"})],
    "initContainers": [_box("init", {"cpu": "1"})],
    "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
}


def test_oversell_covers_every_container_and_init_container_but_not_ephemeral_ones() -> None:
    spec = _oversell("replace", {"cpuFactor": "0.5", "memoryFactor": "0.5"}, OVERSELL_SPEC)
    assert spec == {
        "containers": [_box("a", {"cpu": "2", "memory": "1Gi"}, {"cpu": "1", "memory": "512Mi"}),
                       # no cpu limit: the cpu request is left alone
                       _box("b", {"memory": "2Gi"}, {"cpu": "3", "memory": "1Gi"})],
        "initContainers": [_box("init", {"cpu": "1"}, {"cpu": "500m"})],
        "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
    }


def test_oversell_container_names_restrict() -> None:
    spec = _oversell("add", {"cpuFactor": "0.5", "memoryFactor": "0.5"}, OVERSELL_SPEC, names=["b", "init"])
    assert spec["containers"] == [_box("a", {"cpu": "2", "memory": "1Gi"}),
                                  _box("b", {"memory": "2Gi"}, {"cpu": "3", "memory": "1Gi"})]
    assert spec["initContainers"] == [_box("init", {"cpu": "1"}, {"cpu": "500m"})]


def test_oversell_remove_drops_only_requests_computed_from_a_limit() -> None:
    spec = {"containers": [_box("a", {"cpu": "2", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
                           _box("b", {"memory": "2Gi"}, {"cpu": "3", "memory": "1Gi"})]}
    got = _oversell("remove", {"cpuFactor": "0.5", "memoryFactor": "0.5"}, spec)
    assert got["containers"] == [_box("a", {"cpu": "2", "memory": "1Gi"}, {}),
                                 _box("b", {"memory": "2Gi"}, {"cpu": "3"})]


@pytest.mark.parametrize("resources", [None, {"limits": None}, {"limits": {"cpu": None}}])
def test_oversell_treats_null_like_absent(resources: Obj | None) -> None:
    # Regression: a null resources/limits/limit made the rule fail ("No matching overloads").
    spec = {"containers": [{"name": "a", "resources": resources}]}
    assert _oversell("add", {"cpuFactor": "0.5"}, spec) == spec
    assert _oversell("remove", {"cpuFactor": "0.5"}, spec) == spec


def test_resources_are_written_canonically_to_every_container() -> None:
    spec = {"containers": [{"name": "a"}, _box("b", {"cpu": "500m"}, {"nvidia.com/gpu": "2"})],
            "initContainers": [{"name": "i"}]}
    wanted = {"limits": {"cpu": "0.5", "memory": "1024Mi", "nvidia.com/gpu": 1}, "requests": {"cpu": 100}}
    got = _mutated({"type": "resources", "operation": "replace", "resources": wanted}, _pod(spec))["spec"]
    canonical = {"limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}, "requests": {"cpu": "100"}}
    assert got == {"containers": [{"name": "a", "resources": canonical},
                                  {"name": "b", "resources": {**canonical, "requests": {"nvidia.com/gpu": "2",
                                                                                        "cpu": "100"}}}],
                   "initContainers": [{"name": "i", "resources": canonical}]}
    removed = _mutated({"type": "resources", "operation": "remove", "containerNames": ["b"],
                        "resources": {"requests": {"nvidia.com/gpu": "0"}}}, _pod(got))["spec"]
    assert removed["containers"][1]["resources"]["requests"] == {"cpu": "100"}
    assert removed["containers"][0] == got["containers"][0]
