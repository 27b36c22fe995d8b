"""Property tests of inject rules over generated workloads whose containers already hold some of the
injected keys, equal or not, under every onConflict and with two policies at once:

(a) the response patch replays with a strict RFC 6902 applier (``jsonpatch``) to the returned object;
(b) reinvocation changes nothing: mutating the result again gives no patch (or the same denial);
(c) a key the policies inject ends up at most once in each list.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.objects import workloads
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding
from tests.unit.engine.test_override_properties import SETTINGS
from tests.unit.engine.test_override_properties import workloads as base_workloads

Obj = dict[str, Any]
ENV_POOL = [{"name": "DB_PORT", "value": "6379"}, {"name": "DB_PORT", "value": "5432"},
            {"name": "LOG", "value": "debug"}, {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name",
                                                                                        "apiVersion": "v1"}}}]
MOUNT_POOL = [{"name": "cache", "mountPath": "/cache"}, {"name": "cache", "mountPath": "/other"},
              {"name": "scratch", "mountPath": "/cache"}, {"name": "data", "mountPath": "/data", "readOnly": True}]
ENV_FROM_POOL = [{"configMapRef": {"name": "db"}}, {"configMapRef": {"name": "db", "optional": True}},
                 {"prefix": "S_", "secretRef": {"name": "db"}}]
VOLUME_POOL = [{"name": "cache", "emptyDir": {}}, {"name": "cache", "configMap": {"name": "c", "defaultMode": 420}},
               {"name": "data", "emptyDir": {"medium": "Memory"}}]


def _unique(items: list[Obj], *keys: str) -> list[Obj]:
    out: list[Obj] = []
    for item in items:
        if not any(item.get(k) == o.get(k) for o in out for k in keys):
            out.append(item)
    return out


@st.composite
def workloads_with_items(draw: st.DrawFn) -> Obj:
    obj: Obj = json.loads(json.dumps(draw(base_workloads())))
    for _, _, container in workloads.containers(obj):
        if draw(st.booleans()):
            container["env"] = _unique(draw(st.lists(st.sampled_from(ENV_POOL), max_size=3)), "name")
        if draw(st.booleans()):
            container["volumeMounts"] = _unique(draw(st.lists(st.sampled_from(MOUNT_POOL), max_size=3)),
                                                "name", "mountPath")
        if draw(st.booleans()):
            container["envFrom"] = draw(st.lists(st.sampled_from(ENV_FROM_POOL), max_size=2))
    spec = workloads.pod_spec(obj)
    assert spec is not None
    if draw(st.booleans()):
        spec["volumes"] = _unique(draw(st.lists(st.sampled_from(VOLUME_POOL), max_size=2)), "name")
    return obj


def _policy(name: str, mode: str, env: Obj, mount: Obj, volume: Obj) -> CompiledPolicy:
    return compile_policy({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy",
        "metadata": {"name": name, "resourceVersion": "3"},
        "spec": {"overrideRules": [{"overriders": {"template": {"type": "inject", "inject": {
            "env": [env], "volumeMounts": [mount], "volumes": [volume],
            "envFrom": [ENV_FROM_POOL[0]], "onConflict": mode}}}}]}})


MODES = ("Skip", "Deny", "Override")
FIRST = {mode: _policy("first", mode, ENV_POOL[0], MOUNT_POOL[0], VOLUME_POOL[0]) for mode in MODES}
SECOND = {mode: _policy("second", mode, ENV_POOL[1], MOUNT_POOL[0], VOLUME_POOL[0]) for mode in MODES}
AGREEING = {mode: _policy("agreeing", mode, ENV_POOL[0], MOUNT_POOL[0], VOLUME_POOL[0]) for mode in MODES}


def _mutate(policies: list[CompiledPolicy], obj: Obj) -> overriding.Mutation:
    matches = list(PolicyIndex(policies).matching(obj, "CREATE"))
    return overriding.mutate(matches, obj, {})


def _keys_once(obj: Obj) -> None:
    spec = workloads.pod_spec(obj)
    assert spec is not None
    lists = [c.get(f) for _, _, c in workloads.containers(obj) for f in ("env", "volumeMounts")]
    for items in [*lists, spec.get("volumes")]:
        names = [i.get("name") for i in items or []]
        for key in ("DB_PORT", "cache"):
            assert names.count(key) <= 1, items


@pytest.mark.parametrize("first", MODES)
@pytest.mark.parametrize("second", ["none", "agreeing", *MODES])
@SETTINGS
@given(obj=workloads_with_items())
def test_inject_replays_strictly_is_idempotent_and_adds_keys_once(first: str, second: str, obj: Obj) -> None:
    policies = [FIRST[first]]
    if second == "agreeing":
        policies.append(AGREEING[first])
    elif second != "none":
        policies.append(SECOND[second])
    before = json.loads(json.dumps(obj))
    once = _mutate(policies, obj)
    assert obj == before
    if once.failure is not None:
        assert "onConflict Deny" in once.failure.reason
        assert once.object == before and once.patch == []
        return
    assert jsonpatch.apply_patch(before, once.patch) == once.object
    twice = _mutate(policies, json.loads(json.dumps(once.object)))
    assert twice.failure is None and twice.patch == [] and twice.object == once.object
    if first == "Override" and second in ("none", "agreeing", "Override"):
        _keys_once(once.object)
