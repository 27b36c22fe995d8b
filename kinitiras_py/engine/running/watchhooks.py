"""The watch hooks of a policy's JavaScript rules: which hooks follow objects, which kinds and
objects they follow, and starting them offline. The hooks themselves and their state are
:mod:`..rules.jshooks`; the webhook's informers (``cluster.jswatch``) feed them through here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.policies.compiled import AnyPolicy
from kinitiras_py.engine.rules.jshooks import Hooks


def concerns(policy: AnyPolicy, obj: Obj) -> bool:
    """Whether ``policy``'s hooks follow ``obj``: its selectors match it and, for a namespaced
    policy, it is in the policy's namespace (as a namespaced JsAdmission saw only its own)."""
    if not policy.cluster_scoped:
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or meta.get("namespace") != policy.namespace:
            return False
    return selectors.match_any(policy.selectors, obj)


def watching(policy: AnyPolicy) -> list[Hooks]:
    """The hooks of ``policy``'s rules that follow objects (to be started with the objects that exist)."""
    found = []
    for rule in policy.rules:
        hooks = rule.javascript.hooks if rule.javascript is not None else None
        if hooks is not None and hooks.watches:
            found.append(hooks)
    return found


def kinds(policy: AnyPolicy) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs ``policy`` selects, each once, in order: what its hooks watch."""
    pairs = [(str(sel.get("apiVersion")), str(sel.get("kind"))) for sel in policy.selectors]
    return list(dict.fromkeys(pairs))


def order(obj: Obj) -> tuple[str, str, str, str]:
    """A stable order of objects: apiVersion, kind, namespace, name."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""))


def start_offline(policies: Iterable[AnyPolicy], objects: Sequence[Obj]) -> None:
    """Start the hooks of ``policies`` with ``objects`` (``--context``) as the objects that exist,
    in a stable order, and wait until their states are built."""
    pending = [hooks.start(sorted((o for o in objects if concerns(policy, o)), key=order))
               for policy in policies for hooks in watching(policy)]
    for future in pending:
        future.result()
