"""Keep the webhook configurations in step with the policies in force and the CA bundle.

:class:`Reconciler` watches the policy indexes (their generations, polled every
``poll_interval``, or :meth:`Reconciler.notify`), waits until they have been quiet for
``debounce`` seconds (at most ``max_delay``), computes the rules (``rules.compute_split``) and
the desired configurations (``builder.desired``), and writes a configuration only when a field
we own differs from what the cluster holds, so an idle controller sends no writes. It also
resyncs every ``resync_interval`` (repairing edits made by hand and picking up new API
groups), retries sooner while kinds are unknown, and backs off on errors.

The CA bundle comes from ``bundle_source`` (bytes, or a callable returning them, sync or
async) and from :meth:`Reconciler.inject`, which the certificate rotator calls to push a new
bundle now; whichever changed last is used. Nothing is written while the bundle is empty, and
no rules are written before the policy watch has synced, so a restart never drops coverage.

With a :class:`~kinitiras_py.registration.coverage.CoverageGate` (``gate``), each pass that
confirms both configurations puts the policy versions it computed them from in force; a
follower confirms by reading the leader's configurations. That is how a policy never selects
anything before its kinds are sent to the webhook (the guarantee is explained there).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from kinitiras_py.base.ids import PolicyId
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import Api, ApiException
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.registration import applying, builder, rules
from kinitiras_py.registration.builder import Registration
from kinitiras_py.registration.coverage import CoverageGate, covers

log = logging.getLogger("kinitiras_py.registration")

__all__ = ["BundleSource", "Reconciler", "side_effects"]

BundleSource = bytes | Callable[[], bytes | None] | Callable[[], Awaitable[bytes | None]] | None
"""The current CA bundle (PEM bytes), or something that returns it."""
_ERRORS = (ApiException, LookupError, OSError, TimeoutError)


class PolicySource(Protocol):
    """What the reconciler reads from ``PolicyWatch``."""

    overrides: PolicyIndex
    validations: PolicyIndex


def _policies(watch: PolicySource) -> Iterator[CompiledPolicy]:
    yield from watch.overrides
    yield from watch.validations


def side_effects(policies: Iterator[CompiledPolicy] | list[CompiledPolicy]) -> str:
    """``NoneOnDryRun`` when a rule calls out over HTTP (a ``from: http`` value reference), else ``None``."""
    for policy in policies:
        for rule in policy.rules:
            if any(isinstance(ref, dict) and ref.get("from") == "http" for ref in (rule.refs or {}).values()):
                return "NoneOnDryRun"
    return "None"


class Reconciler:
    """Writes the Mutating/ValidatingWebhookConfiguration for the policies in force.

    ``start()`` runs the loop as a task, ``stop()`` ends it; ``reconcile()`` does one pass and
    ``inject()`` pushes a CA bundle now. ``ready`` is set after the first pass that wrote or
    verified both configurations.

    ``discovery`` answers the rules' kinds and group listings; the server passes its store's
    :class:`~kinitiras_py.cluster.discovery.Discovery`, so one cache serves both (None: a new one).

    With several replicas, pass ``is_leader``: only the leader writes (replicas whose caches or
    CA bundle lag would otherwise undo its writes); a follower's passes write nothing and it is
    ready at once. A replica that becomes leader checks at once. ``inject()`` always writes: the
    rotator calls it on the leader only.
    """

    def __init__(self, client: Any, reg: Registration, watch: PolicySource,
                 discovery: rules.Catalog | None, bundle_source: BundleSource, *, debounce: float = 1.0,
                 max_delay: float = 10.0, poll_interval: float = 0.25, resync_interval: float = 60.0,
                 retry_interval: float = 5.0, max_backoff: float = 60.0, label_namespaces: bool = False,
                 is_leader: Callable[[], bool] = lambda: True, gate: CoverageGate | None = None) -> None:
        self._client = client
        self.gate = gate
        """When set, every pass that confirms the configurations puts the policies it covered in force."""
        self.reg = reg
        self._watch = watch
        self.catalog = discovery or Discovery(client)
        self._source = bundle_source
        self.debounce, self.max_delay, self.poll_interval = debounce, max_delay, poll_interval
        self.resync_interval, self.retry_interval, self.max_backoff = resync_interval, retry_interval, max_backoff
        self.ready = asyncio.Event()
        self._included: dict[PolicyId, tuple[CompiledPolicy, float]] = {}
        self.writes = 0
        """How many times a configuration was written (apply or caBundle patch)."""
        self.passes = 0
        """How many reconcile passes ran."""
        self.last: rules.RuleSet | None = None
        """The rules of the last pass that wrote or verified the configurations."""
        self._bundle: bytes | None = None
        self._source_seen: bytes | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._skipped: list[str] = []
        self.label_namespaces = label_namespaces
        self.is_leader = is_leader
        self._namespaces_checked = False

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the loop in a task (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="webhook-reconciler")

    async def stop(self) -> None:
        """End the loop; a write in progress is cancelled (the next start repairs it)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def include(self, policy: CompiledPolicy) -> None:
        """Start covering ``policy``'s selectors while it is being admitted (before it is indexed).

        Returns at once: the widening runs in the reconciler's task, never inside the admission
        request's deadline. It only gets the rules ready sooner; that a policy is never in force
        before its kinds are covered is the :class:`~kinitiras_py.registration.coverage.CoverageGate`'s
        guarantee. Entries expire after a while: if the policy was refused elsewhere, the rules
        shrink back on a later pass.
        """
        self._included[policy.identity] = (policy, time.monotonic() + 60.0)
        self.notify()

    def _admitted(self) -> list[CompiledPolicy]:
        now = time.monotonic()
        for key, (_policy, until) in list(self._included.items()):
            if until < now:
                del self._included[key]
        return [policy for policy, _until in self._included.values()]

    def notify(self) -> None:
        """Reconcile soon (after the debounce), e.g. from ``PolicyWatch.on_change``."""
        self._wake.set()

    def fingerprint(self) -> tuple[int, int]:
        """What changes whenever the policies do: the generations of the two indexes (each put
        and remove makes a new one). It is polled, so it must not cost what the policies number:
        a set of every policy's identity, four times a second, held the event loop for
        milliseconds at 1,000 policies, and with it the requests waiting there."""
        return self._watch.overrides.generation, self._watch.validations.generation

    # --- CA bundle -------------------------------------------------------------------------------

    async def current_bundle(self) -> bytes | None:
        """The bundle to write: the source's when it changed since last read, else the last injected."""
        source = self._source
        value: Any = source() if callable(source) else source
        if inspect.isawaitable(value):
            value = await value
        if value and value != self._source_seen:
            self._source_seen = self._bundle = bytes(value)
        return self._bundle

    async def inject(self, bundle: bytes) -> bool:
        """Write ``bundle`` as ``caBundle`` of every webhook now; True when both configurations
        carry it afterwards (written, created or already so); False when the API server refused."""
        if not bundle:
            raise ValueError("empty CA bundle")
        with contextlib.suppress(Exception):
            await self.current_bundle()  # a source read for the first time later must not win over this
        self._bundle = bytes(bundle)
        encoded = base64.b64encode(bundle).decode()
        ok = True
        async with self._lock:
            for kind, name in self._names():
                try:
                    ok &= await self._inject_one(kind, name, encoded)
                except _ERRORS as e:
                    log.warning("injecting the CA bundle into %s %s failed: %s", kind, name, e)
                    ok = False
        if not ok:
            # Missing configurations (first start) are created now, with this bundle: the rotator
            # waits for True before it issues the serving certificate.
            try:
                ok = await self.reconcile()
            except _ERRORS as e:
                log.warning("writing the webhook configurations failed: %s", e)
                self.notify()
        return ok

    async def _inject_one(self, kind: str, name: str, encoded: str) -> bool:
        for _attempt in range(3):
            current = await applying.read_config(self._client, kind, name)
            if current is None:
                return False
            try:
                if await applying.patch_ca_bundle(self._client, current, encoded) is not None:
                    self.writes += 1
                    log.info("CA bundle injected", extra={"kind": kind, "config": name})
                return True
            except ApiException as e:
                if e.status not in (409, 422):
                    raise
        return False

    def _names(self) -> list[tuple[str, str]]:
        return [("MutatingWebhookConfiguration", self.reg.mutating_name),
                ("ValidatingWebhookConfiguration", self.reg.validating_name)]

    # --- one pass --------------------------------------------------------------------------------

    async def desired(self) -> tuple[list[Obj], rules.RuleSet] | None:
        """The configurations wanted now and their rules; None while there is no CA bundle."""
        return await self._desired(list(_policies(self._watch)))

    async def _desired(self, staged: list[CompiledPolicy]) -> tuple[list[Obj], rules.RuleSet] | None:
        bundle = await self.current_bundle()
        if not bundle:
            return None
        # A policy being admitted counts once: its indexed version, as soon as there is one.
        indexed = {p.identity for p in staged}
        policies = staged + [p for p in self._admitted() if p.identity not in indexed]
        ruleset = await rules.compute_split(policies, self.catalog)
        reg = dataclasses.replace(self.reg, side_effects=side_effects(policies))
        return list(builder.desired(reg, bundle, ruleset.rules, ruleset.validate_rules)), ruleset

    async def reconcile(self) -> bool:
        """One pass: compute and write what differs. True when both configurations now match
        (written or already so); False when the bundle is missing or the rules are incomplete
        and the existing configurations were kept."""
        if not self.is_leader():
            if self.gate is None:
                self.ready.set()  # the leader writes; a follower has nothing to wait for
                return True
            return await self._follow(self.gate)
        async with self._lock:
            self.passes += 1
            staged = list(_policies(self._watch))
            wanted = await self._desired(staged)
            if wanted is None:
                log.warning("no CA bundle yet: webhook configurations not written")
                return False
            configs, ruleset = wanted
            self._report(ruleset)
            if not self._namespaces_checked:
                await self.check_namespaces()
            for config in configs:
                kind, name = config["kind"], config["metadata"]["name"]
                current = await applying.read_config(self._client, kind, name)
                if ruleset.incomplete and current is not None:
                    continue  # keep what is there rather than drop kinds discovery could not see
                changes = builder.differences(current, config)
                if changes:
                    await applying.apply_config(self._client, config)
                    self.writes += 1
                    log.info("webhook configuration written", extra={"kind": kind, "config": name,
                                                                     "changes": changes[:20]})
            if ruleset.incomplete:
                return False
            self.last = ruleset
            if self.gate is not None:
                await self.gate.admit(staged)
            self.ready.set()
            return True

    async def _follow(self, gate: CoverageGate) -> bool:
        """A follower's pass: put in force the policies whose rules the leader's configurations
        in the cluster already cover (read, never written). False while they do not (yet)."""
        async with self._lock:
            self.passes += 1
            staged = list(_policies(self._watch))
            wanted = await self._desired(staged)
            if wanted is None:
                return False
            configs, ruleset = wanted
            if ruleset.incomplete:
                return False
            for config in configs:
                current = await applying.read_config(self._client, config["kind"], config["metadata"]["name"])
                if not covers(current, config):
                    log.info("waiting for the leader to cover the policies", extra={"config": config["kind"]})
                    return False
            await gate.admit(staged)
            self.ready.set()
            return True

    async def check_namespaces(self) -> list[str]:
        """The excluded namespaces the namespaceSelector cannot see as such: those without the
        ``kubernetes.io/metadata.name`` label (set by the API server from Kubernetes 1.21 on) and
        without the ignore label. They are labelled when ``label_namespaces`` is set (needs
        namespaces patch), else a warning says how to do it. Missing namespaces are not listed."""
        unseen: list[str] = []
        for namespace in self.reg.excluded_namespaces:
            try:
                obj = await Api.of(self._client).request("GET", f"/api/v1/namespaces/{namespace}",
                                                         timeout=applying.TIMEOUT)
            except _ERRORS as e:
                if not isinstance(e, ApiException) or e.status != 404:
                    log.debug("cannot read namespace %s: %s", namespace, e)
                continue
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(builder.NAME_LABEL) == namespace or builder.IGNORE_LABEL in labels:
                continue
            unseen.append(namespace)
            if self.label_namespaces:
                try:
                    await applying.label_ignored(self._client, namespace)
                    continue
                except _ERRORS as e:
                    log.warning("cannot label namespace %s: %s", namespace, e)
            log.warning("namespace %s is not excluded from the webhook on this API server (no %s label); "
                        "run: kubectl label namespace %s %s=true", namespace, builder.NAME_LABEL, namespace,
                        builder.IGNORE_LABEL)
        self._namespaces_checked = True
        return unseen

    def _report(self, ruleset: rules.RuleSet) -> None:
        if ruleset.skipped != self._skipped:
            for reason in ruleset.skipped:
                if reason not in self._skipped:
                    log.warning("not registered: %s", reason)
            self._skipped = list(ruleset.skipped)

    # --- the loop --------------------------------------------------------------------------------

    async def _loop(self) -> None:
        synced = getattr(self._watch, "synced", None)
        if isinstance(synced, asyncio.Event):
            await synced.wait()
        backoff = 0.0
        next_due = 0.0  # time.monotonic() of the next pass even without changes
        seen: tuple[int, int] | None = None
        leading = self.is_leader()
        while True:
            now = time.monotonic()
            current = self.fingerprint()
            if not leading and self.is_leader():
                leading = True
                next_due = now  # a new leader checks at once
            leading = leading and self.is_leader()
            if current == seen and not self._wake.is_set() and now < next_due:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(self.poll_interval, next_due - now))
                continue
            if seen is not None and (current != seen or self._wake.is_set()):
                current = await self._settle(current)
            self._wake.clear()
            try:
                done = await self.reconcile()
            except Exception as e:  # the loop must outlive any one failure
                backoff = min(max(backoff * 2, self.retry_interval), self.max_backoff)
                log.warning("reconciling the webhook configurations failed (retry in %.0f s): %s", backoff, e,
                            exc_info=not isinstance(e, _ERRORS))
                next_due = time.monotonic() + backoff
                seen = current
                continue
            backoff = 0.0
            seen = current
            retry = not done or (self.last is not None and self.last.retry)
            next_due = time.monotonic() + (self.retry_interval if retry else self.resync_interval)

    async def _settle(self, current: tuple[int, int]) -> tuple[int, int]:
        """Wait until the policies are unchanged for ``debounce`` seconds (at most ``max_delay``)."""
        began = quiet_since = time.monotonic()
        while True:
            now = time.monotonic()
            if now - quiet_since >= self.debounce or now - began >= self.max_delay:
                return current
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(self.poll_interval, self.debounce))
            latest = self.fingerprint()
            if latest != current or self._wake.is_set():
                current, quiet_since = latest, time.monotonic()
