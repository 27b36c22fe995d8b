"""Service injection (PodPreset's job): the plans of every inject rule matching an object, combined.

Each inject rule's rendered CEL returns a plan (see :mod:`..rendering.injecting`, which names the marker): per item and
place, whether the pod has it and where the pod holds its keys with other values. Conflicts are
seen only with all plans together, so the engine runs every matching inject rule at the place of
the first one, against the same object, and combines the plans here; the values handled are the
policies' own items and list indexes, never the object.

* A **conflict** is a key (env name, envFrom source and prefix, mount name or mountPath, volume
  name) that the pod holds with another value, or that two rules set to different values.
* The strictest ``onConflict`` among the rules involved decides: ``Deny`` denies the request,
  naming the policies and fields; ``Skip`` leaves the object without the injections of every
  policy involved, with a warning; ``Override`` replaces the pod's item, and between rules the
  later one (in policy order) wins.
* An equal item is kept once, whether the pod has it or several rules inject it; new items are
  appended. Each rule applied marks the pod with its ``marker`` (a converted PodPreset:
  PodPreset's own annotation), by default ``policy.kcloudlabs.io/inject-<name>`` (a
  ClusterOverridePolicy: ``cluster-inject-<name>``) set to the policy's resourceVersion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.ids import PolicyId
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.kinds.inject import InjectOverrider
from kinitiras_py.engine.objects import patching, patchlog
from kinitiras_py.engine.policies.compiled import CompiledOverridePolicy, CompiledOverrideRule, OverrideMatch
from kinitiras_py.engine.rendering.injecting import marker_key

SEVERITY = {"Override": 0, "Skip": 1, "Deny": 2}
@dataclass
class _Plan:
    policy: CompiledOverridePolicy
    rule: CompiledOverrideRule
    inject: InjectOverrider
    spec_at: str
    claims: list[Obj]


@dataclass
class Injection:
    """What combining the inject rules gave."""

    draft: patchlog.Draft
    applied: list[OverrideMatch] = field(default_factory=list)
    """The rules whose injections are in the result (each marked the pod)."""
    warnings: list[str] = field(default_factory=list)
    errors: list[tuple[CompiledOverridePolicy, CompiledOverrideRule, str]] = field(default_factory=list)
    """Rules whose CEL failed: the caller applies their failurePolicy."""
    denial: tuple[CompiledOverridePolicy, CompiledOverrideRule, str] | None = None
    """A conflict under onConflict Deny: the request must be denied with this reason."""


def _describe(claim: Obj, key: str) -> str:
    return f"{claim.get('field')} {key} in {claim.get('where')}"


def _canon(value: JSON) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _plans(rules: list[OverrideMatch], inputs: Bindings | dict[str, Any],
           out: Injection) -> list[_Plan]:
    plans = []
    for policy, rule in rules:
        inject = rule.inject
        assert inject is not None
        try:
            result = inject.plan(inputs)
            if not isinstance(result, dict) or not isinstance(result.get("claims"), list):
                raise ValueError(f"the rendered inject template returned {type(result).__name__}, not a plan")
        except (KinitirasError, ValueError, TypeError) as e:
            out.errors.append((policy, rule, str(e)))
            continue
        if result.get("apply"):
            plans.append(_Plan(policy, rule, inject, str(result.get("podSpec") or ""), list(_flat(result["claims"]))))
    return plans


def _flat(claims: JSON) -> Iterator[Obj]:
    """The claims of a plan, nested by field, container and item, in that order."""
    if isinstance(claims, dict):
        yield claims
    elif isinstance(claims, list):
        for item in claims:
            yield from _flat(item)


def _conflicts(plans: list[_Plan]) -> dict[tuple[frozenset[int], str], list[str]]:
    """(plans involved, what) → where, for every conflict with the pod or between plans."""
    found: dict[tuple[frozenset[int], str], list[str]] = defaultdict(list)
    groups: dict[tuple[str, str], list[tuple[int, Obj]]] = defaultdict(list)
    # Every plan clashing with one item of the pod is involved in that item's conflict: were one
    # of them to replace it (Override) while another is skipped, the next invocation would differ.
    # An item is known by its key; a mount has two, so all mount clashes of a container are one.
    held: dict[tuple[str, str], list[tuple[int, Obj]]] = defaultdict(list)
    for i, plan in enumerate(plans):
        for claim in plan.claims:
            if claim.get("clash") and not claim.get("present"):
                item = "" if claim["field"] == "volumeMounts" else str(claim["keys"][0])
                held[(str(claim["list"]), item)].append((i, claim))
            for key in claim.get("keys") or ():
                groups[(str(claim["list"]), key)].append((i, claim))
    for entries in held.values():
        items = dict.fromkeys(f"{claim['field']} {' / '.join(claim['keys'])}" for _, claim in entries)
        what = f"{'; '.join(items)} (the pod holds {'it' if len(items) == 1 else 'them'} with another value)"
        found[(frozenset(i for i, _ in entries), what)].append(str(entries[0][1].get("where")))
    for (_, key), entries in groups.items():
        if len({_canon(claim["value"]) for _, claim in entries}) > 1:
            involved = frozenset(i for i, _ in entries)
            claim = entries[0][1]
            what = f"{claim['field']} {key} (the policies set different values)"
            found[(involved, what)].append(str(claim.get("where")))
    return found


def _names(plans: list[_Plan], involved: frozenset[int]) -> str:
    return ", ".join(dict.fromkeys(plans[i].policy.ref for i in sorted(involved)))


def combine(rules: list[OverrideMatch], working: Obj,
            inputs: Bindings | dict[str, Any]) -> Injection:
    """Evaluate every inject rule against ``working`` and combine their plans (``working`` is not
    modified; the result is in ``draft``)."""
    out = Injection(draft=patchlog.Draft(working))
    plans = _plans(rules, inputs, out)
    skipped: set[PolicyId] = set()
    for (involved, what), wheres in _conflicts(plans).items():
        mode = max((plans[i].inject.on_conflict for i in involved), key=SEVERITY.__getitem__)
        where = ", ".join(dict.fromkeys(wheres))
        if mode == "Deny":
            first = plans[min(involved)]
            reason = f"inject conflict (onConflict Deny) between {_names(plans, involved)}: {what}, in {where}"
            if len(involved) == 1:
                reason = f"inject conflict (onConflict Deny): {what}, in {where}"
            out.denial = (first.policy, first.rule, reason)
            return out
        if mode == "Skip":
            skipped.update(plans[i].policy.identity for i in involved)
            out.warnings.append(f"{_names(plans, involved)}: not injected (onConflict Skip): {what}, in {where}")
    kept = [plan for plan in plans if plan.policy.identity not in skipped]
    ops = _operations(kept)
    ops += _markers(kept, working)
    if ops:
        out.draft.apply(ops)
    out.applied = [(plan.policy, plan.rule) for plan in kept]
    return out


def _operations(plans: list[_Plan]) -> Patch:
    """The ops adding the kept plans' items: later plans win a key, equal items are added once."""
    last: dict[tuple[str, str], int] = {}
    for i, plan in enumerate(plans):
        for claim in plan.claims:
            for key in claim["keys"]:
                last[(claim["list"], key)] = i
    lists: dict[str, dict[str, Any]] = {}
    added: set[tuple[str, bytes]] = set()
    for i, plan in enumerate(plans):
        for claim in plan.claims:
            target = str(claim["list"])
            if claim.get("present") or any(last[(target, key)] > i and _differs(plans, last[(target, key)], claim, key)
                                           for key in claim["keys"]):
                continue
            item = (target, _canon(claim["value"]))
            if item in added:
                continue
            added.add(item)
            edits = lists.setdefault(target, {"exists": bool(claim.get("exists")), "replace": {}, "remove": set(),
                                              "append": [], "taken": set()})
            # a kept plan clashing with the pod is an Override one, whose plan lists the indexes
            clash = claim.get("clash")
            free = [int(n) for n in (clash if isinstance(clash, list) else []) if int(n) not in edits["taken"]]
            if free:
                edits["replace"][free[0]] = claim["value"]
                edits["remove"].update(free[1:])
                edits["taken"].update(free)
            else:
                edits["append"].append(claim["value"])
    ops: Patch = []
    for target, edits in lists.items():
        ops += [{"op": "replace", "path": f"{target}/{n}", "value": v} for n, v in sorted(edits["replace"].items())]
        ops += [{"op": "remove", "path": f"{target}/{n}"} for n in sorted(edits["remove"], reverse=True)]
        if edits["append"] and not edits["exists"]:
            ops.append({"op": "add", "path": target, "value": edits["append"]})
        else:
            ops += [{"op": "add", "path": f"{target}/-", "value": v} for v in edits["append"]]
    return ops


