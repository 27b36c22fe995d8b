"""Policies compiled for tests as ``apply`` compiles them."""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.overrides import OverrideRuleTemplate, PlaintextOverrider
from kinitiras_py.api.schema import parse
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.kubemod import criteria, fanout
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.rendering import render
from kinitiras_py.offline.apply import build_engine


def compile_all(policies: Sequence[Obj]) -> list[CompiledPolicy]:
    """Each of ``policies`` compiled and checked as the webhook admits a policy, in order."""
    return build_engine(policies)[1]


def render_override(template: Obj, path: str) -> str:
    """The CEL an override ``template`` (as written) renders to, from its model as the compiler reads it."""
    return render.render_override(parse(OverrideRuleTemplate, template), path)


def render_select(op: Obj, path: str) -> fanout.Rendered:
    """The CEL a plaintext operation ``op`` (as written, with select or valueTemplate) fans out
    with, from its model as the compiler reads it."""
    return fanout.render(parse(PlaintextOverrider, op), path)


def render_criterion(condition: Obj, path: str) -> str:
    """The CEL a KubeMod match criterion (as written) renders to, from its model as the compiler reads it."""
    return criteria.criterion(parse(MatchCondition, condition), path)
