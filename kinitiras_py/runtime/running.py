"""`kinitiras-py serve`: start informers, the webhook server and registration; stop gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable

from kinitiras_py.admission.engine import Engine
from kinitiras_py.base import aiotasks, collector
from kinitiras_py.cluster import client as cluster_client
from kinitiras_py.cluster.jswatch import HookFeed
from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.cluster.status import StatusWriter
from kinitiras_py.cluster.store import InformerStore
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.results import PolicyId, RuleFailure
from kinitiras_py.refs import outbound
from kinitiras_py.refs.http import AiohttpClient
from kinitiras_py.registration.coverage import CoverageGate
from kinitiras_py.registration.reconciler import Reconciler
from kinitiras_py.runtime import certificates, reporting
from kinitiras_py.runtime.settings import Settings
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from kinitiras_py.scan.sink import LoggingSink, ReportSink
from kinitiras_py.webhook import server as webhook_server
from kinitiras_py.webhook.app import make_app, make_metrics_app
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics

log = logging.getLogger("kinitiras_py.runtime")
HOOKS_WAIT = 60.0
"""Seconds the webhook waits, at start, for the JavaScript watch hooks of the policies there are to
replay the objects that exist before it reports ready (rules reading a state not built yet fail)."""


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


async def run(settings: Settings, stop: asyncio.Event | None = None,
              started: Callable[[int], Awaitable[None]] | None = None, sink: ReportSink | None = None) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT), then shut down in order.

    The background scan (unless ``settings.scan`` switches it off) writes its results to ``sink``:
    by default the PolicyReport writer, or a log when PolicyReports are off (``--no-policy-reports``,
    or the API server does not serve their CRD).

    Once asked to stop, the replica gives up the Lease at once and keeps answering for
    ``settings.server.drain_seconds`` (the API server may send requests until it sees the pod
    leave the Service's endpoints), then stops accepting and lets in-flight requests finish.
    SIGINT, or a second signal, ends the drain early.
    """
    if stop is None:
        signals = _Signals()
        stop, hurry = signals.stop, signals.hurry
    else:
        hurry = asyncio.Event()
    api = await cluster_client.api_client(settings.kubeconfig)
    metrics = Metrics()
    store = InformerStore(api)
    egress = settings.egress.with_api_server(await outbound.addresses(api.connection.server))
    http = AiohttpClient(egress, store=store)
    feed = HookFeed(api, store.discovery)
    hooks_built = asyncio.Event()
    # One budget for the two memories of mutations: by their inputs, and by the request's bytes.
    engine = Engine(store=store, http=http, egress=egress, lookup_timeout=settings.lookup_timeout,
                    cel_results_bytes=settings.cel_results_bytes,
                    mutation_results_bytes=settings.mutation_results_bytes)
    # Requests read the engine's indexes: with registration, the gate puts a policy there only once
    # the webhook rules cover it (CoverageGate); without, the policy watch keeps them.
    if settings.register:
        watch = PolicyWatch(api)
        gate = CoverageGate(watch, lambda p: status.on_change(p.kind, p.namespace or None, p.name, p, None),
                            engine.overrides, engine.validations)
    else:
        watch = PolicyWatch(api, engine.overrides, engine.validations)
        gate = CoverageGate(watch)
    status = StatusWriter(api, watch.get)
    cert_dir = settings.server.cert_dir

    async def inject(bundle: bytes) -> bool:
        return await reconciler.inject(bundle) if settings.register else True

    certs = (certificates.rotating(api, settings.certs, inject) if settings.certs.secret
             else certificates.static(cert_dir))
    metrics.certificate.tls = certs.tls

    def on_rule_failure(failure: RuleFailure) -> None:
        policy = failure.policy
        asyncio.get_running_loop().create_task(
            status.emit_rule_error(policy.kind, policy.namespace, policy.name, str(failure)))

    reconciler = Reconciler(api, settings.registration, watch, store.discovery,
                            bundle_source=certs.bundle, is_leader=certs.is_leader,
                            label_namespaces=settings.label_namespaces, debounce=0.1,
                            gate=gate if settings.register else None)

    async def on_policy_change(kind: str, namespace: str | None, name: str, compiled: CompiledPolicy | None,
                               error: str | None) -> None:
        settling.soon("policy changes")  # a compiled policy lives until it changes: out of the full collections' walk
        feed.update((kind, namespace, name), compiled)
        if scanner is not None:
            await scanner.on_policy(kind, namespace, name, compiled)
        if compiled is None and reports.writer is not None:  # deleted, or refused: it finds nothing any more
            await reports.writer.forget_policy(PolicyId(kind, namespace, name))
        if not settings.register or compiled is None or gate.in_force(compiled):
            if compiled is None:
                gate.withdraw(kind, namespace, name)  # narrowing is safe at once
            await status.on_change(kind, namespace, name, compiled, error)
        # A new version is reported (Ready) when the gate puts it in force, after the pass covering it.
        reconciler.notify()

    settling = collector.Later()
    watch.on_change = on_policy_change
    reports = await reporting.reporting(settings.reports, api, store.discovery, engine.validations, certs.is_leader,
                                        metrics.reports)
    context = Context(store, http, egress, settings.lookup_timeout)
    scanner = (Scanner(api, sink or reports.writer or LoggingSink(), context, store.discovery,
                       period=settings.scan.period, cpu_share=settings.scan.cpu_share,
                       metrics=ScanMetrics(metrics.registry), ready=watch.synced)
               if settings.scan.enabled else None)
    registered = reconciler.ready if settings.register else asyncio.Event()
    if not settings.register:
        registered.set()
    handlers = Handlers(engine, metrics, deadline=settings.server.deadline,
                        ready=lambda: (not server.draining and watch.synced.is_set() and registered.is_set()
                                       and hooks_built.is_set() and certs.ready()),
                        on_rule_failure=on_rule_failure,
                        on_policy_admitted=reconciler.include if settings.register else None,
                        findings=reports.feed,
                        failure_policy=settings.registration.failure_policy)
    separate_metrics = bool(settings.server.metrics_address)
    metrics_host, metrics_port = (_split_address(settings.server.metrics_address) if separate_metrics
                                  else ("127.0.0.1", 0))
    server = webhook_server.Server(
        make_app(handlers, metrics_route=not separate_metrics), settings.server.bind_address, settings.server.port,
        certs.tls.context, make_metrics_app(handlers) if separate_metrics else None, metrics_host, metrics_port,
        shutdown_timeout=settings.server.shutdown_timeout)
    status.start()
    if scanner is not None and certs.elector is not None:
        certs.elector.on_change(scanner.on_leading)  # only the Lease holder scans and writes reports
    certs.start()
    reports.start()
    watch.start()
    gauges = asyncio.get_running_loop().create_task(_update_gauges(watch, metrics), name="gauges")
    await server.start()
    collector.manage(True)  # this process serves: it decides how its long-lived state is collected
    pauses = collector.Pauses(metrics.collections.observe).start()  # exported as kinitiras_gc_pause_seconds
    try:
        await watch.synced.wait()
        try:
            async with asyncio.timeout(HOOKS_WAIT):
                await feed.settled()
        except TimeoutError:
            log.warning("the JavaScript watch hooks of some policies are still waiting for their objects")
        hooks_built.set()
        # The policies and the informers' caches live as long as the process: out of the full
        # collections' walk, which would pause admission (the scan settles again after each pass).
        collector.settle("policies loaded, informers synced")
        if scanner is not None and certs.elector is None:
            await scanner.start()  # static certificates: no Lease, a single replica scans
        if settings.register:
            # The reconciler keeps the webhook rules scoped to what the policies select.
            reconciler.start()
            await reconciler.ready.wait()
        if started is not None:
            await started(server.port)
        log.info("ready", extra={"policies": watch.counts()})
        await stop.wait()
    finally:
        drain = settings.server.drain_seconds if stop.is_set() else 0.0  # a failure stops at once
        log.info("shutting down", extra={"drain_seconds": drain})
        if drain:
            server.drain()
        await asyncio.gather(_wait(hurry, drain), _step_down(reconciler, certs))
        await server.stop()
        await aiotasks.cancel(gauges)
        if scanner is not None:
            await scanner.stop()
        await reports.stop()
        await watch.stop()
        await feed.stop()
        await status.stop()
        await http.close()
        await store.close()
        await api.close()
        settling.cancel()
        pauses.stop()
        collector.manage(False)


