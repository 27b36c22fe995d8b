"""The one-sidecar-per-group rule, across the policies matching a pod."""

from __future__ import annotations

from collections.abc import Sequence

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.objects import workloads
from kinitiras_py.engine.policies.compiled import CompiledOverridePolicy, OverrideMatch
from kinitiras_py.engine.policies.results import PolicyId, RuleFailure, RuleId


def group_conflict(matches: Sequence[OverrideMatch], obj: Obj) -> RuleFailure | None:
    """The denial of a pod that two sidecar policies of one group select, naming both; else None."""
    if not workloads.is_pod_bearing(obj):
        return None
    first: dict[str, CompiledOverridePolicy] = {}
    for policy, rule in matches:
        sidecar = rule.sidecar
        if sidecar is None or sidecar.group is None:
            continue
        seen = first.setdefault(sidecar.group, policy)
        if seen is not policy:
            reason = (f"the pod matches two sidecar policies of group {sidecar.group!r}, {seen.ref} and "
                      f"{policy.ref}; a pod may have the sidecar of one policy per group")
            return RuleFailure(RuleId(PolicyId.of(policy), rule.index), reason, ignored=False)
    return None
