"""Which policies and rules apply to an object, in a stable order, found through an index.

The index buckets policies by scope (cluster-wide, or the one namespace a namespaced policy
lives in) and by the (API group, kind) their selectors can match, so the cost of a request
does not grow with policies that cannot match it: policies for other kinds, and namespaced
policies of other namespaces, are never looked at.

Order: cluster policies first, then namespaced ones; each group by name (namespace breaks
ties); the rules of a policy in the order they are written. A namespaced policy
(OverridePolicy, ValidatePolicy) applies only to objects in its own namespace, never to other
namespaces nor to cluster-scoped objects (kinitiras did not check).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine import selectors
from kinitiras_py.engine.compiled import CompiledPolicy, rule_applies

ANY = "*"
CLUSTER = ""
"""The scope of cluster policies in bucket keys (namespaced policies use their namespace)."""
CACHE_LIMIT = 4096
"""Most (group, kind, namespace) answers kept; the cache starts over when it is full."""
BucketKey = tuple[str, str, str]
"""(scope, API group or ``*``, kind or ``*``)."""


def object_group(obj: Obj) -> str:
    """The API group of an object (``""`` for the core group)."""
    api_version = str(obj.get("apiVersion") or "")
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def object_namespace(obj: Obj, namespace: str | None = None) -> str:
    """The namespace of an object: ``metadata.namespace``, else ``namespace`` (the request's).

    A Namespace is cluster-scoped although the API server gives its own name as the request's
    namespace, so for a Namespace ``namespace`` is not used.
    """
    meta = obj.get("metadata")
    found = meta.get("namespace") if isinstance(meta, dict) else None
    if found or (obj.get("kind") == "Namespace" and object_group(obj) == ""):
        return str(found or "")
    return str(namespace or "")


def _scope(policy: CompiledPolicy) -> str | None:
    """The scope key of a policy; None for a namespaced policy without a namespace (never applies)."""
    if policy.cluster_scoped:
        return CLUSTER
    return policy.namespace or None


def _bucket_keys(policy: CompiledPolicy) -> set[BucketKey]:
    scope = _scope(policy)
    if scope is None:
        return set()
    if not policy.selectors:
        return {(scope, ANY, ANY)}
    keys: set[BucketKey] = set()
    for sel in policy.selectors:
        api_version = str(sel.get("apiVersion") or ANY)
        kind = str(sel.get("kind") or ANY)
        group = selectors.selector_group(api_version)
        keys.add((scope, group if group is not None else ANY, kind))
    return keys


class PolicyIndex:
    """Compiled policies of one family (override or validate), indexed for lookup per request."""

    def __init__(self, policies: Iterable[CompiledPolicy] = ()) -> None:
        self._by_key: dict[str, CompiledPolicy] = {}
        self._keys_of: dict[str, set[BucketKey]] = {}
        self._buckets: dict[BucketKey, dict[str, CompiledPolicy]] = {}
        self._cache: dict[tuple[str, str, str], tuple[CompiledPolicy, ...]] = {}
        for policy in policies:
            self.put(policy)

    @staticmethod
    def key(policy: CompiledPolicy) -> str:
        """Identity of a policy in the index: kind, namespace and name."""
        return f"{policy.kind}/{policy.namespace or ''}/{policy.name}"

    def put(self, policy: CompiledPolicy) -> None:
        """Add a policy, or replace the one with the same kind, namespace and name."""
        self.remove(policy.kind, policy.namespace, policy.name)
        key = self.key(policy)
        self._by_key[key] = policy
        self._keys_of[key] = _bucket_keys(policy)
        for bucket in self._keys_of[key]:
            self._buckets.setdefault(bucket, {})[key] = policy
        self._cache.clear()

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        """Drop a policy if present."""
        key = f"{kind}/{namespace or ''}/{name}"
        if self._by_key.pop(key, None) is None:
            return
        for bucket in self._keys_of.pop(key, ()):
            members = self._buckets[bucket]
            members.pop(key, None)
            if not members:
                del self._buckets[bucket]
        self._cache.clear()

    def get(self, kind: str, namespace: str | None, name: str) -> CompiledPolicy | None:
        """The policy with this identity, or None."""
        return self._by_key.get(f"{kind}/{namespace or ''}/{name}")

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, policy: object) -> bool:
        return isinstance(policy, CompiledPolicy) and self._by_key.get(self.key(policy)) is policy

    def __iter__(self) -> Iterator[CompiledPolicy]:
        return iter(sorted(self._by_key.values(), key=CompiledPolicy.sort_key))

    def candidates(self, obj: Obj, namespace: str | None = None) -> list[CompiledPolicy]:
        """Policies whose selectors could match ``obj`` by group, kind and namespace, in order.

        ``namespace`` (the request's) stands in when the object carries none, as on some CREATEs.
        Only the buckets for the object's group and kind (and wildcards) in the cluster scope and
        the object's namespace are read. The answer is cached until the index changes.
        """
        group, kind = object_group(obj), str(obj.get("kind") or "")
        ns = object_namespace(obj, namespace)
        cache_key = (group, kind, ns)
        found = self._cache.get(cache_key)
        if found is None:
            seen: dict[str, CompiledPolicy] = {}
            scopes = (CLUSTER, ns) if ns else (CLUSTER,)
            for scope in scopes:
                for g, k in ((group, kind), (group, ANY), (ANY, kind), (ANY, ANY)):
                    seen.update(self._buckets.get((scope, g, k), {}))
            found = tuple(sorted(seen.values(), key=CompiledPolicy.sort_key))
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = found
        return list(found)

    def matching(self, obj: Obj, operation: str,
                 namespace: str | None = None) -> Iterator[tuple[CompiledPolicy, Any]]:
        """Every (policy, rule) that applies to ``obj`` for ``operation``, in application order.

        ``namespace`` is the request's namespace, used when the object carries none.
        """
        ns = object_namespace(obj, namespace)
        target = obj
        if ns and not object_namespace(obj):
            target = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": ns}}
        for policy in self.candidates(obj, ns):
            if not selectors.match_any(policy.selectors, target):
                continue
            for rule in policy.rules:
                if rule_applies(rule.operations, operation):
                    yield policy, rule
