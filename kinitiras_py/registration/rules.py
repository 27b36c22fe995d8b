"""The policies in force → the ``rules`` of the objects webhook: only what some policy can select.

Each ResourceSelector (``apiVersion``, ``kind``) becomes (API group, version, resource plural)
through a :class:`Catalog` (discovery). The forms of ``apiVersion`` are those of
``engine.objects.selectors``: ``*``/missing (any group), ``group/version``, ``group/*`` and a bare group
name (any version of the group), ``v1``-like (the core group at that version). ``kind: "*"`` or a
missing kind means every resource of the group(s); a policy with no selectors, or ``apiVersion:
"*"`` with any kind, means every group.

Never sent to the objects webhook (:data:`EXCLUDED`):

* ``leases`` (coordination.k8s.io): renewed every few seconds by every node and controller;
  a slow or failing webhook there stalls leader election and node heartbeats;
* ``events`` (core and events.k8s.io): high volume, written by the control plane itself;
* our own policy kinds: the separate policy webhook entry (``builder.policy_rule``) always
  covers them, and policies never apply to policies.

A webhook rule cannot subtract resources and the ``namespaceSelector`` cannot exclude
resources, so wildcards are handled like this (the trade-off, decided): a wildcard over a group
that holds no excluded resource stays a wildcard (``resources: ["*"]``, which also covers
kinds added to that group later); a wildcard over a group that holds one (the core group,
coordination.k8s.io, events.k8s.io, ours) or only virtual resources (authentication.k8s.io,
authorization.k8s.io) is expanded into the explicit list of that group's resources from
discovery, minus the excluded ones and minus virtual resources (those that cannot be read
back, such as ``bindings`` and the ``*reviews``). "Every group" is expanded
per discovered group the same way. The cost: kinds that appear later in an expanded group,
and groups that appear later, are covered only from the next reconcile (the reconciler
resyncs periodically).

Kinds not (yet) in discovery are skipped with a reason; the reconciler retries them. A
discovery failure marks the result ``incomplete`` so the caller can keep the rules it has.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kinitiras_py.api.policies import GROUP, KINDS
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.engine.objects import selectors

log = logging.getLogger("kinitiras_py.registration")

__all__ = ["EXCLUDED", "Catalog", "RuleSet", "Selecting", "compute_rules", "compute_split", "merge",
           "parse_api_version"]

ANY = "*"
EXCLUDED: frozenset[tuple[str, str]] = frozenset(
    {("coordination.k8s.io", "leases"), ("", "events"), ("events.k8s.io", "events")}
    | {(GROUP, info.plural) for info in KINDS.values()}
)
"""(group, plural) pairs never sent to the objects webhook."""
_EXPANDED_GROUPS = frozenset({group for group, _ in EXCLUDED} | {"authentication.k8s.io", "authorization.k8s.io"})
"""Groups whose wildcard is expanded from discovery: they hold an excluded resource, or only
virtual ones (TokenReview, SubjectAccessReview: created on every authentication/authorization
check, never stored), which the expansion leaves out."""


class Catalog(Protocol):
    """What rule computation needs from discovery (:class:`~kinitiras_py.cluster.discovery.Discovery`
    is the real one, and caches; a rule computation asks it again rather than keep its own copy).

    ``resolve`` raises LookupError for an unknown kind; the other two raise LookupError when
    discovery cannot be read. A message starting with ``discovery of`` marks a failure to talk
    to the API server, not an unknown kind.
    """

    async def resolve(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version`` (exact group version)."""

    async def groups(self) -> list[str]:
        """Every served API group (``""`` is core)."""

    async def group_resources(self, group: str) -> list[Resource]:
        """The stored (readable and writable) top-level resources of every served version of ``group``."""


@dataclass
class RuleSet:
    """The computed rules and what could not be covered."""

    rules: list[Obj] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Why a selector (or part of one) is not covered, one line each, sorted."""
    incomplete: bool = False
    """Discovery failed somewhere: the rules may miss kinds that do exist."""
    retry: bool = False
    """Something may resolve later (unknown kind or discovery failure): compute again soon."""
    validate_rules: list[Obj] | None = None
    """The rules of the validating objects webhook when they differ from ``rules`` (see
    :func:`compute_split`); None: the same as ``rules``."""


class Selecting(Protocol):
    """What :func:`compute_split` reads of a policy (``CompiledPolicy`` is one)."""

    @property
    def selectors(self) -> list[Obj]:
        """The policy's resourceSelectors (empty: every object)."""

    @property
    def validating(self) -> bool:
        """True for the validate kinds."""


def parse_api_version(api_version: str) -> tuple[str | None, str | None]:
    """A selector's ``apiVersion`` as (group or None for any, version or None for any)."""
    text = api_version.strip()
    group = selectors.selector_group(text)
    if group is None or group == ANY:
        if "/" in text and group == ANY:
            version = text.split("/", 1)[1]
            return None, (None if version in ("", ANY) else version)
        return None, None
    if "/" in text:
        version = text.split("/", 1)[1]
        return group, (None if version in ("", ANY) else version)
    return group, (text if group == "" else None)


def _is_transient(error: LookupError) -> bool:
    return str(error).startswith("discovery of")


