"""Policies from the API server into the request-path indexes, compiled once per version.

One informer per policy kind. Each added or changed policy is compiled (``engine.policies.compiling``)
and put into the override or validation :class:`~kinitiras_py.engine.matching.selection.PolicyIndex`; a
policy that does not compile is taken out of its index (never half-applied) and its problems
are kept in ``errors`` for the status writer. Results are cached per (uid, generation), so
status-only updates and relists do not recompile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kinitiras_py.api import policies as models
from kinitiras_py.base import aiotasks
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.informers import Informer
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import VALIDATE_KINDS, CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy

log = logging.getLogger(__name__)

__all__ = ["OnChange", "PolicyKey", "PolicyWatch", "describe_error", "policy_resources"]

PolicyKey = tuple[str, str | None, str]
"""(kind, namespace or None for cluster kinds, name)."""
OnChange = Callable[[str, str | None, str, CompiledPolicy | None, str | None], Awaitable[None]]
"""``on_change(kind, namespace, name, compiled, error)``: compiled is None when the policy failed
(error says why) or was deleted (error is None too)."""


def policy_resources() -> dict[str, Resource]:
    """The REST resources of the four policy kinds, by kind (no discovery needed: they are ours)."""
    return {kind: Resource(models.GROUP, models.VERSION, info.plural, info.namespaced, kind)
            for kind, info in models.KINDS.items()}


def describe_error(error: BaseException) -> str:
    """Every problem of a failed compilation as ``field.path: reason``, joined by ``; ``."""
    if isinstance(error, PolicyErrors):
        return "; ".join(describe_error(e) for e in error.errors) or "invalid policy"
    if isinstance(error, PolicyError):
        return f"{error.path}: {error.reason}" if error.path else error.reason
    return f"internal error: {type(error).__name__}: {error}"


@dataclass(frozen=True)
class _Result:
    uid: str
    generation: int
    compiled: CompiledPolicy | None
    error: str | None


class PolicyWatch:
    """Keeps ``overrides`` and ``validations`` in step with the policies in the cluster.

    ``on_change`` (optional) is awaited after every event of a policy, including status-only
    updates, with the current result; the index has been updated before it runs.
    """

    def __init__(self, client: Any, overrides: PolicyIndex | None = None, validations: PolicyIndex | None = None,
                 *, on_change: OnChange | None = None, watch_timeout: int = 300,
                 compile: Callable[[Obj], CompiledPolicy] = compile_policy) -> None:
        self.overrides = overrides if overrides is not None else PolicyIndex()
        self.validations = validations if validations is not None else PolicyIndex()
        self.errors: dict[PolicyKey, str] = {}
        """Why each policy that failed to compile is not in force, by (kind, namespace, name)."""
        self.on_change = on_change
        self.compiles = 0
        """How many times a policy was compiled (cache misses)."""
        self.synced = asyncio.Event()
        """Set once the first list of all four kinds has been indexed."""
        self._compile = compile
        self._results: dict[PolicyKey, _Result] = {}
        self._sync_task: asyncio.Task[None] | None = None
        self.informers: dict[str, Informer] = {}
        for kind, resource in policy_resources().items():
            # Compact: the request path reads policies compiled; the objects are read for status only.
            informer = Informer(client, resource, watch_timeout=watch_timeout, compact=True)
            informer.on_add(self._upsert)
            informer.on_update(lambda _old, new: self._upsert(new))
            informer.on_delete(self._delete)
            self.informers[kind] = informer

    def start(self) -> None:
        """Start the four informers and the task that sets ``synced``."""
        for informer in self.informers.values():
            informer.start()
        if self._sync_task is None:
            self._sync_task = asyncio.get_running_loop().create_task(self._wait_synced(), name="policywatch-synced")

    async def _wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers.values()))
        self.synced.set()
        log.info("policies synced: %s", self.counts())

    async def stop(self) -> None:
        """Stop the informers (the indexes keep their contents)."""
        task, self._sync_task = self._sync_task, None
        await aiotasks.cancel(task)
        await asyncio.gather(*(informer.stop() for informer in self.informers.values()))

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The policy object as last seen, or None."""
        informer = self.informers.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    def result(self, kind: str, namespace: str | None, name: str) -> tuple[CompiledPolicy | None, str | None]:
        """(compiled, error) for a policy: (None, None) when it is unknown."""
        found = self._results.get((kind, namespace, name))
        return (found.compiled, found.error) if found is not None else (None, None)

    def counts(self) -> dict[str, int]:
        """How many policies of each kind are in force (compiled and indexed)."""
        counts = dict.fromkeys(models.KINDS, 0)
        for (kind, _ns, _name), result in self._results.items():
            if result.compiled is not None:
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def _index(self, kind: str) -> PolicyIndex:
        return self.validations if kind in VALIDATE_KINDS else self.overrides

    @staticmethod
    def _key(obj: Obj) -> PolicyKey:
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata") or {}
        info = models.KINDS.get(kind)
        namespace = meta.get("namespace") if info is not None and info.namespaced else None
        return kind, namespace or None, str(meta.get("name") or "")

    async def _upsert(self, obj: Obj) -> None:
        key = kind, namespace, name = self._key(obj)
        meta = obj.get("metadata") or {}
        uid, generation = str(meta.get("uid") or ""), int(meta.get("generation") or 0)
        result = self._results.get(key)
        if result is None or result.uid != uid or result.generation != generation:
            result = self._build(obj, uid, generation)
            self._results[key] = result
            if result.compiled is not None:
                self._index(kind).put(result.compiled)
                self.errors.pop(key, None)
                log.info("indexed %s (generation %d)", result.compiled.ref, generation)
            else:
                self._index(kind).remove(kind, namespace, name)
                self.errors[key] = result.error or "invalid policy"
                log.warning("%s is not in force: %s", models.policy_ref(obj), result.error)
        await self._notify(key, result.compiled, result.error)

    def _build(self, obj: Obj, uid: str, generation: int) -> _Result:
        self.compiles += 1
        try:
            return _Result(uid, generation, self._compile(obj), None)
        except PolicyError as e:
            return _Result(uid, generation, None, describe_error(e))
        except Exception as e:
            log.exception("compiling %s failed unexpectedly", models.policy_ref(obj))
            return _Result(uid, generation, None, describe_error(e))

    async def _delete(self, obj: Obj) -> None:
        key = kind, namespace, name = self._key(obj)
        self._results.pop(key, None)
        self.errors.pop(key, None)
        self._index(kind).remove(kind, namespace, name)
        log.info("removed %s", models.policy_ref(obj))
        await self._notify(key, None, None)

    async def _notify(self, key: PolicyKey, compiled: CompiledPolicy | None, error: str | None) -> None:
        if self.on_change is None:
            return
        try:
            await self.on_change(*key, compiled, error)
        except Exception:
            log.exception("on_change failed for %s %s/%s", key[0], key[1] or "", key[2])
