"""Informers that feed JavaScript rules' watch hooks (:mod:`kinitiras_py.engine.rules.jshooks`).

For each policy version whose javascript rules define ``jsa_created``, ``jsa_updated`` or
``jsa_deleted``, the kinds its selectors name are watched (one informer per resource, shared by
every policy that follows it). Once an informer has listed, the hooks are started with the objects
it holds (``jsa_init``, then ``jsa_created`` for each, in a stable order) and from then on get
each event, in the order the informer applies them. The snapshot and the registration happen with
no ``await`` between them, so no event is lost or seen twice; an event a later relist (after a
410) synthesises for a change the snapshot already holds is recognised by its resourceVersion and
skipped. A new version of the policy starts afresh; the old one's state goes with it.

Data flows one way: this module calls the engine's hooks, and the engine knows nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kinitiras_py.base import aiotasks
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Resource
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.cluster.informers import Informer
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.rules import jshooks
from kinitiras_py.engine.running import watchhooks

log = logging.getLogger(__name__)

__all__ = ["HookFeed"]

PolicyKey = tuple[str, str | None, str]


@dataclass(eq=False)
class _Target:
    """One rule's hooks, fed from the resources of its policy."""

    policy: CompiledPolicy
    hooks: jshooks.Hooks
    since: dict[Resource, int | None] = field(default_factory=dict)
    """The informer's resourceVersion when the hooks were started, per resource: events of objects
    no newer than it are already in the snapshot they started with."""


def _version(obj: Obj) -> int | None:
    meta = obj.get("metadata")
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    try:
        return int(str(value))
    except ValueError:
        return None


def _newer(obj: Obj, since: int | None) -> bool:
    version = _version(obj)
    return since is None or version is None or version > since


class HookFeed:
    """Starts and feeds the watch hooks of the policies in force (:meth:`update` on every change)."""

    def __init__(self, client: Any, discovery: Discovery, *, watch_timeout: int = 300) -> None:
        self._client = client
        self.discovery = discovery
        self.watch_timeout = watch_timeout
        self._informers: dict[Resource, Informer] = {}
        self._targets: dict[Resource, list[_Target]] = {}
        self._users: dict[Resource, set[PolicyKey]] = {}
        """The policies following each resource: its informer stops when none is left."""
        self._versions: dict[PolicyKey, CompiledPolicy] = {}
        self._starting: dict[PolicyKey, asyncio.Task[None]] = {}

    def update(self, key: PolicyKey, compiled: CompiledPolicy | None) -> None:
        """``compiled`` is the version of policy ``key`` now (None: deleted or refused)."""
        if self._versions.get(key) is compiled:
            return
        self._withdraw(key)
        if compiled is None or not watchhooks.watching(compiled):
            return
        self._versions[key] = compiled
        self._starting[key] = asyncio.get_running_loop().create_task(self._start(key, compiled),
                                                                     name=f"jswatch {compiled.ref}")

    async def settled(self) -> None:
        """Wait until the hooks of every policy seen so far have been started (their states
        are then built once the queued calls have run)."""
        while pending := [task for task in self._starting.values() if not task.done()]:
            await asyncio.wait(pending)

    def _withdraw(self, key: PolicyKey) -> None:
        old = self._versions.pop(key, None)
        task = self._starting.pop(key, None)
        if task is not None:
            task.cancel()
        if old is None:
            return
        for resource, users in list(self._users.items()):
            self._targets[resource] = [t for t in self._targets.get(resource, ()) if t.policy is not old]
            users.discard(key)
            if not users:
                del self._users[resource]
                self._targets.pop(resource, None)
                informer = self._informers.pop(resource, None)
                if informer is not None:
                    asyncio.get_running_loop().create_task(informer.stop())

    async def _start(self, key: PolicyKey, compiled: CompiledPolicy) -> None:
        try:
            await self._started(key, compiled)
        finally:
            if self._starting.get(key) is asyncio.current_task():
                del self._starting[key]

    async def _started(self, key: PolicyKey, compiled: CompiledPolicy) -> None:
        try:
            resources = [await self.discovery.resolve(api_version, kind)
                         for api_version, kind in watchhooks.kinds(compiled)]
        except LookupError as e:
            for hooks in watchhooks.watching(compiled):
                hooks.state.problem = f"its watch hooks cannot follow the objects it selects: {e}"
            log.warning("%s: %s", compiled.ref, e)
            return
        informers = [self._informer(resource) for resource in resources]
        for resource in resources:
            self._users.setdefault(resource, set()).add(key)
        await asyncio.gather(*(informer.synced.wait() for informer in informers))
        # No await from here to the registration: the snapshot and it see the same events.
        built = []
        for hooks in watchhooks.watching(compiled):
            existing = [obj for informer in informers for obj in informer.list() if watchhooks.concerns(compiled, obj)]
            built.append(asyncio.wrap_future(hooks.start(sorted(existing, key=watchhooks.order))))
            target = _Target(compiled, hooks)
            for informer in informers:
                target.since[informer.resource] = int(informer.resource_version) \
                    if informer.resource_version.isdigit() else None
                self._targets.setdefault(informer.resource, []).append(target)
        await asyncio.gather(*built)  # the state is built: the replay has run
        log.info("watch hooks of %s replayed %s", compiled.ref, ", ".join(r.plural for r in resources))

    def _informer(self, resource: Resource) -> Informer:
        informer = self._informers.get(resource)
        if informer is None:
            informer = Informer(self._client, resource, watch_timeout=self.watch_timeout)
            informer.on_add(self._handler(resource, "created"))
            informer.on_update(self._handler(resource, "updated"))
            informer.on_delete(self._handler(resource, "deleted"))
            self._informers[resource] = informer
            informer.start()
        return informer

    def _handler(self, resource: Resource, event: str) -> Callable[..., Any]:
        async def handle(*objs: Obj) -> None:
            obj = objs[-1]  # updates come as (old, new)
            for target in list(self._targets.get(resource, ())):
                if not _newer(obj, target.since.get(resource)) or not watchhooks.concerns(target.policy, obj):
                    continue
                if event == "updated":
                    target.hooks.updated(obj, objs[0])
                else:
                    getattr(target.hooks, event)(obj)
        return handle

    async def stop(self) -> None:
        """Stop starting hooks and stop the informers."""
        starting, self._starting = list(self._starting.values()), {}
        await asyncio.gather(*(aiotasks.cancel(task) for task in starting))
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))
        self._informers.clear()
        self._targets.clear()
        self._users.clear()
