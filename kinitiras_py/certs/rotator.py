"""Keeps every replica serving a valid certificate, and the leader rotating it.

Roles
    Every replica polls the store (``poll_interval``, default 10 s, or at once after
    :meth:`Rotator.kick`), reloads its :class:`ReloadableTLS` when ``tls.crt``/``tls.key`` change
    and reports what it serves. Only the **leader** (``is_leader()``) writes certificate data and
    calls the ``on_bundle`` injection hook. Nothing else writes the Secret's data.

Serving reports (how the leader knows every replica switched)
    Each replica writes the annotation ``kinitiras.kcloudlabs.io/serving.<replica-id>`` =
    ``{"fingerprint": "<sha256 of the served leaf DER>", "time": "<RFC 3339>"}`` with a JSON merge
    patch that touches only that key. It writes it after each reload, whenever the stored value
    is missing or names another certificate, and as a heartbeat once per ``check_interval``.
    Reports older than ``stale_checks`` x ``check_interval`` (default 3 h) belong to replicas
    presumed gone: the leader ignores them and deletes them. A stopping replica deletes its own.

Leader decisions (pure, in :mod:`kinitiras_py.certs.policy`)
    The leader plans at start, when it gains leadership, whenever the Secret changes (new
    resourceVersion), while a step is pending, and at least every ``check_interval`` (1 h).
    Leaf renewal (30 days before expiry) writes a new leaf from the current CA. CA rotation (90
    days before the CA expires, or a corrupt CA) runs as steps, each a separate write, so a new
    leader resumes where the old one stopped, from the Secret alone:

    1. publish: ``ca.crt`` = old + new CA, ``ca.key`` = new key (the leaf is unchanged);
    2. ``await on_bundle(bundle)`` until it returns True (retried every poll);
    3. issue the leaf from the new CA;
    4. replicas reload and report the new fingerprint;
    5. once every fresh report names the current leaf, ``ca.crt`` = new CA only; it is injected
       again (step 2 of the next plan).

Operator-triggered rotation
    An operator asks the leader for a rotation by annotating the Secret (or, with the file
    store, ``annotations.json``) with ``kinitiras.kcloudlabs.io/rotate``:

    * ``leaf``: issue a new serving certificate from the current CA (as :meth:`Rotator.rotate_leaf_now`);
    * ``ca``: start a CA rotation (as :meth:`Rotator.rotate_ca_now`), then continue through the
      steps above.

    e.g. ``kubectl -n <namespace> annotate secret <name> kinitiras.kcloudlabs.io/rotate=ca``. The
    leader honours it at its next check (within ``poll_interval``; ``serve --cert-poll-interval``)
    through the same path as the methods, and removes the annotation in the very write that
    performs the requested step (the new CA, or the new leaf), so a request runs once even if the
    leader dies right after. While the step cannot be taken yet (e.g. the injection hook keeps
    failing) the annotation stays and is retried at every check. Followers ignore it. Any other
    value is removed with a Warning Event ``RotationRequestInvalid``.

Corruption
    A Secret whose pair is unusable (unparsable PEM, key mismatch, leaf from an unknown CA) is
    never loaded: serving continues on the previous pair, every replica that sees it emits one
    Warning Event ``CertificateInvalid`` on the Secret (once per distinct content), and the
    leader repairs it by issuing a new leaf (or a new CA, keeping still-valid old CA certificates
    in the bundle, including those of the bundle it injected last).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
from collections.abc import Awaitable, Callable

from kinitiras_py.base import aiotasks
from kinitiras_py.base.latest import Latest
from kinitiras_py.certs import policy as decisions
from kinitiras_py.certs.authority import KeyPair
from kinitiras_py.certs.policy import TLS_CERT, TLS_KEY, Action, CertPolicy, Step
from kinitiras_py.certs.storage import CertStore, Conflict, Snapshot
from kinitiras_py.certs.tls import ReloadableTLS

log = logging.getLogger(__name__)

__all__ = ["ROTATE_ANNOTATION", "ROTATE_VALUES", "Rotator"]

MAX_STEPS = 8
"""Plan/act rounds in one check (a full CA rotation up to the wait for replicas takes 3 writes)."""
STOP_TIMEOUT = 5.0
ROTATE_ANNOTATION = decisions.ANNOTATION_DOMAIN + "rotate"
"""The operator's rotation request on the stored Secret: one of :data:`ROTATE_VALUES`."""
ROTATE_VALUES = ("leaf", "ca")
_REQUEST_DONE_BY = {"ca": Action.NEW_CA, "leaf": Action.ISSUE_LEAF}


