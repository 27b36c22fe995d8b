"""Resolve the value references a rule needs into its ``params``.

``current`` and ``old`` are read by the rule itself (CEL sees ``object`` and ``oldObject``);
``k8s``, ``owner`` and ``http`` are fetched here, through protocols, under a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.checking import boundary
from kinitiras_py.engine.objects import selectors
from kinitiras_py.refs import placeholders, scoped
from kinitiras_py.refs.store import Store


class HttpClient(Protocol):
    """Performs the http value references."""

    async def fetch(self, spec: Obj, namespaced: bool) -> Obj:
        """Send the request described by ``spec`` (url, method, header, params, body, auth) for a
        namespaced policy or a cluster one (the operator's setting treats them apart); return
        ``{"body": <JSON>, "header": {...}}``. Raises LookupError on failure or refusal."""


class LookupFailure(KinitirasError):
    """A reference could not be resolved; the message says which and why."""


async def resolve(ref: Obj, obj: Obj, store: Store, http: HttpClient | None,
                  policy_namespace: str | None = None, *, namespaced: bool) -> JSON:
    """The root value of a k8s, owner or http reference (the rule then reads ``path`` in it).
    A namespaced policy (``policy_namespace``) reads only within its namespace (:mod:`.scoped`);
    ``namespaced`` says whether the policy is a namespaced kind (for the egress setting)."""
    source = ref.get("from")
    store = scoped.bound(store, policy_namespace)
    try:
        if source == "owner":
            return await _owner(obj, store)
        if source == "k8s":
            return await _k8s(ref.get("k8s") or {}, obj, store)
        if source == "http":
            if http is None:
                raise LookupFailure("http references are not available here")
            given = ref.get("http") or {}
            # The body is sent as written; credentials must never be rewritten by placeholders.
            spec = placeholders.substitute_all({k: v for k, v in given.items() if k not in ("body", "auth")}, obj)
            spec["body"] = given.get("body")
            auth = given.get("auth")
            if isinstance(auth, dict):
                secret_ref = auth.get("secretRef")
                if isinstance(secret_ref, dict) and policy_namespace is not None:
                    # The http client reads the Secret through its own store: the boundary is held here.
                    within = boundary.bound(policy_namespace, True, "v1", "Secret", secret_ref.get("namespace"),
                                            str(secret_ref.get("name") or ""))
                    auth = {**auth, "secretRef": {**secret_ref, "namespace": within}}
                spec["auth"] = auth
            return await http.fetch(spec, namespaced)
    except placeholders.Missing:
        # kinitiras: a placeholder the object lacks yields an empty value, not an error.
        return None
    except (LookupError, ValueError) as e:
        raise LookupFailure(f"{source} reference: {e}") from None
    raise LookupFailure(f"unknown reference source {source!r}")


async def _owner(obj: Obj, store: Store) -> Obj:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    if not refs:
        raise LookupFailure("owner reference: the object has no ownerReferences")
    owner = next((r for r in refs if r.get("controller")), refs[0])
    namespace = (obj.get("metadata") or {}).get("namespace")
    found = await store.get(owner.get("apiVersion", ""), owner.get("kind", ""), namespace, owner.get("name", ""))
    if found is None:
        raise LookupFailure(f"owner reference: {owner.get('kind')} {namespace or ''}/{owner.get('name')} not found")
    return found


async def _k8s(sel: Obj, obj: Obj, store: Store) -> Obj | None:
    api_version, kind = str(sel.get("apiVersion", "")), str(sel.get("kind", ""))
    namespace = placeholders.substitute(str(sel["namespace"]), obj) if sel.get("namespace") else None
    if sel.get("name"):
        name = placeholders.substitute(str(sel["name"]), obj)
        found = await store.get(api_version, kind, namespace, name)
        if found is None:
            raise LookupFailure(f"k8s reference: {kind} {namespace or ''}/{name} not found")
        return found
    if isinstance(sel.get("labelSelector"), dict):
        wanted = placeholders.substitute_all(sel["labelSelector"], obj)
        items = sorted(await store.list(api_version, kind, namespace),
                       key=lambda o: ((o.get("metadata") or {}).get("namespace") or "", o["metadata"]["name"]))
        # The first match by namespace/name, so the choice is deterministic (kinitiras: arbitrary).
        return next((o for o in items
                     if selectors.match_labels(wanted, (o.get("metadata") or {}).get("labels"))), None)
    return None


async def resolve_rule(refs: Mapping[str, Obj], obj: Obj, store: Store, http: HttpClient | None,
                       timeout: float, policy_namespace: str | None = None, *, namespaced: bool) -> dict[str, JSON]:
    """Resolve every reference of one rule (of a namespaced policy or not) concurrently; raise
    LookupFailure on the first failure."""
    names = list(refs)
    try:
        values = await asyncio.wait_for(
            asyncio.gather(*(resolve(refs[n], obj, store, http, policy_namespace, namespaced=namespaced)
                             for n in names)), timeout)
    except TimeoutError:
        raise LookupFailure(f"reference lookup ({', '.join(names)}) took longer than {timeout:g} s") from None
    return dict(zip(names, values, strict=True))
