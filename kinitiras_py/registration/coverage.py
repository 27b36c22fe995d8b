"""A policy is in force only once the webhook rules cover what it selects.

The request path reads the indexes of a :class:`CoverageGate`, not the policy watch's. A
policy version gets in (:meth:`CoverageGate.admit`) only after a reconcile pass computed the
rules from a view holding that very version and found both webhook configurations in the
cluster covering them: written by this replica when it leads, read back from the cluster when
another replica leads (:func:`covers`). Taking a policy out (deleted, or its new version does
not compile) is immediate (:meth:`CoverageGate.withdraw`): narrowing never needs the rules.

Why this guarantees the widening happens before the policy can select anything: selection
happens only through these indexes, and a version enters them strictly after the configuration
that sends its kinds to the webhook was confirmed in the API server. Without the gate, an
indexed policy whose kinds are not yet registered would apply to some objects (kinds already
sent) and silently miss others (created in the meantime, never sent). The Ready condition is
written when a version gets in, so "READY True" means "in force". Admission of the policy
object itself never waits for any of this: discovery and configuration writes happen in the
reconciler's task, outside the 2.5 s request deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import VALIDATE_KINDS, CompiledPolicy

log = logging.getLogger("kinitiras_py.registration")

__all__ = ["CoverageGate", "InForce", "covers"]

InForce = Callable[[CompiledPolicy], Awaitable[None]]
"""Called with each policy version as it gets in force (e.g. to write its Ready condition)."""


class Staged(Protocol):
    """Where policies wait to get in force: the policy watch's indexes."""

    overrides: PolicyIndex
    validations: PolicyIndex


class CoverageGate:
    """The override and validation indexes the request path reads; see the module docstring."""

    def __init__(self, staged: Staged, on_in_force: InForce | None = None, overrides: PolicyIndex | None = None,
                 validations: PolicyIndex | None = None) -> None:
        # The indexes requests read (``serve`` passes its engine's).
        self.overrides = overrides if overrides is not None else PolicyIndex()
        self.validations = validations if validations is not None else PolicyIndex()
        self._staged = staged
        self.on_in_force = on_in_force

    def _pair(self, kind: str) -> tuple[PolicyIndex, PolicyIndex]:
        if kind in VALIDATE_KINDS:
            return self._staged.validations, self.validations
        return self._staged.overrides, self.overrides

    def in_force(self, policy: CompiledPolicy) -> bool:
        """Whether this very version is in force."""
        return policy in self._pair(policy.kind)[1]

    def withdraw(self, kind: str, namespace: str | None, name: str) -> None:
        """Take a policy out at once (deleted, or its latest version failed to compile)."""
        self._pair(kind)[1].remove(kind, namespace, name)

    async def admit(self, covered: Iterable[CompiledPolicy]) -> list[CompiledPolicy]:
        """Put in force each of ``covered`` (versions the confirmed rules were computed from)
        that is still the latest version staged and is not in force yet; returns those."""
        admitted = []
        for policy in covered:
            staged, live = self._pair(policy.kind)
            if policy in staged and policy not in live:
                live.put(policy)
                admitted.append(policy)
                log.info("%s (generation %d) in force", policy.ref, policy.generation)
        for policy in admitted:
            if self.on_in_force is not None:
                try:
                    await self.on_in_force(policy)
                except Exception:  # reporting must not undo what is in force
                    log.exception("reporting %s in force failed", policy.ref)
        return admitted

    async def admit_all(self) -> list[CompiledPolicy]:
        """Put every staged policy in force: for a controller that does not register the webhook."""
        return await self.admit([*self._staged.overrides, *self._staged.validations])


def _triples(rules: Iterable[Obj]) -> Iterable[tuple[str, str, str, str]]:
    for rule in rules:
        for group in rule.get("apiGroups") or []:
            for version in rule.get("apiVersions") or []:
                for resource in rule.get("resources") or []:
                    for operation in rule.get("operations") or []:
                        yield str(group), str(version), str(resource), str(operation)


def _covered(wanted: tuple[str, str, str, str], have: list[tuple[str, str, str, str]]) -> bool:
    return any(all(h in ("*", w) for w, h in zip(wanted, held, strict=True)) for held in have)


def covers(current: Obj | None, wanted: Obj) -> bool:
    """Whether ``current`` (a configuration read from the cluster) sends everything ``wanted``
    would: each webhook of ``wanted`` exists in ``current`` with rules at least as wide."""
    if current is None:
        return False
    have = {str(h.get("name")): list(_triples(h.get("rules") or []))
            for h in current.get("webhooks") or [] if isinstance(h, dict)}
    for hook in wanted.get("webhooks") or []:
        held = have.get(str(hook.get("name")))
        if held is None or not all(_covered(t, held) for t in _triples(hook.get("rules") or [])):
            return False
    return True