def _differs(plans: list[_Plan], later: int, claim: Obj, key: str) -> bool:
    """Whether plan ``later`` sets ``key`` of ``claim``'s list to another value."""
    mine = _canon(claim["value"])
    return any(other["list"] == claim["list"] and key in other["keys"] and _canon(other["value"]) != mine
               for other in plans[later].claims)


def _markers(plans: list[_Plan], working: Obj) -> Patch:
    """One annotation per applied policy on the pod (a pod template's metadata for other kinds)."""
    ops: Patch = []
    for plan in plans:
        meta = plan.spec_at[: -len("/spec")] + "/metadata"
        key, value = plan.inject.marker or (marker_key(plan.policy.kind, plan.policy.name), None)
        if value is None:
            value = plan.policy.resource_version
        op = {"op": "add", "path": f"{meta}/annotations/{patching.escape_pointer_token(key)}", "value": value}
        if op not in ops and _annotation(working, meta, key) != value:
            ops.append(op)
    return ops


def _annotation(working: Obj, meta: str, key: str) -> JSON:
    """The value of annotation ``key`` at the metadata pointer ``meta`` of ``working``, or None."""
    node: JSON = working
    for token in meta.strip("/").split("/"):
        node = node.get(token) if isinstance(node, dict) else None
    annotations = node.get("annotations") if isinstance(node, dict) else None
    return annotations.get(key) if isinstance(annotations, dict) else None
