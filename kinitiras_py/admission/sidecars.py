"""Read the ConfigMaps that sidecar templates are kept in, and give each rule its CEL.

The store is the informer cache in the webhook (the ConfigMap informer starts with the first
lookup and follows every change) and the ``--context`` files offline. A missing ConfigMap or key,
or a template that cannot be rendered, is the rule's error: its failurePolicy decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.ids import RuleId
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.policies.compiled import OverrideMatch
from kinitiras_py.engine.rules import sidecars
from kinitiras_py.refs import scoped
from kinitiras_py.refs.store import Store


async def template_text(rule: sidecars.SidecarRule, store: Store, timeout: float,
                        policy_namespace: str | None) -> str:
    """The template text a sidecar rule's ConfigMap holds, read as the rule's policy (in
    ``policy_namespace``, None for a cluster policy) may read; LookupError saying what is missing."""
    assert rule.config_map is not None
    namespace, name, key = rule.config_map
    reader = scoped.bound(store, policy_namespace)
    try:
        found = await asyncio.wait_for(reader.get("v1", "ConfigMap", namespace, name), timeout)
    except TimeoutError:
        raise LookupError(f"sidecar template: reading ConfigMap {namespace}/{name} took longer than {timeout:g} s") \
            from None
    except LookupError as e:
        raise LookupError(f"sidecar template: cannot read ConfigMap {namespace}/{name}: {e}") from None
    if found is None:
        raise LookupError(f"sidecar template: ConfigMap {namespace}/{name} not found")
    data = found.get("data")
    text = data.get(key) if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise LookupError(f"sidecar template: ConfigMap {namespace}/{name} has no key {key!r}")
    return text


async def programs(matches: Sequence[OverrideMatch], obj: Obj, store: Store, timeout: float
                   ) -> tuple[dict[RuleId, Program], dict[RuleId, str]]:
    """The CEL of every matching sidecar rule kept in a ConfigMap, and the errors of those that fail.
    A pod that has the rule's sidecar already needs none (its ConfigMap may be gone by then)."""
    found: dict[RuleId, Program] = {}
    errors: dict[RuleId, str] = {}
    for policy, rule in matches:
        sidecar = rule.sidecar
        if sidecar is None or sidecar.config_map is None or sidecars.already_injected(sidecar, obj):
            continue
        key = RuleId(policy.identity, rule.index)
        try:
            text = await template_text(sidecar, store, timeout, policy.namespace)
            found[key] = sidecars.program_for(sidecar, text)
        except LookupError as e:
            errors[key] = str(e)
        except PolicyError as e:
            errors[key] = f"sidecar template: {e}"
    return found, errors
