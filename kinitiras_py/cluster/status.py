"""Policy status (Ready, Rendered, ruleCount) through the status subresource, and Warning Events.

``StatusWriter.on_change`` has the ``PolicyWatch.on_change`` signature. It only records the
latest result per policy; a worker task compares the wanted status with the object as the
informer last saw it and sends a merge patch to ``/status`` only when something differs. The
patch carries the object's resourceVersion, so a write based on a stale view fails with 409 and
is redone from the newer event. Failures are logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp

from kinitiras_py.api import policies as models
from kinitiras_py.base import aiotasks
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException
from kinitiras_py.cluster.policywatch import policy_resources
from kinitiras_py.engine.policies.compiled import CompiledPolicy

log = logging.getLogger(__name__)

__all__ = ["GetObject", "StatusWriter", "desired_status", "now_rfc3339", "rule_count"]

GetObject = Callable[[str, str | None, str], Obj | None]
"""(kind, namespace, name) → the policy as last seen (``PolicyWatch.get``)."""
OURS = ("Ready", "Rendered")
MESSAGE_LIMIT = 4096
WRITE_TIMEOUT = 10.0
_RESOURCES = policy_resources()


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it (seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rule_count(obj: Obj) -> int:
    """Number of rules in the policy's spec (override or validate)."""
    spec = obj.get("spec") or {}
    rules = spec.get("overrideRules") if obj.get("kind") in ("OverridePolicy", "ClusterOverridePolicy") \
        else spec.get("validateRules")
    return len(rules) if isinstance(rules, list) else 0


def _condition(type_: str, status: str, reason: str, message: str, generation: int, previous: Obj | None,
               now: str) -> Obj:
    unchanged = previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
    return {"type": type_, "status": status, "reason": reason, "message": message[:MESSAGE_LIMIT],
            "observedGeneration": generation,
            "lastTransitionTime": previous["lastTransitionTime"] if unchanged and previous else now}


def desired_status(obj: Obj, compiled: CompiledPolicy | None, error: str | None, now: str) -> Obj:
    """The ``status`` the policy should have; conditions of other types are kept, after ours.
    ``lastTransitionTime`` keeps its value unless the condition's status flips."""
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    current = [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    previous = {c.get("type"): c for c in current}
    if compiled is not None:
        count = len(compiled.rendered)
        ready = ("True", "Compiled", "the policy is compiled and in force")
        rendered = ("True", "TemplatesRendered", f"{count} template{'' if count == 1 else 's'} rendered")
    else:
        why = error or "the policy does not compile"
        ready = ("False", "CompileError", why)
        rendered = ("False" if ".template" in why else "Unknown", "CompileError",
                    "templates not rendered: the policy does not compile")
    conditions = [_condition("Ready", *ready, generation, previous.get("Ready"), now),
                  _condition("Rendered", *rendered, generation, previous.get("Rendered"), now)]
    conditions += [c for c in current if c.get("type") not in OURS]
    return {"conditions": conditions, "ruleCount": rule_count(obj)}


def _differs(obj: Obj, wanted: Obj) -> bool:
    status = obj.get("status") or {}
    return any(status.get(field) != value for field, value in wanted.items())


class StatusWriter:
    """Writes policy status conditions and emits rate-limited Warning Events.

    Wiring: ``watch = PolicyWatch(client)``, ``writer = StatusWriter(client, watch.get)``,
    ``watch.on_change = writer.on_change``; start the writer before the watch, stop it after.
    """

    def __init__(self, client: Any, get_object: GetObject, *, component: str = "kinitiras-py",
                 event_interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = Api.of(client)
        self._get_object = get_object
        self.component = component
        self.event_interval = event_interval
        self._clock = clock
        self._pending: dict[tuple[str, str | None, str], tuple[CompiledPolicy | None, str | None]] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._last_event: dict[tuple[str, str], float] = {}
        self.writes = 0
        """Status patches that succeeded."""
        self.events = 0
        """Events created."""

    def start(self) -> None:
        """Start the worker task (``on_change`` starts it too when needed)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._work(), name="status-writer")

    async def stop(self) -> None:
        """Stop the worker; pending writes are dropped."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)

    async def flush(self, timeout: float = 10.0) -> None:
        """Wait until every recorded change has been written (or given up on)."""
        async with asyncio.timeout(timeout):
            while self._pending or not self._idle.is_set():
                await self._idle.wait()
                await asyncio.sleep(0)

    async def on_change(self, kind: str, namespace: str | None, name: str, compiled: CompiledPolicy | None,
                        error: str | None) -> None:
        """Record the latest result of a policy; the worker writes it soon after."""
        self._pending[(kind, namespace, name)] = (compiled, error)
        self._idle.clear()
        self._wake.set()
        self.start()

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                key = next(iter(self._pending))
                compiled, error = self._pending.pop(key)
                obj = self._get_object(*key)
                if obj is None:
                    continue
                try:
                    await self.write_status(obj, compiled, error)
                except Exception:
                    log.exception("writing the status of %s %s/%s failed", key[0], key[1] or "", key[2])
            self._idle.set()

    async def write_status(self, obj: Obj, compiled: CompiledPolicy | None, error: str | None) -> bool:
        """Patch ``obj``'s status when it differs from what it should be; True when a patch was sent
        and accepted. On a compile error a CompileError Event is emitted along with the write."""
        wanted = desired_status(obj, compiled, error, now_rfc3339())
        if not _differs(obj, wanted):
            return False
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata") or {}
        resource = _RESOURCES.get(kind)
        if resource is None:
            return False
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": wanted}
        ref = models.policy_ref(obj)
        try:
            await self._api.request("PATCH", resource.path(meta.get("namespace"), meta.get("name"), "status"),
                                    body=body, content_type="application/merge-patch+json", timeout=WRITE_TIMEOUT)
        except ApiException as e:
            level = logging.DEBUG if e.status in (404, 409) else logging.WARNING
            log.log(level, "status of %s not written: %s %s", ref, e.status, e.reason)
            return False
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.warning("status of %s not written: %r", ref, e)
            return False
        self.writes += 1
        log.debug("status of %s written: Ready=%s", ref, wanted["conditions"][0]["status"])
        if compiled is None and error:
            await self.emit_event(obj, "CompileError", error)
        return True

    async def emit_rule_error(self, kind: str, namespace: str | None, name: str, message: str) -> bool:
        """A RuleError Warning Event on a policy known to the watch (rate-limited like every Event)."""
        obj = self._get_object(kind, namespace, name)
        return False if obj is None else await self.emit_event(obj, "RuleError", message)

    async def emit_event(self, obj: Obj, reason: str, message: str, type_: str = "Warning") -> bool:
        """Create a core/v1 Event about ``obj``; at most one per (reason, object) every ``event_interval``
        seconds. True when an Event was created."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or models.policy_ref(obj))
        now = self._clock()
        last = self._last_event.get((reason, uid))
        if last is not None and now - last < self.event_interval:
            return False
        self._last_event[(reason, uid)] = now
        namespace = meta.get("namespace") or "default"
        stamp = now_rfc3339()
        involved = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
                    "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name') or 'policy'}.", "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason, "message": message[:1024], "type": type_,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self._api.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event,
                                    timeout=WRITE_TIMEOUT)
        except ApiException as e:
            log.warning("event %s on %s not created: %s %s", reason, models.policy_ref(obj), e.status, e.reason)
            return False
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.warning("event %s on %s not created: %r", reason, models.policy_ref(obj), e)
            return False
        self.events += 1
        return True

