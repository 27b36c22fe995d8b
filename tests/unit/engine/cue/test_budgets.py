"""Compiled CUE goes through the cost estimate and runtime bounds of any CEL: refused when over
budget, refused on requests larger than its estimate covers, evaluated off the event loop when dear."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kinitiras_py.admission import pipeline as pipeline_module
from kinitiras_py.admission.pipeline import Request
from kinitiras_py.base.errors import CelEvalError, PolicyErrors
from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.apply import build_engine

API = "policy.kcloudlabs.io/v1alpha1"
NESTED = "[for a in object.spec.containers for b in object.spec.containers for c in object.spec.containers " \
         "for d in object.spec.containers {op: \"add\", path: \"/x\", value: 1}]"
ENVS = 'patches: [for c in object.spec.containers for e in c.env if e.name == "x" {op: "add", path: "/x", value: 1}]'


def _cop(overriders: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ClusterOverridePolicy", "metadata": {"name": "c"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "overrideRules": [{"overriders": overriders}]}}


def _pod(containers: int, pad: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                             "annotations": {"pad": "x" * pad}},
            "spec": {"containers": [{"name": f"c{i}", "image": "nginx", "env": [{"name": "y", "value": "1"}]}
                                    for i in range(containers)]}}


def test_over_budget_cue_is_refused_as_cel_is() -> None:
    refused = []
    for overriders in ({"cue": "object: _\npatches: " + NESTED},
                       {"cel": "object.spec.containers.map(a, object.spec.containers.map(b, object.spec.containers"
                               ".map(c, object.spec.containers.map(d, {'op': 'add', 'path': '/x', 'value': 1}))))"
                               ".flatten(3)"}):
        with pytest.raises(PolicyErrors) as caught:
            compile_policy(_cop(overriders))
        refused.append(str(caught.value))
    assert all("exceeds the budget" in text for text in refused), refused
    assert "spec.overrideRules[0].overriders.cue" in refused[0]


def test_request_beyond_the_estimate_is_refused() -> None:
    program = cel.compile_program(compile_cue("object: _\n" + ENVS, "override"))
    assert program.bound.items is not None  # estimated for bounded lists, checked per request
    program.evaluate({"object": _pod(3)}, remember=False)
    with pytest.raises(CelEvalError, match="too large for this expression's cost bound"):
        program.evaluate({"object": _pod(program.bound.items + 1)}, remember=False)


def _cvp(cue: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ClusterValidatePolicy", "metadata": {"name": "v"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], "validateRules": [{"cue": cue}]}}


VALIDATE = 'validate: {valid: len([for c in object.spec.containers for e in c.env if e.name == "x" {e}]) == 0}'


@pytest.mark.parametrize("policy", [_cop({"cue": "object: _\n" + ENVS}), _cvp("object: _\n" + VALIDATE)],
                         ids=["override", "validate"])
def test_a_dear_cue_rule_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch, policy: dict[str, Any]) -> None:
    engine, compiled = build_engine([policy])
    rule = compiled[0].rules[0]
    assert rule.cue is not None and rule.cue.bound.cost > cel.INLINE_COST > rule.cue.bound.base
    hops: list[object] = []
    real = asyncio.to_thread

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(pipeline_module.asyncio, "to_thread", counted)
    for pad, expected in ((0, 0), (cel.INLINE_BYTES, 1)):
        hops.clear()
        request = Request(operation="CREATE", object=_pod(2, pad), namespace="default", user_info={"username": "t"})
        decision = engine.admit_sync(request)
        assert decision.allowed
        assert len(hops) == expected, (pad, hops)

