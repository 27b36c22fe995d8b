"""The rule kinds are one typed family (engine/kinds/): a module per kind with its compiled form, its
compilation and its step; a compiled rule holds its kinds in the order they run, and the request
path runs a rule by calling each kind's step, whatever the kind."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine import kinds
from kinitiras_py.engine.kinds import base
from kinitiras_py.engine.kinds.cel import CelCheck, CelOverrider
from kinitiras_py.engine.kinds.cue import CueCheck, CueOverrider
from kinitiras_py.engine.kinds.javascript import JavascriptCheck, JavascriptOverrider
from kinitiras_py.engine.kinds.origin import OriginOverrider
from kinitiras_py.engine.kinds.plaintext import PlaintextOverrider
from kinitiras_py.engine.kinds.template import TemplateCheck, TemplateOverrider
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, CompiledValidateRule
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.running import overriding, validating

API = "policy.kcloudlabs.io/v1alpha1"
KIND_MODULES = sorted(info.name for info in pkgutil.iter_modules(kinds.__path__) if info.name != "base")


def _stepping(module: Any) -> list[type]:
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and callable(getattr(cls, "step", None))]


def test_the_family_is_the_kinds_the_issue_names() -> None:
    assert KIND_MODULES == ["cel", "cue", "inject", "javascript", "origin", "plaintext", "select", "sidecar",
                            "template"]


@pytest.mark.parametrize("name", [n for n in KIND_MODULES if n != "select"])
def test_every_kind_module_holds_frozen_compiled_forms_with_a_step_and_their_compilation(name: str) -> None:
    module = importlib.import_module(f"kinitiras_py.engine.kinds.{name}")
    stepping = _stepping(module)
    assert stepping, f"kinds.{name} defines no compiled form with a step"
    for cls in stepping:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, f"{cls.__name__} is not frozen"
    assert any(fn.startswith("compile_") for fn, _ in inspect.getmembers(module, inspect.isfunction)
               if getattr(module, fn).__module__ == module.__name__), f"kinds.{name} compiles nothing"


def _policy(kind: str, rule: Obj) -> Obj:
    field = "validateRules" if kind == "ClusterValidatePolicy" else "overrideRules"
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "p"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], field: [rule]}}


EVERY_OVERRIDER = {
    # Written in another order than they run: the rule's order is fixed, not the policy's.
    "origin": [{"type": "annotations", "operation": "add", "annotations": {"o": "6"}}],
    "plaintext": [{"op": "add", "path": "/metadata/annotations/p", "value": "5"}],
    "javascript": {"source": "function jsa_mutate(obj) { return {Allowed: true} }"},
    "cel": '[{"op": "add", "path": "/metadata/annotations/c", "value": "3"}]',
    "cue": 'patches: [{op: "add", path: "/metadata/annotations/q", value: "2"}]',
    "template": {"type": "annotations", "operation": "add", "path": "t", "value": {"string": "1"}},
}


def test_an_override_rule_holds_its_overriders_in_the_order_they_apply() -> None:
    rule = compile_policy(_policy("ClusterOverridePolicy", {"overriders": EVERY_OVERRIDER})).rules[0]
    assert isinstance(rule, CompiledOverrideRule)
    assert [type(part) for part in rule.overriders] == [
        TemplateOverrider, CueOverrider, CelOverrider, JavascriptOverrider, PlaintextOverrider, OriginOverrider]


def test_a_validate_rule_holds_its_checks_in_the_order_they_run() -> None:
    written = {"javascript": {"source": "function jsa_validate(obj) { return {Allowed: true} }"},
               "cel": "true", "cue": "validate: {valid: true}",
               "template": {"type": "condition",
                            "condition": {"cond": "Exist", "dataRef": {"from": "current", "path": "metadata"}}}}
    rule = compile_policy(_policy("ClusterValidatePolicy", written)).rules[0]
    assert isinstance(rule, CompiledValidateRule)
    assert [type(part) for part in rule.checks] == [TemplateCheck, CueCheck, CelCheck, JavascriptCheck]


@dataclasses.dataclass(frozen=True)
class Recording:
    """A kind the request path has never heard of: it is run through its step like any other."""

    name: str
    seen: list[str]

    def step(self, run: base.OverrideStep) -> None:
        self.seen.append(self.name)
        run.apply([{"op": "add", "path": f"/metadata/annotations/{self.name}", "value": str(len(self.seen))}])


def test_a_rule_is_run_by_calling_each_kind_s_step_in_order() -> None:
    seen: list[str] = []
    policy = compile_policy(_policy("ClusterOverridePolicy", {"overriders": {"plaintext": [
        {"op": "add", "path": "/metadata/annotations/first", "value": "0"}]}}))
    rule = policy.rules[0]
    assert isinstance(rule, CompiledOverrideRule)
    ruled = dataclasses.replace(rule, overriders=(*rule.overriders, Recording("b", seen), Recording("a", seen)))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "annotations": {}}}
    draft = overriding.apply_rule(pod, ruled, policy, {})  # type: ignore[arg-type]
    assert seen == ["b", "a"]
    assert draft.doc["metadata"]["annotations"] == {"first": "0", "b": "1", "a": "2"}


@dataclasses.dataclass(frozen=True)
class Refusing:
    reason: str | None
    ran: list[str]
    fallback: bool = False

    def step(self, variables: base.Inputs, fallback: str) -> str | None:
        self.ran.append(str(self.reason))
        return fallback if self.fallback else self.reason


def _validate_rule(*checks: Refusing) -> CompiledValidateRule:
    return CompiledValidateRule(index=2, operations=None, failure_policy="Fail", actions=frozenset({"Deny"}),
                                checks=checks)  # type: ignore[arg-type]


def test_a_validate_rule_runs_its_checks_in_order_until_one_fails() -> None:
    ran: list[str] = []
    # A script refusing without a reason refuses all the same.
    assert validating.check_rule(_validate_rule(Refusing(None, ran), Refusing("", ran), Refusing("late", ran)),
                                 {}) == (False, "")
    assert ran == ["None", ""]
    assert validating.check_rule(_validate_rule(Refusing(None, ran), Refusing("x", ran, fallback=True)),
                                 {}) == (False, "rejected by validate rule 2")
    assert validating.check_rule(_validate_rule(Refusing(None, ran)), {}) == (True, "")


RUNNING = Path(overriding.__file__).parent


@pytest.mark.parametrize("module", sorted(p.name for p in RUNNING.glob("*.py")))
def test_the_request_path_never_asks_a_rule_s_kind_by_name(module: str) -> None:
    """Kinds are dispatched by their step (or read through the rule's typed accessors), never by getattr."""
    tree = ast.parse((RUNNING / module).read_text())
    calls = [node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    assert "getattr" not in calls and "hasattr" not in calls
