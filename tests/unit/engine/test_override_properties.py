"""Property tests of overriding.mutate over generated workloads.

(a) The patch ``mutate`` returns replays with a strict third-party RFC 6902 applier
    (``jsonpatch``) to exactly the object it returns, for every policy of a fixed set.
(b) Every template type and operation is idempotent: mutating the result again changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding

Obj = dict[str, Any]
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- generated objects -----------------------------------------------------------------------------

SUFFIXES = ["", "", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "n", "u", "P", "E", "Pi", "Ei",
            "e3", "E2", "e-3", "e+6"]


@st.composite
def quantities(draw: st.DrawFn) -> str:
    """A valid Kubernetes quantity in any written form: 2, 1.5Gi, .5, 500m, 1e3, +3k."""
    whole = draw(st.integers(0, 5000))
    fraction = draw(st.one_of(st.none(), st.integers(0, 999)))
    sign = draw(st.sampled_from(["", "", "+"]))
    number = f"{whole}" if fraction is None else f"{whole}.{fraction}"
    if draw(st.booleans()) and fraction is not None:
        number = f".{fraction}"  # no integer part
    return f"{sign}{number}{draw(st.sampled_from(SUFFIXES))}"


RESOURCE_NAMES = ["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"]
resource_maps = st.dictionaries(st.sampled_from(RESOURCE_NAMES), quantities(), max_size=4)
MOSTLY = st.sampled_from([True, True, True, False])


@st.composite
def containers(draw: st.DrawFn, prefix: str) -> list[Obj]:
    count = draw(st.integers(0, 3))
    out = []
    for i in range(count):
        container: Obj = {"name": f"{prefix}{i}", "image": "busybox"}
        resources: Obj = {}
        for group in ("limits", "requests"):
            if draw(MOSTLY):
                resources[group] = draw(resource_maps)
        if draw(MOSTLY):
            container["resources"] = resources
        out.append(container)
    return out


TOLERATION_POOL = [
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "spot", "operator": "Exists"},
    {"key": "zone", "value": "a", "effect": "PreferNoSchedule"},
]
NODE_TERMS = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]} for z in ("a", "b", "c")]
POD_TERMS = [{"labelSelector": {"matchLabels": {"app": a}}, "topologyKey": "kubernetes.io/hostname"}
             for a in ("db", "web", "cache")]


@st.composite
def affinities(draw: st.DrawFn) -> Obj:
    affinity: Obj = {}
    if draw(st.booleans()):
        node: Obj = {}
        if draw(st.booleans()):
            node[REQ] = {"nodeSelectorTerms": draw(st.lists(st.sampled_from(NODE_TERMS), max_size=3))}
        if draw(st.booleans()):
            node[PREF] = [{"weight": w, "preference": t} for w, t in draw(
                st.lists(st.tuples(st.integers(1, 100), st.sampled_from(NODE_TERMS)), max_size=3))]
        affinity["nodeAffinity"] = node
    for sub in ("podAffinity", "podAntiAffinity"):
        if draw(st.booleans()):
            affinity[sub] = {REQ: draw(st.lists(st.sampled_from(POD_TERMS), max_size=3))}
    return affinity


KEYS = st.sampled_from(["app", "tier", "owner", "app.kubernetes.io/name", "example.com/team", "a~b", "x/y/z"])
VALUES = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@st.composite
def workloads(draw: st.DrawFn) -> Obj:
    spec: Obj = {"containers": draw(containers("c"))}
    if draw(st.booleans()):
        spec["initContainers"] = draw(containers("init"))
    if draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(st.sampled_from(TOLERATION_POOL), max_size=4))
    if draw(st.booleans()):
        spec["affinity"] = draw(affinities())
    meta: Obj = {"name": "w", "namespace": "default"}
    for field in ("labels", "annotations"):
        if draw(st.booleans()):
            meta[field] = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    kind = draw(st.sampled_from(["Pod", "Deployment", "CronJob"]))
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    template = {"metadata": {"labels": {"app": "w"}}, "spec": spec}
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {"replicas": 2, "template": template}}
    return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}


# -- the fixed policies -----------------------------------------------------------------------------

OVERSELL = {"cpuFactor": "0.5", "memoryFactor": "0.3", "diskFactor": "0.25"}
TEMPLATES: dict[str, Obj] = {
    "labels": {"path": "app.kubernetes.io/name", "value": {"string": "web"}},
    "annotations": {"value": {"stringMap": {"example.com/team": "payments", "owner": "o\"q\\\n"}}},
    "resources": {"resources": {"limits": {"cpu": "1500m", "nvidia.com/gpu": "1"}, "requests": {"memory": "0.5Gi"}}},
    "resourcesOversell": {"resourcesOversell": OVERSELL},
    "tolerations": {"tolerations": [TOLERATION_POOL[0], TOLERATION_POOL[3],
                                    {"key": "batch", "operator": "Exists", "effect": "NoSchedule"}]},
    "affinity": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": NODE_TERMS[:2]},
                                               PREF: [{"weight": 5, "preference": NODE_TERMS[2]}]},
                              "podAntiAffinity": {REQ: POD_TERMS[1:]}}},
}
REMOVE_PATHS = {"labels": "app", "annotations": "example.com/team"}


def _template(type_: str, operation: str) -> Obj:
    fields = dict(TEMPLATES[type_])
    if operation == "remove" and type_ in REMOVE_PATHS:
        fields = {"path": REMOVE_PATHS[type_]}
    return {"template": {"type": type_, "operation": operation, **fields}}


def _policy(name: str, *overriders: Obj) -> CompiledPolicy:
    return compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": name},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "apps/v1",
                                                                             "kind": "Deployment"},
                                       {"apiVersion": "batch/v1", "kind": "CronJob"}],
                 "overrideRules": [{"overriders": o} for o in overriders]}})


OPERATIONS = ("add", "replace", "remove")
SINGLE = {(t, op): _policy(f"{t}-{op}", _template(t, op)) for t in TEMPLATES for op in OPERATIONS}
COMBINED = _policy("everything", *(_template(t, "add") for t in TEMPLATES),
                   {"template": {"type": "resources", "operation": "remove",
                                 "resources": {"requests": {"ephemeral-storage": "0"}}},
                    "plaintext": [{"op": "replace", "path": "/metadata/annotations/from-plaintext", "value": "x"}],
                    "origin": [{"type": "labels", "operation": "add", "labels": {"origin": "yes"}}]},
                   _template("tolerations", "replace"), _template("affinity", "remove"),
                   _template("resourcesOversell", "remove"), _template("labels", "remove"))


def _unaliased(obj: Obj) -> Obj:
    # Strategies share dicts (sampled_from) and deepcopy keeps the sharing; JSON from the wire
    # never has it, and jsonpatch patching one alias would change the others too.
    result: Obj = json.loads(json.dumps(obj))
    return result


def _mutate(policy: CompiledPolicy, obj: Obj) -> overriding.Mutation:
    matches = list(PolicyIndex([policy]).matching(obj, "CREATE"))
    assert matches
    return overriding.mutate(matches, obj, {})


# One test per template type (its three operations drawn), so each type gets its share of examples.
@pytest.mark.parametrize("type_", [*TEMPLATES, "everything"])
@SETTINGS
@given(obj=workloads(), operation=st.sampled_from(OPERATIONS))
def test_the_patch_replays_strictly_to_the_returned_object(type_: str, obj: Obj, operation: str) -> None:
    policy = COMBINED if type_ == "everything" else SINGLE[(type_, operation)]
    before = _unaliased(obj)
    mutation = _mutate(policy, obj)
    assert mutation.failure is None, mutation.failure
    assert obj == before
    assert jsonpatch.apply_patch(before, mutation.patch) == mutation.object


@pytest.mark.parametrize("type_", list(TEMPLATES))
@SETTINGS
@given(obj=workloads(), operation=st.sampled_from(OPERATIONS))
def test_every_template_is_idempotent(type_: str, obj: Obj, operation: str) -> None:
    policy = SINGLE[(type_, operation)]
    once = _mutate(policy, obj)
    assert once.failure is None, once.failure
    twice = _mutate(policy, once.object)
    assert twice.failure is None, twice.failure
    assert twice.patch == []
    assert twice.object == once.object
