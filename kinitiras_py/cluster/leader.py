"""Leader election on a ``coordination.k8s.io/v1`` Lease (served since Kubernetes 1.14, so 1.20 too).

The algorithm follows client-go's: every ``retry_period`` each candidate reads the Lease. A
Lease held by someone else counts as expired only when its record (holder, renewTime,
transitions) has not *changed* for ``leaseDurationSeconds`` of **local** time since this
candidate last saw it change, so clock skew between replicas does not matter. One refinement:
when the holder's ``renewTime`` agrees with this candidate's clock (it is no older than one poll,
give or take :data:`CLOCK_TOLERANCE`), the lease expires ``leaseDurationSeconds`` after that
renewal rather than after the moment it was seen, and the candidate reads the Lease again right
then; so a crashed holder is replaced within the lease duration of its last renewal instead of
up to two retry periods later. A holder that stopped renewing has stepped down long before
(``renew_deadline``), so the earlier takeover never overlaps a live leader. A free or expired
Lease is taken, and the holder renews it, with an update carrying the resourceVersion that was
read; a 409 means someone else wrote first, and the next round reads again. The leader steps
down when the Lease shows another holder, or when no renewal succeeded for ``renew_deadline``
(shorter than the lease duration, so it stops before anyone else may start). ``stop()``
releases the Lease (empty holder, duration 1 s) so a successor takes over at its next retry;
``stop(release=False)`` behaves like a crash: the successor waits for the lease to expire.

RBAC: ``leases`` get, create, update in the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import math
import os
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp

from kinitiras_py.base import aiotasks
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException

log = logging.getLogger(__name__)

__all__ = ["LeaderElector", "default_identity"]

Listener = Callable[[bool], Awaitable[None] | None]
"""Called with True on gaining and False on losing leadership."""
_ERRORS = (ApiException, aiohttp.ClientError, TimeoutError, OSError, ValueError)
CLOCK_TOLERANCE = 1.0
"""Seconds of clock difference (and request time) within which a holder's renewTime is trusted."""
_JITTER = 1.2


def default_identity() -> str:
    """``$POD_NAME`` (or the host name) plus a random suffix, unique per process."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _wall_seconds(stamp: object) -> float | None:
    """A Lease MicroTime (``2026-01-02T03:04:05.123456Z``) as a POSIX timestamp, or None."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class _Outcome(enum.Enum):
    HELD = "held"  # we hold the lease (acquired or renewed)
    OTHER = "other"  # someone else holds it
    FAILED = "failed"  # the API call failed or conflicted; nothing learnt


