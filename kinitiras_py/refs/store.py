"""What k8s and owner references read: the :class:`Store` protocol.

The webhook passes an informer-backed store (``cluster.store``), the offline CLI a static one;
:mod:`.scoped` wraps either for a namespaced policy. It sits apart from :mod:`.resolver` so that
:mod:`.scoped` and :mod:`.resolver` need not import each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kinitiras_py.base.typedefs import Obj

__all__ = ["Store"]


class Store(Protocol):
    """Read access to cluster objects (an informer cache, or files offline)."""

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The object, or None when it does not exist. Raises LookupError for an unknown kind."""

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        """Every object of that kind (in ``namespace`` when given)."""
