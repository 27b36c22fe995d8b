"""The resources a scan watches: the kinds the policies' selectors name, resolved by discovery.

A selector naming a kind (``v1 Pod``, ``apps/* Deployment``, ``Deployment`` in any group) is
watched at one version per group (the first discovery lists; the objects are the same at every
version). A selector of every kind (``kind: "*"``, none, or a policy without selectors) is not
scanned: it would watch every object of the cluster; it is reported in ``unscanned``. Nor are
the resources never sent to the webhook (leases, events, the policies).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.registration.rules import EXCLUDED, Catalog, parse_api_version

__all__ = ["Kinds", "resolve"]

ANY = "*"


@dataclass
class Kinds:
    """Resources to watch and why some selectors are not watched."""

    resources: set[Resource] = field(default_factory=set)
    unscanned: list[str] = field(default_factory=list)
    retry: bool = False
    """A kind was not found or discovery failed: resolve again later."""


async def _selector(sel: Obj, catalog: Catalog, found: Kinds) -> None:
    api_version, kind = str(sel.get("apiVersion") or ANY), str(sel.get("kind") or ANY)
    if kind == ANY:
        found.unscanned.append(f"selector {api_version} {kind}: every kind is not scanned")
        return
    group, version = parse_api_version(api_version)
    try:
        if group is not None and version is not None:
            hits = [await catalog.resolve(f"{group}/{version}" if group else version, kind)]
        else:
            hits = []
            for g in [group] if group is not None else await catalog.groups():
                first = next((r for r in await catalog.group_resources(g)
                              if r.kind == kind and (version is None or r.version == version)), None)
                hits += [first] if first is not None else []
    except LookupError as e:
        found.unscanned.append(f"selector {api_version} {kind}: {e}")
        found.retry = True
        return
    if not hits:
        found.unscanned.append(f"selector {api_version} {kind}: unknown kind (not in discovery yet)")
        found.retry = True
    for hit in hits:
        # One informer per group and resource: the same objects are served at every version.
        if (hit.group, hit.plural) not in EXCLUDED and all((r.group, r.plural) != (hit.group, hit.plural)
                                                           for r in found.resources):
            found.resources.add(hit)


async def resolve(selector_lists: Iterable[list[Obj]], catalog: Catalog) -> Kinds:
    """The resources the selectors (one list per policy) name."""
    found = Kinds()
    for sels in selector_lists:
        if not sels:
            found.unscanned.append("a policy without resourceSelectors (every kind) is not scanned")
        for sel in sels:
            if isinstance(sel, dict):
                await _selector(sel, catalog, found)
    return found