class LeaderElector:
    """Campaigns for Lease ``namespace``/``name`` as :attr:`identity` until stopped.

    :attr:`leading` is an ``asyncio.Event`` set while leading; :attr:`is_leader` reads it;
    listeners added with :meth:`on_change` are called (in order, awaited) on every change.
    """

    def __init__(self, client: Any, namespace: str, name: str, identity: str | None = None, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self._api = Api.of(client)
        self.namespace, self.name = namespace, name
        self.identity = identity or default_identity()
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self._clock = clock
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"
        self.leading = asyncio.Event()
        self.holder: str | None = None
        """The holder seen last ("" when released, None before the first read)."""
        self.conflicts = 0
        """Writes refused with 409 (another candidate wrote first)."""
        self.transitions = 0
        """Times this elector gained leadership."""
        self._listeners: list[Listener] = []
        self._lease: Obj | None = None
        self._observed: tuple[object, ...] | None = None
        self._expires_at = 0.0
        self._last_renew = 0.0
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<LeaderElector {self.namespace}/{self.name} as {self.identity}>"

    @property
    def is_leader(self) -> bool:
        """True while this elector holds the Lease."""
        return self.leading.is_set()

    def on_change(self, listener: Listener) -> Listener:
        """Call ``listener(leading)`` on every gain and loss of leadership."""
        self._listeners.append(listener)
        return listener

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start campaigning in a task of the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=repr(self))

    async def stop(self, release: bool = True) -> None:
        """Stop campaigning; when leading, step down (listeners run first) and, with ``release``,
        free the Lease. ``release=False`` simulates a crash."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)
        if self.is_leader:
            await self._set_leading(False)
            if release:
                await self._release()

    async def _run(self) -> None:
        while True:
            outcome = await self._try_acquire_or_renew()
            now = self._clock()
            if outcome is _Outcome.HELD:
                self._last_renew = now
                if not self.is_leader:
                    await self._set_leading(True)
            elif self.is_leader and (outcome is _Outcome.OTHER or now - self._last_renew >= self.renew_deadline):
                log.warning("%r: lost the lease (%s)", self,
                            f"held by {self.holder}" if outcome is _Outcome.OTHER else "renew deadline passed")
                await self._set_leading(False)
            pause = self.retry_period if self.is_leader else self.retry_period * random.uniform(1.0, _JITTER)
            if outcome is _Outcome.OTHER:  # look again the moment the holder's lease runs out
                pause = max(0.0, min(pause, self._expires_at - self._clock() + 0.01))
            await asyncio.sleep(pause)

    async def _set_leading(self, leading: bool) -> None:
        if leading:
            self.transitions += 1
            self.leading.set()
            log.info("%r: became the leader", self)
        else:
            self.leading.clear()
            log.info("%r: stopped leading", self)
        for listener in list(self._listeners):
            try:
                result = listener(leading)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("%r: a leadership listener failed", self)

    # -- the Lease ------------------------------------------------------------------------------

    def _timeout(self) -> float:
        return max(1.0, min(self.renew_deadline / 2, self.retry_period * 2))

    def _spec(self, previous: Obj, now: datetime) -> Obj:
        ours = previous.get("holderIdentity") == self.identity
        transitions = int(previous.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": previous.get("acquireTime") if ours and previous.get("acquireTime") else _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions if ours else transitions + (1 if previous else 0),
        }

    def _observe(self, lease: Obj) -> Obj:
        self._lease = lease
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed = record
            self._expires_at = self._expiry(spec)
        self.holder = str(spec.get("holderIdentity") or "")
        return spec

    def _expiry(self, spec: Obj) -> float:
        """When (on our clock) a Lease record seen just now expires unless it changes."""
        now = self._clock()
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        renewed = _wall_seconds(spec.get("renewTime"))
        if renewed is not None:
            age = time.time() - renewed
            if -CLOCK_TOLERANCE <= age <= self.retry_period * _JITTER + CLOCK_TOLERANCE:
                return now + duration - max(age, 0.0)
        return now + duration

    async def _try_acquire_or_renew(self) -> _Outcome:
        try:
            return await self._attempt()
        except asyncio.CancelledError:
            raise
        except ApiException as e:
            if e.status == 409:
                self.conflicts += 1
                log.debug("%r: conflict, someone else wrote the lease first", self)
            else:
                log.warning("%r: lease request failed: %s %s", self, e.status, e.reason)
        except _ERRORS as e:
            log.warning("%r: lease request failed: %r", self, e)
        return _Outcome.FAILED

    async def _attempt(self) -> _Outcome:
        timeout = self._timeout()
        now = datetime.now(UTC)
        try:
            lease = await self._api.request("GET", self._path, timeout=timeout)
        except ApiException as e:
            if e.status != 404:
                raise
            body: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec({}, now)}
            created = await self._api.request("POST", self._collection, body=body, timeout=timeout)
            self._observe(created)
            return _Outcome.HELD
        spec = self._observe(lease)
        holder = self.holder
        if holder and holder != self.identity:
            if self._clock() < self._expires_at:
                return _Outcome.OTHER
            log.info("%r: the lease of %s expired, taking over", self, holder)
        lease = dict(lease, spec=self._spec(spec, now))
        updated = await self._api.request("PUT", self._path, body=lease, timeout=timeout)
        self._observe(updated)
        return _Outcome.HELD

    async def _release(self) -> None:
        """Free the Lease if we still hold it (one retry after a conflict); best effort."""
        for _ in range(2):
            lease = self._lease
            if lease is None:
                return
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time(datetime.now(UTC))
            released = dict(lease, spec=dict(spec, holderIdentity="", leaseDurationSeconds=1, acquireTime=now,
                                             renewTime=now))
            try:
                self._observe(await self._api.request("PUT", self._path, body=released, timeout=self._timeout()))
                log.info("%r: released the lease", self)
                return
            except ApiException as e:
                if e.status != 409:
                    log.warning("%r: releasing the lease failed: %s %s", self, e.status, e.reason)
                    return
                with contextlib.suppress(*_ERRORS):
                    self._observe(await self._api.request("GET", self._path, timeout=self._timeout()))
            except _ERRORS as e:
                log.warning("%r: releasing the lease failed: %r", self, e)
                return
