"""Which policies and rules apply to an object, in a stable order, found through an index.

The index buckets policies by the (API group, kind) their selectors can match and by
namespace, so the cost of a request does not grow with policies that cannot match it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine import selectors
from kinitiras_py.engine.compiled import CompiledPolicy, rule_applies

ANY = "*"
BucketKey = tuple[str, str]


def object_group(obj: Obj) -> str:
    """The API group of an object (``""`` for the core group)."""
    api_version = str(obj.get("apiVersion") or "")
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _bucket_keys(policy: CompiledPolicy) -> set[BucketKey]:
    if not policy.selectors:
        return {(ANY, ANY)}
    keys: set[BucketKey] = set()
    for sel in policy.selectors:
        api_version = str(sel.get("apiVersion") or ANY)
        kind = str(sel.get("kind") or ANY)
        group = selectors.selector_group(api_version)
        keys.add((group if group is not None else ANY, kind))
    return keys


class PolicyIndex:
    """Compiled policies of one family (override or validate), indexed for lookup per request."""

    def __init__(self, policies: Iterable[CompiledPolicy] = ()) -> None:
        self._by_key: dict[str, CompiledPolicy] = {}
        self._buckets: dict[BucketKey, dict[str, CompiledPolicy]] = defaultdict(dict)
        self._cache: dict[tuple[str, str, str], list[CompiledPolicy]] = {}
        for policy in policies:
            self.put(policy)

    @staticmethod
    def key(policy: CompiledPolicy) -> str:
        """Identity of a policy in the index: kind, namespace and name."""
        return f"{policy.kind}/{policy.namespace or ''}/{policy.name}"

    def put(self, policy: CompiledPolicy) -> None:
        """Add or replace a policy."""
        self.remove(policy.kind, policy.namespace, policy.name)
        key = self.key(policy)
        self._by_key[key] = policy
        for bucket in _bucket_keys(policy):
            self._buckets[bucket][key] = policy
        self._cache.clear()

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        """Drop a policy if present."""
        key = f"{kind}/{namespace or ''}/{name}"
        if self._by_key.pop(key, None) is None:
            return
        for bucket in list(self._buckets.values()):
            bucket.pop(key, None)
        self._cache.clear()

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[CompiledPolicy]:
        return iter(sorted(self._by_key.values(), key=CompiledPolicy.sort_key))

    def candidates(self, obj: Obj) -> list[CompiledPolicy]:
        """Policies whose selectors could match ``obj`` by group, kind and namespace, in order."""
        group, kind = object_group(obj), str(obj.get("kind") or "")
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        cache_key = (group, kind, namespace)
        found = self._cache.get(cache_key)
        if found is None:
            seen: dict[str, CompiledPolicy] = {}
            for bucket in ((group, kind), (group, ANY), (ANY, kind), (ANY, ANY)):
                seen.update(self._buckets.get(bucket, {}))
            # Namespaced policies apply only inside their own namespace (kinitiras did not check).
            found = sorted((p for p in seen.values() if p.cluster_scoped or (p.namespace == namespace and namespace)),
                           key=CompiledPolicy.sort_key)
            self._cache[cache_key] = found
        return found

    def matching(self, obj: Obj, operation: str) -> Iterator[tuple[CompiledPolicy, Any]]:
        """Every (policy, rule) that applies to ``obj`` for ``operation``, in application order."""
        for policy in self.candidates(obj):
            if not selectors.match_any(policy.selectors, obj):
                continue
            for rule in policy.rules:
                if rule_applies(rule.operations, operation):
                    yield policy, rule
