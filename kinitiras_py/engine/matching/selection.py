"""Which policies and rules apply to an object, in a stable order, found through an index.

The index buckets policies by scope (cluster-wide, or the one namespace a namespaced policy
lives in) and by the (API group, kind) their selectors can match, so the cost of a request
does not grow with policies that cannot match it: policies for other kinds, and namespaced
policies of other namespaces, are never looked at. Within a bucket, a selector that names an
object, requires a label value (``matchLabels``, ``In``), a label key (``Exists``) or a namespace
is filed under that requirement (its *guard*), so policies for other names and labels of the
same kind are never looked at either; the selectors themselves still decide.

Order: cluster policies first, then namespaced ones; each group by name (namespace breaks
ties); the rules of a policy in the order they are written. A namespaced policy
(OverridePolicy, ValidatePolicy) applies only to objects in its own namespace, never to other
namespaces nor to cluster-scoped objects (kinitiras did not check).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from kinitiras_py.base.ids import PolicyId
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.policies.compiled import (
    AnyPolicy,
    CompiledOverrideRule,
    CompiledPolicy,
    CompiledRule,
    Match,
    rule_applies,
)

if TYPE_CHECKING:
    from kinitiras_py.engine.evaluation.cel import Program

ANY = "*"
CLUSTER = ""
"""The scope of cluster policies in bucket keys (namespaced policies use their namespace)."""
CACHE_LIMIT = 4096
"""Most (group, kind, namespace) answers kept; the cache starts over when it is full."""
BucketKey = tuple[str, str, str]
"""(scope, API group or ``*``, kind or ``*``)."""
Guard = tuple[str, ...]
"""What an object must have for a selector to match it: ``("name", n)``, ``("label", k, v)``,
``("key", k)`` or ``("ns", n)``."""
Entry = tuple[BucketKey, Guard | None]
"""Where one selector of a policy is filed: its bucket, and its guard (None: always a candidate)."""

# What a policy uses beyond plain rules (bits of :meth:`PolicyIndex.features`), worked out when it
# is indexed so that a request whose policies use none of it pays nothing for it.
CONDITIONS = 1
"""matchConditions or policy-wide valueRefs."""
SIDECARS = 2
"""A sidecar rule (its template may be kept in a ConfigMap; one policy per group)."""
JAVASCRIPT = 4
"""A JavaScript rule (scripts share the request's deadline)."""
INJECTS = 8
"""An inject rule."""
NAMESPACE = 16
"""A condition or rule that may read ``namespaceObject`` (the request's Namespace is then looked
up): CEL that reads it (or may read anything), and every sidecar and JavaScript rule."""
_GENERATIONS = itertools.count(1)
"""Stamps of index contents, unique in the process (see :attr:`PolicyIndex.generation`)."""
RuleT = TypeVar("RuleT", bound=CompiledRule)


def policy_features(policy: AnyPolicy) -> int:
    """The :data:`CONDITIONS`, :data:`SIDECARS`, :data:`JAVASCRIPT`, :data:`INJECTS` and
    :data:`NAMESPACE` bits ``policy`` uses."""
    bits = CONDITIONS if policy.conditions is not None or policy.refs else 0
    programs = [policy.conditions]
    for rule in policy.rules:
        if rule.javascript is not None:
            bits |= JAVASCRIPT
        programs += [rule.rendered, rule.cel]
        if isinstance(rule, CompiledOverrideRule):
            if rule.sidecar is not None:
                bits |= SIDECARS
            if rule.inject is not None:
                bits |= INJECTS
            programs += [made[0] for made in rule.fanout.values()]
    if bits & (SIDECARS | JAVASCRIPT) or any(_reads_namespace(p) for p in programs if p is not None):
        bits |= NAMESPACE
    return bits


def _reads_namespace(program: Program) -> bool:
    reads = program.reads
    return reads is None or any(name == "namespaceObject" for name, _ in reads)


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


def _scope(policy: AnyPolicy) -> str | None:
    """The scope key of a policy; None for a namespaced policy without a namespace (never applies)."""
    if policy.cluster_scoped:
        return CLUSTER
    return policy.namespace or None


def _guards(sel: Obj) -> list[Guard] | None:
    """Guards of one selector: an object it matches has at least one of them (None: no such guard).

    Sound by construction, as ``selectors.match_resource`` decides: a set ``name`` must equal the
    object's; a ``matchLabels`` pair, an ``In`` value or an ``Exists`` key must be on the object;
    a set ``namespace`` must be the object's.
    """
    name = sel.get("name")
    if name:
        return [("name", name)] if isinstance(name, str) else None
    labels = sel.get("labelSelector")
    if isinstance(labels, dict):
        pairs = labels.get("matchLabels")
        for key, value in pairs.items() if isinstance(pairs, dict) else ():
            if isinstance(key, str) and isinstance(value, str):
                return [("label", key, value)]
        exprs = labels.get("matchExpressions")
        for req in exprs if isinstance(exprs, list) else ():
            if not isinstance(req, dict) or not isinstance(key := req.get("key"), str):
                continue
            values = req.get("values")
            if req.get("operator") == "In" and isinstance(values, list) and values \
                    and all(isinstance(v, str) for v in values):
                return [("label", key, v) for v in values]
            if req.get("operator") == "Exists":
                return [("key", key)]
    namespace = sel.get("namespace")
    return [("ns", namespace)] if namespace and isinstance(namespace, str) else None


def _entries(policy: AnyPolicy) -> set[Entry]:
    scope = _scope(policy)
    if scope is None:
        return set()
    if not policy.selectors:
        return {((scope, ANY, ANY), None)}
    entries: set[Entry] = set()
    for sel in policy.selectors:
        api_version = str(sel.get("apiVersion") or ANY)
        kind = str(sel.get("kind") or ANY)
        group = selectors.selector_group(api_version)
        bucket = (scope, group if group is not None else ANY, kind)
        guards = _guards(sel)
        if guards:
            entries.update((bucket, guard) for guard in guards)
        else:
            entries.add((bucket, None))
    return entries


def _probes(obj: Obj, namespace: str) -> list[Guard]:
    """The guards ``obj`` has: its name, each label and label key, its namespace."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    found: list[Guard] = [("name", str(meta.get("name") or "")), ("ns", namespace)]
    labels = meta.get("labels")
    for key, value in labels.items() if isinstance(labels, dict) else ():
        if isinstance(key, str) and isinstance(value, str):
            found += [("label", key, value), ("key", key)]
    return found


class _Bucket(Generic[RuleT]):
    """The policies of one bucket: those always a candidate, and the others by guard."""

    __slots__ = ("always", "guarded")

    def __init__(self) -> None:
        self.always: dict[PolicyId, CompiledPolicy[RuleT]] = {}
        self.guarded: dict[Guard, dict[PolicyId, CompiledPolicy[RuleT]]] = {}

    def add(self, guard: Guard | None, key: PolicyId, policy: CompiledPolicy[RuleT]) -> None:
        (self.always if guard is None else self.guarded.setdefault(guard, {}))[key] = policy

    def discard(self, guard: Guard | None, key: PolicyId) -> None:
        if guard is None:
            self.always.pop(key, None)
            return
        members = self.guarded.get(guard)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self.guarded[guard]

    def __bool__(self) -> bool:
        return bool(self.always or self.guarded)


class PolicyIndex(Generic[RuleT]):
    """Compiled policies of one family (override or validate), indexed for lookup per request."""

    def __init__(self, policies: Iterable[CompiledPolicy[RuleT]] = ()) -> None:
        self._by_key: dict[PolicyId, CompiledPolicy[RuleT]] = {}
        self._entries_of: dict[PolicyId, tuple[Entry, ...]] = {}
        self._buckets: dict[BucketKey, _Bucket[RuleT]] = {}
        self._cache: dict[tuple[str, str, str], _Found[RuleT]] = {}
        self._tiers: dict[int, int] = {}
        """How many policies each execution tier holds."""
        self._tier_list: list[int] = []
        self._features: dict[int, int] = {}
        """:func:`policy_features` of the indexed policies that use any, by id() (the index keeps them alive)."""
        self.generation = next(_GENERATIONS)
        """Changes with every put and remove, never to a value any index in the process had: the
        policies indexed under one generation are always the same objects, alive while indexed,
        so (generation, id() of a policy) names one policy for good."""
        for policy in policies:
            self.put(policy)

    def put(self, policy: CompiledPolicy[RuleT]) -> None:
        """Add a policy, or replace the one with the same kind, namespace and name.

        The cost depends on this policy's selectors only, not on how many policies there are.
        """
        self.remove(policy.kind, policy.namespace, policy.name)
        key = policy.identity
        self._by_key[key] = policy
        self._tiers[policy.tier] = self._tiers.get(policy.tier, 0) + 1
        self._tier_list = sorted(self._tiers)
        if bits := policy_features(policy):
            self._features[id(policy)] = bits
        self._entries_of[key] = tuple(_entries(policy))  # a tuple holds them in a quarter of a set's memory
        for bucket, guard in self._entries_of[key]:
            self._buckets.setdefault(bucket, _Bucket()).add(guard, key, policy)
        self._cache.clear()
        self.generation = next(_GENERATIONS)

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        """Drop a policy if present."""
        key = PolicyId(kind, namespace or None, name)
        gone = self._by_key.pop(key, None)
        if gone is None:
            return
        self._tiers[gone.tier] -= 1
        if not self._tiers[gone.tier]:
            del self._tiers[gone.tier]
        self._tier_list = sorted(self._tiers)
        self._features.pop(id(gone), None)
        for bucket_key, guard in self._entries_of.pop(key, ()):
            bucket = self._buckets[bucket_key]
            bucket.discard(guard, key)
            if not bucket:
                del self._buckets[bucket_key]
        self._cache.clear()
        self.generation = next(_GENERATIONS)

    def tiers(self) -> list[int]:
        """The execution tiers the policies are in, lowest first ([0] or [] for most setups)."""
        return self._tier_list

    def features(self, matches: Iterable[Match[RuleT]]) -> int:
        """The :func:`policy_features` bits the policies of ``matches`` (found here) use together:
        0 at once when no indexed policy uses any."""
        if not self._features:
            return 0
        bits = 0
        for policy, _ in matches:
            bits |= self._features.get(id(policy), 0)
        return bits

    def get(self, kind: str, namespace: str | None, name: str) -> CompiledPolicy[RuleT] | None:
        """The policy with this identity, or None."""
        return self._by_key.get(PolicyId(kind, namespace or None, name))

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, policy: object) -> bool:
        return isinstance(policy, CompiledPolicy) and self._by_key.get(policy.identity) is policy

    def __iter__(self) -> Iterator[CompiledPolicy[RuleT]]:
        return iter(sorted(self._by_key.values(), key=CompiledPolicy.sort_key))

    def candidates(self, obj: Obj, namespace: str | None = None) -> list[CompiledPolicy[RuleT]]:
        """Policies whose selectors could match ``obj`` by group, kind, namespace, name and labels, in order.

        ``namespace`` (the request's) stands in when the object carries none, as on some CREATEs.
        Only the buckets for the object's group and kind (and wildcards) in the cluster scope and
        the object's namespace are read, and in them only the guards the object has. What does
        not depend on the object's name and labels is cached until the index changes.
        """
        group, kind = object_group(obj), str(obj.get("kind") or "")
        ns = object_namespace(obj, namespace)
        cache_key = (group, kind, ns)
        found = self._cache.get(cache_key)
        if found is None:
            buckets = [bucket for scope in ((CLUSTER, ns) if ns else (CLUSTER,))
                       for g, k in ((group, kind), (group, ANY), (ANY, kind), (ANY, ANY))
                       if (bucket := self._buckets.get((scope, g, k))) is not None]
            always: dict[PolicyId, CompiledPolicy[RuleT]] = {}
            for bucket in buckets:
                always.update(bucket.always)
            found = _Found(always, tuple(bucket.guarded for bucket in buckets if bucket.guarded))
            if len(self._cache) >= CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = found
        if not found.guarded:
            return list(found.ordered)
        hits: dict[PolicyId, CompiledPolicy[RuleT]] = {}
        for probe in _probes(obj, ns):
            for guarded in found.guarded:
                if (members := guarded.get(probe)) is not None:
                    hits.update(members)
        if not hits:
            return list(found.ordered)
        return sorted({**found.always, **hits}.values(), key=CompiledPolicy.sort_key)

    def matching(self, obj: Obj, operation: str,
                 namespace: str | None = None) -> Iterator[Match[RuleT]]:
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


class _Found(Generic[RuleT]):
    """The cached part of a lookup: the policies always a candidate, and the guarded maps to probe."""

    __slots__ = ("always", "guarded", "ordered")

    def __init__(self, always: dict[PolicyId, CompiledPolicy[RuleT]],
                 guarded: tuple[dict[Guard, dict[PolicyId, CompiledPolicy[RuleT]]], ...]) -> None:
        self.always = always
        self.ordered = tuple(sorted(always.values(), key=CompiledPolicy.sort_key))
        self.guarded = guarded