def update_gauges(watch: PolicyWatch, metrics: Metrics) -> None:
    """Set the policy count and informer-synced gauges from the policy watch."""
    for kind, count in watch.counts().items():
        metrics.policies.labels(kind).set(count)
    for kind, informer in watch.informers.items():
        metrics.informer_synced.labels(kind).set(1 if informer.synced.is_set() else 0)


async def _update_gauges(watch: PolicyWatch, metrics: Metrics) -> None:
    while True:
        update_gauges(watch, metrics)
        await asyncio.sleep(5)


async def _step_down(reconciler: Reconciler, certs: certificates.Certificates) -> None:
    """Stop writing the webhook configurations and release the Lease, so a follower leads at its next try."""
    await reconciler.stop()
    await certs.stop()


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Until ``event`` is set or ``seconds`` have passed."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


class _Signals:
    """SIGTERM (what Kubernetes sends) sets :attr:`stop`; SIGINT, or any signal after the first,
    also sets :attr:`hurry`, which cuts the drain short."""

    def __init__(self) -> None:
        self.stop, self.hurry = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._received, False)
        loop.add_signal_handler(signal.SIGINT, self._received, True)

    def _received(self, interactive: bool) -> None:
        if interactive or self.stop.is_set():
            self.hurry.set()
        self.stop.set()
