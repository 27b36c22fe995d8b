"""The store a namespaced policy reads through: every read is held to the policy's namespace.

This is where the boundary of :mod:`kinitiras_py.engine.checking.boundary` is enforced at run time, for
every read a rule makes: ``k8s`` and ``owner`` references (policy-wide ``valueRefs``, a
template's ``valueRef``, a condition's ``dataRef``, a sidecar's ``valueRefs``) and sidecar
templates kept in ConfigMaps. A read outside is refused with :class:`~.boundary.Crossing`, a
LookupError: the rule fails with a message naming the boundary, under its failurePolicy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking import boundary
from kinitiras_py.refs.store import Store


@runtime_checkable
class KnowsScope(Protocol):
    """A store that can tell whether a kind is namespaced (the webhook's, from discovery)."""

    async def namespaced(self, api_version: str, kind: str) -> bool:
        """True for a namespaced kind; LookupError for an unknown one."""


class ScopedStore:
    """``inner`` seen from a policy in ``namespace``: reads outside it raise Crossing."""

    def __init__(self, inner: Store, namespace: str) -> None:
        self.inner = inner
        self.namespace = namespace

    async def _namespaced(self, api_version: str, kind: str) -> bool:
        if isinstance(self.inner, KnowsScope):
            return await self.inner.namespaced(api_version, kind)
        # Offline stores hold what they were given: a cluster-scoped kind they cannot tell of has
        # no namespace in its objects, so reading it "in" the policy's namespace finds nothing.
        return not boundary.cluster_scoped(api_version, kind)

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object, if the boundary allows reading it (namespace defaulted to the policy's)."""
        namespaced = await self._namespaced(api_version, kind)
        within = boundary.bound(self.namespace, namespaced, api_version, kind, namespace, name)
        return await self.inner.get(api_version, kind, within, name)

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        """The objects of the kind in the policy's namespace (of Namespaces, its own)."""
        namespaced = await self._namespaced(api_version, kind)
        within = boundary.bound(self.namespace, namespaced, api_version, kind, namespace, None)
        found = await self.inner.list(api_version, kind, within)
        if namespaced:
            return found
        return [o for o in found if (o.get("metadata") or {}).get("name") == self.namespace]


def bound(store: Store, policy_namespace: str | None) -> Store:
    """The store a policy reads through: ``store`` itself for a cluster policy (None)."""
    return store if policy_namespace is None else ScopedStore(store, policy_namespace)