class _Builder:
    """Accumulates (group, version) → resources and the reasons for what is left out."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.wanted: dict[tuple[str, str], set[str]] = {}
        self.result = RuleSet()

    def add(self, group: str, version: str, plural: str) -> None:
        self.wanted.setdefault((group, version), set()).add(plural)

    def skip(self, reason: str, retry: bool = False, transient: bool = False) -> None:
        self.result.skipped.append(reason)
        self.result.retry |= retry or transient
        self.result.incomplete |= transient

    async def groups(self) -> list[str] | None:
        try:
            return await self.catalog.groups()
        except LookupError as e:
            self.skip(f"cannot list API groups: {e}", transient=True)
            return None

    async def resources(self, group: str) -> list[Resource] | None:
        try:
            return await self.catalog.group_resources(group)
        except LookupError as e:
            self.skip(f"cannot list the resources of group {group or 'core'!r}: {e}", transient=True)
            return None

    def keep(self, group: str, plural: str, what: str) -> bool:
        if (group, plural) in EXCLUDED:
            self.skip(f"{what}: {plural}{'.' + group if group else ''} is never sent to the objects webhook")
            return False
        return True

    async def selector(self, sel: Obj) -> None:
        api_version = str(sel.get("apiVersion") or ANY)
        kind = str(sel.get("kind") or ANY)
        group, version = parse_api_version(api_version)
        what = f"selector {api_version} {kind}"
        if kind == ANY:
            await self._whole(group, version)
        elif group is not None and version is not None:
            await self._exact(group, version, kind, what)
        else:
            await self._kind_anywhere(group, version, kind, what)

    async def _exact(self, group: str, version: str, kind: str, what: str) -> None:
        try:
            found = await self.catalog.resolve(f"{group}/{version}" if group else version, kind)
        except LookupError as e:
            transient = _is_transient(e)
            self.skip(f"{what}: {e}", retry=True, transient=transient)
            return
        if self.keep(found.group, found.plural, what):
            self.add(found.group, found.version, found.plural)

    async def _kind_anywhere(self, group: str | None, version: str | None, kind: str, what: str) -> None:
        groups = [group] if group is not None else await self.groups()
        if groups is None:
            return
        hits = 0
        for g in groups:
            for res in await self.resources(g) or ():
                if res.kind == kind and (version is None or res.version == version):
                    hits += 1
                    if self.keep(res.group, res.plural, what):
                        self.add(res.group, version or ANY, res.plural)
        if not hits:
            self.skip(f"{what}: unknown kind {kind} (not in discovery yet)", retry=True)

    async def _whole(self, group: str | None, version: str | None) -> None:
        if group is not None and group not in _EXPANDED_GROUPS:
            self.add(group, version or ANY, ANY)
            return
        groups = [group] if group is not None else await self.groups()
        for g in groups or ():
            if g not in _EXPANDED_GROUPS:
                self.add(g, version or ANY, ANY)
                continue
            for res in await self.resources(g) or ():
                if (version is None or res.version == version) and (g, res.plural) not in EXCLUDED:
                    self.add(g, version or ANY, res.plural)


def merge(wanted: dict[tuple[str, str], set[str]]) -> list[Obj]:
    """(group, version) → resources as the fewest rules, sorted by group, version and resource.

    ``*`` among resources absorbs the rest; a (group, ``*``) entry absorbs what the same group
    lists at a specific version; entries left empty disappear.
    """
    norm = {key: ({ANY} if ANY in res else set(res)) for key, res in wanted.items() if res}
    for (group, version), res in list(norm.items()):
        wide = norm.get((group, ANY))
        if version != ANY and wide is not None:
            left = set() if ANY in wide else res - wide
            if left:
                norm[(group, version)] = left
            else:
                del norm[(group, version)]
    return [{"apiGroups": [group], "apiVersions": [version], "resources": sorted(res), "scope": ANY}
            for (group, version), res in sorted(norm.items())]


async def compute_rules(selector_lists: Iterable[list[Obj]], catalog: Catalog) -> RuleSet:
    """The rules covering every policy's selectors (one list per policy; empty means everything)."""
    builder = _Builder(catalog)
    everything = False
    for sels in selector_lists:
        if not sels:
            everything = True
            continue
        for sel in sels:
            if isinstance(sel, dict):
                await builder.selector(sel)
    if everything:
        await builder.selector({})
    result = builder.result
    result.rules = merge(builder.wanted)
    result.skipped = sorted(set(result.skipped))
    return result


async def compute_split(policies: Iterable[Selecting], catalog: Catalog) -> RuleSet:
    """The rules of each objects webhook: ``rules`` (to /mutate) cover the override policies'
    selectors, ``validate_rules`` (to /validate) the validate policies' selectors.

    An object no validate policy can select is never sent to /validate: the round trip would
    only answer "allowed". The policy kinds themselves reach both endpoints through the separate
    policy entry (``builder.policy_rule``), whatever the policies select.
    """
    mutating: list[list[Obj]] = []
    validating: list[list[Obj]] = []
    for policy in policies:
        (validating if policy.validating else mutating).append(policy.selectors)
    first = await compute_rules(mutating, catalog)
    second = await compute_rules(validating, catalog)
    return RuleSet(rules=first.rules, validate_rules=second.rules,
                   skipped=sorted(set(first.skipped) | set(second.skipped)),
                   incomplete=first.incomplete or second.incomplete, retry=first.retry or second.retry)
