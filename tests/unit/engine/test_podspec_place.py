"""The pod-spec templates find a v1 Pod's pod spec without calling ``workload.podSpecPath``, and
every other object's where that function says it is."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation import builtins, celbridge
from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.rendering.environment import make_environment
from tests.compiling import render_override

KINDS = [("v1", "Pod"), ("v2", "Pod"), ("", "Pod"), ("apps/v1", "Pod"), ("v1", "pod"), ("v1", "Deployment"),
         ("apps/v1", "Deployment"), ("extensions/v1beta1", "DaemonSet"), ("batch/v1", "CronJob"),
         ("v1", "PodTemplate"), ("batch/v1", "Job"), ("v1", "ConfigMap"), ("example.com/v1", "Deployment")]


def _place_program() -> str:
    # The macro opens two binds (at, spec); closing them on `at` gives where it put the pod spec.
    macro = '{% from "pod.cel.j2" import pod_spec with context %}{{ pod_spec(pod_spec_shapes()) }} at))'
    return make_environment().from_string(macro).render()


@pytest.mark.parametrize(("api_version", "kind"), KINDS)
def test_the_place_is_the_kind_tables(api_version: str, kind: str) -> None:
    program = compile_program(_place_program())
    assert program.evaluate({"object": {"apiVersion": api_version, "kind": kind}}) == \
        builtins.pod_spec_path(api_version, kind)


def test_a_missing_or_mistyped_kind_fails_as_the_kind_table_does() -> None:
    called = compile_program('workload.podSpecPath(object.?apiVersion.orValue(""), object.?kind.orValue(""))')
    program = compile_program(_place_program())
    for obj in ({"apiVersion": "v1", "kind": 5}, {"apiVersion": 3, "kind": "Pod"}, None, {}):
        outcomes = []
        for p in (called, program):
            try:
                outcomes.append(p.evaluate({"object": obj}))
            except CelEvalError as e:
                outcomes.append(f"{type(e).__name__}: {e}")
        assert outcomes[0] == outcomes[1], obj


def test_a_v1_pod_is_oversold_without_asking_the_kind_table(monkeypatch: pytest.MonkeyPatch) -> None:
    source = render_override({"type": "resourcesOversell", "operation": "replace",
                              "resourcesOversell": {"cpuFactor": "0.5"}}, "template")
    calls: list[tuple[Any, ...]] = []
    release = celbridge.release

    def recording() -> None:
        calls.extend(args for args, _ in celbridge.calls_pending())
        release()

    monkeypatch.setattr(celbridge, "release", recording)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}]}}
    ops = compile_program(source).evaluate({"object": pod}, remember=False)
    assert ops == [{"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"cpu": "1"}}]
    assert ("2", "0.5", "0.001") in calls  # the calls are seen: scale was one of them
    assert ("v1", "Pod") not in calls
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": pod["spec"]}}}
    calls.clear()
    ops = compile_program(source).evaluate({"object": deployment}, remember=False)
    assert ops == [{"op": "add", "path": "/spec/template/spec/containers/0/resources/requests",
                    "value": {"cpu": "1"}}]
    assert ("apps/v1", "Deployment") in calls