def utc_now() -> dt.datetime:
    """The wall clock, UTC (the default clock)."""
    return dt.datetime.now(dt.UTC)


class Rotator:
    """The certificate loop of one replica; see the module docstring.

    Outputs: :attr:`tls` (give ``tls.context`` to the HTTPS server), :attr:`serving` (the pair
    served), :attr:`bundle` (the published CA bundle), :attr:`ready` (set once a pair is served).
    """

    def __init__(self, store: CertStore, policy: CertPolicy, *, replica_id: str, tls: ReloadableTLS | None = None,
                 on_bundle: Callable[[bytes], Awaitable[bool]] | None = None,
                 is_leader: Callable[[], bool] = lambda: True, check_interval: float = 3600.0,
                 poll_interval: float = 10.0, stale_checks: int = 3, propagation_delay: float = 2.0,
                 clock: Callable[[], dt.datetime] = utc_now) -> None:
        self.store, self.policy, self.replica_id = store, policy, replica_id
        self.tls = tls if tls is not None else ReloadableTLS()
        self._on_bundle = on_bundle
        self._is_leader = is_leader
        self.check_interval = dt.timedelta(seconds=check_interval)
        self.poll_interval = poll_interval
        self.stale_after = self.check_interval * stale_checks
        self._clock = clock
        self.report_key = decisions.report_key(replica_id)
        self.serving: Latest[KeyPair] = Latest()
        self.bundle: Latest[bytes] = Latest()
        self.ready = asyncio.Event()
        self.last_step: Step | None = None
        """The leader's latest decision (None on replicas that never led)."""
        self.events = 0
        """CertificateInvalid Events emitted by this replica."""
        self._served: tuple[bytes, bytes] | None = None
        self._injected: bytes | None = None
        self.propagation_delay = propagation_delay
        """Seconds to wait after injecting a bundle with a new CA before using that CA."""
        self._was_leader = False
        self._planned_version: str | None = None
        self._next_plan = dt.datetime.min.replace(tzinfo=dt.UTC)
        self._force_ca = self._force_leaf = False
        self._flagged: set[str] = set()
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def fingerprint(self) -> str | None:
        """SHA-256 of the leaf this replica serves."""
        return self.tls.fingerprint

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop (its first check runs at once)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"cert-rotator {self.replica_id}")

    async def stop(self, forget: bool = True) -> None:
        """Stop the loop; with ``forget``, delete this replica's serving report (best effort)."""
        task, self._task = self._task, None
        await aiotasks.cancel(task)
        if forget:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await self.store.annotate({self.report_key: None})
            except Exception as e:
                log.debug("could not remove the serving report %s: %s", self.report_key, e)

    def kick(self) -> None:
        """Check now instead of at the next poll (e.g. on a leadership change or a Secret event)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("certificate check failed (retrying in %.0f s): %s", self.poll_interval, e,
                            exc_info=log.isEnabledFor(logging.DEBUG))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            self._wake.clear()

    # -- one check ------------------------------------------------------------------------------

    async def check(self) -> Step | None:
        """Read the store, reload and report as a replica, then (leader only) plan and act.
        Returns the leader's last step, or None when not leading or nothing needed planning."""
        async with self._lock:
            return await self._check()

    async def _check(self) -> Step | None:
        now = self._clock()
        leader = self._is_leader()
        if leader and not self._was_leader:
            log.info("leading certificate rotation", extra={"replica": self.replica_id})
            self._injected, self._planned_version = None, None
        self._was_leader = leader
        snapshot = await self.store.read()
        if snapshot is not None:
            snapshot = await self._observe(snapshot, now)
        if not leader:
            return None
        request, snapshot = await self._requested(snapshot)
        # Flags raised for an annotation last for this check only: the annotation stays in the
        # store until the step is written, so the next check raises them again.
        own_ca = request == "ca" and not self._force_ca
        own_leaf = request == "leaf" and not self._force_leaf
        if request:
            log.info("%s rotation requested by annotation %s", "CA" if request == "ca" else "serving certificate",
                     ROTATE_ANNOTATION, extra={"store": self.store.description})
        self._force_ca, self._force_leaf = self._force_ca or own_ca, self._force_leaf or own_leaf
        try:
            due = (self._force_ca or self._force_leaf or now >= self._next_plan
                   or snapshot is None or snapshot.version != self._planned_version)
            if not due:
                return None
            step, snapshot = await self._lead(snapshot, now)
        finally:
            if own_ca:
                self._force_ca = False
            if own_leaf:
                self._force_leaf = False
        self._planned_version = snapshot.version if snapshot is not None and step.action == Action.IDLE else None
        if step.action == Action.IDLE:
            self._next_plan = now + self.check_interval
        return step

    async def _requested(self, snapshot: Snapshot | None) -> tuple[str | None, Snapshot | None]:
        """The operator's rotation request on ``snapshot`` (``leaf``, ``ca`` or None); an invalid
        one is removed (with a Warning Event) and the snapshot after that removal returned."""
        if snapshot is None or ROTATE_ANNOTATION not in snapshot.annotations:
            return None, snapshot
        raw = snapshot.annotations[ROTATE_ANNOTATION]
        value = raw.strip().lower()
        if value in ROTATE_VALUES:
            return value, snapshot
        message = (f"annotation {ROTATE_ANNOTATION}={raw!r} ignored and removed: the value must be "
                   f"{' or '.join(ROTATE_VALUES)}")
        log.warning("%s: %s", self.store.description, message)
        updated = await self.store.annotate({ROTATE_ANNOTATION: None})
        await self.store.event("RotationRequestInvalid", message)
        return None, updated if updated is not None else snapshot

    async def rotate_leaf_now(self) -> Step:
        """Leader only: issue a new leaf now (after the usual CA and injection checks); returns the
        last step. Raises RuntimeError when not leading or when the leaf could not be issued
        (for example while the injection hook keeps answering False)."""
        return await self._forced(leaf=True)

    async def rotate_ca_now(self) -> Step:
        """Leader only: start a CA rotation now. Returns the last step: WAIT once the new leaf is
        written and other replicas have yet to report it (the old CA leaves the bundle later),
        IDLE when this replica was the only one, INJECT while the hook has not confirmed the
        bundle (the rotation then goes on at the next checks)."""
        return await self._forced(ca=True)

    async def _forced(self, ca: bool = False, leaf: bool = False) -> Step:
        if not self._is_leader():
            raise RuntimeError(f"replica {self.replica_id} is not the leader")
        async with self._lock:
            self._force_ca, self._force_leaf = ca, leaf
            try:
                step = await self._check()
            finally:
                pending, self._force_ca, self._force_leaf = self._force_ca or self._force_leaf, False, False
        if pending or step is None:
            raise RuntimeError(f"the forced rotation did not happen: {step}")
        return step

    async def _observe(self, snapshot: Snapshot, now: dt.datetime) -> Snapshot:
        ins = decisions.inspect(snapshot.data)
        if ins.cas:
            self.bundle.set(ins.bundle)
        digest = hashlib.sha256(b"\0".join(snapshot.data.get(k, b"") for k in decisions.KEYS)).hexdigest()
        if ins.problems:
            await self._flag(digest, "; ".join(ins.problems))
        pair = (snapshot.data.get(TLS_CERT) or b"", snapshot.data.get(TLS_KEY) or b"")
        if ins.servable and pair != self._served:
            if self.tls.reload(*pair):
                self._served = pair
                self.serving.set(KeyPair(*pair))
                self.ready.set()
            else:
                await self._flag(digest, "the serving certificate and key could not be loaded")
        return await self._report(snapshot, now)

    async def _flag(self, digest: str, problem: str) -> None:
        if digest in self._flagged:
            return
        self._flagged.add(digest)
        served = self.tls.fingerprint
        message = f"{problem}; replica {self.replica_id} still serves {served or 'nothing'}"
        log.warning("invalid certificate data in %s: %s", self.store.description, message)
        if await self.store.event("CertificateInvalid", message):
            self.events += 1

    async def _report(self, snapshot: Snapshot, now: dt.datetime) -> Snapshot:
        served = self.tls.fingerprint
        if served is None:
            return snapshot
        mine = decisions.reports({k: v for k, v in snapshot.annotations.items() if k == self.report_key},
                                 now, self.check_interval).get(self.report_key)
        if mine is not None and mine.fingerprint == served:
            return snapshot
        updated = await self.store.annotate({self.report_key: decisions.report_value(served, now)})
        return updated if updated is not None else snapshot

    async def _lead(self, snapshot: Snapshot | None, now: dt.datetime) -> tuple[Step, Snapshot | None]:
        step = Step(Action.IDLE)
        for _ in range(MAX_STEPS):
            if not self._is_leader():
                return Step(Action.WAIT, "leadership lost"), snapshot
            annotations = snapshot.annotations if snapshot is not None else {}
            ins = decisions.inspect(snapshot.data if snapshot is not None else {})
            fresh = decisions.reports(annotations, now, self.stale_after)
            if self.tls.fingerprint is not None:  # this replica's own report needs no round trip
                fresh[self.report_key] = decisions.Report(self.replica_id, self.tls.fingerprint, now)
            step = decisions.plan(ins, now, self.policy, injected=self._injected, fresh=fresh,
                                  force_ca=self._force_ca, force_leaf=self._force_leaf)
            self.last_step = step
            stale = {k: None for k in decisions.stale_report_keys(annotations, now, self.stale_after)}
            if step.action in (Action.IDLE, Action.WAIT):
                if stale and snapshot is not None:
                    snapshot = await self.store.annotate(stale) or snapshot
                if step.action == Action.WAIT:
                    log.info("CA rotation waits for replicas: %s", ", ".join(step.behind))
                return step, snapshot
            if step.action == Action.INJECT:
                if not await self._inject(ins.bundle):
                    return step, snapshot
                continue
            data = self._new_data(step, snapshot, ins, now)
            changes: dict[str, str | None] = dict(stale)
            request = annotations.get(ROTATE_ANNOTATION, "").strip().lower()
            if _REQUEST_DONE_BY.get(request) == step.action:
                changes[ROTATE_ANNOTATION] = None  # the request is done by this very write
            try:
                if snapshot is None:
                    written = await self.store.create(data, changes)
                else:
                    written = await self.store.update(snapshot, data, changes)
            except Conflict as e:
                log.info("certificate write conflicted, reading again: %s", e)
                snapshot = await self.store.read()
                continue
            if step.action == Action.NEW_CA:
                self._force_ca = False
            elif step.action == Action.ISSUE_LEAF:
                self._force_leaf = False
            log.info("certificate step %s done: %s", step.action, step.reason, extra={"store": self.store.description})
            await self.store.event(_EVENT_REASONS[step.action], f"{step.action}: {step.reason}", "Normal")
            snapshot = await self._observe(written, now)
        return step, snapshot

    def _new_data(self, step: Step, snapshot: Snapshot | None, ins: decisions.Inspection,
                  now: dt.datetime) -> dict[str, bytes]:
        data = snapshot.data if snapshot is not None else {}
        if step.action == Action.NEW_CA:
            return decisions.with_new_ca(data, ins, now, self.policy, also_keep=self._injected or b"")
        if step.action == Action.ISSUE_LEAF:
            return decisions.with_new_leaf(data, ins, now, self.policy)
        return decisions.without_old_cas(data, ins)

    async def _inject(self, bundle: bytes) -> bool:
        if self._on_bundle is None:
            self._injected = bundle
            return True
        try:
            ok = bool(await self._on_bundle(bundle))
        except Exception as e:
            log.warning("injecting the CA bundle failed: %s", e)
            ok = False
        if ok:
            added = set(decisions.split_pems(bundle)) - set(decisions.split_pems(self._injected or b""))
            if self._injected and added and self.propagation_delay > 0:
                # A bundle that adds a CA must reach every API server's webhook cache before a
                # leaf from that CA is served, or their new TLS handshakes would fail meanwhile.
                await asyncio.sleep(self.propagation_delay)
            self._injected = bundle
            log.info("CA bundle injected", extra={"cas": len(decisions.split_pems(bundle))})
        return ok


_EVENT_REASONS = {Action.NEW_CA: "CARotationStarted", Action.ISSUE_LEAF: "CertificateIssued",
                  Action.DROP_OLD_CAS: "CARotationFinished"}
