"""``kinitiras-py serve``: run the admission webhook."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Callable
from pathlib import Path

from kinitiras_py.admission import mutationmemo
from kinitiras_py.cli import httpflags
from kinitiras_py.engine.evaluation import celmemo


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` command."""
    p = sub.add_parser("serve", help="run the admission webhook (HTTPS) against a cluster")
    p.add_argument("--bind-address", default="0.0.0.0", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=_port, default=8443, help="HTTPS port (default %(default)s)")
    p.add_argument("--cert-dir", type=Path, default=Path("/certs"),
                   help="directory with tls.crt, tls.key and ca.crt (default %(default)s)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default="json", choices=["json", "text"])
    p.add_argument("--metrics-address", default=":8080",
                   help="host:port for plain-HTTP /metrics; empty serves it on the webhook port")
    p.add_argument("--deadline", type=_positive_seconds, default=2.5,
                   help="answer within this many seconds (below the webhook timeout, default %(default)s)")
    p.add_argument("--drain-seconds", type=_seconds, default=0.0,
                   help="after SIGTERM, keep answering this long (closing each connection after its answer) "
                        "before closing the listener: set it to how long the Service's endpoints take to drop "
                        "a terminating pod (the deploy manifests use 10); the Lease is released at once "
                        "(default %(default)s)")
    p.add_argument("--cel-results-mib", type=_mebibytes, default=celmemo.DEFAULT_BYTES / 2**20,
                   help="memory for CEL results remembered by the parts of an object a rule reads, so Pods of "
                        "one template are evaluated once (0 switches it off; default %(default)s)")
    p.add_argument("--mutation-results-mib", type=_mebibytes, default=mutationmemo.DEFAULT_BYTES / 2**20,
                   help="memory for whole mutations remembered by everything they depend on, so identical "
                        "objects (a Deployment's replicas) are answered without running the rules again; half "
                        "of it keeps answers by the request's bytes, so those are not even decoded again "
                        "(0 switches it off; default %(default)s)")
    p.add_argument("--mutating-config", default="kinitiras-py", help="MutatingWebhookConfiguration name")
    p.add_argument("--validating-config", default="kinitiras-py", help="ValidatingWebhookConfiguration name")
    p.add_argument("--webhook-url", help="base URL the API server calls (e.g. https://127.0.0.1:8443); "
                   "default: the Service --service-namespace/--service-name")
    p.add_argument("--service-name", default="kinitiras-webhook")
    p.add_argument("--service-namespace", default="kinitiras-system")
    p.add_argument("--failure-policy", default="Fail", choices=["Fail", "Ignore"],
                   help="what the API server does when the webhook cannot answer (policy kinds always Fail)")
    p.add_argument("--object-selector", metavar="KEY=VALUE",
                   help="opt-in mode: only objects with this label reach the webhook (kinitiras' behaviour)")
    p.add_argument("--no-register", action="store_true", help="do not write the webhook configurations")
    p.add_argument("--cert-secret", metavar="NAME",
                   help="keep the CA and serving certificate in this Secret of --service-namespace, created and "
                        "rotated by the Lease holder (default: serve the files in --cert-dir as they are)")
    p.add_argument("--cert-dns", action="append", default=[], metavar="NAME",
                   help="extra DNS name for the serving certificate (repeatable)")
    p.add_argument("--cert-ip", action="append", default=[], metavar="IP",
                   help="IP address for the serving certificate, e.g. 127.0.0.1 (repeatable)")
    p.add_argument("--lease-name", default="kinitiras-py-webhook", help="Lease used to elect the rotating replica")
    p.add_argument("--cert-check-interval", type=_positive_seconds, default=3600.0,
                   help="seconds between certificate expiry checks (default %(default)s)")
    p.add_argument("--cert-poll-interval", type=_positive_seconds, default=10.0,
                   help="seconds between reads of the certificate Secret: replicas pick up a new pair, the "
                        "Lease holder honours a kinitiras.kcloudlabs.io/rotate=leaf|ca annotation "
                        "(default %(default)s)")
    p.add_argument("--label-excluded-namespaces", action="store_true",
                   help="label kube-system and our namespace so the webhook skips them (Kubernetes < 1.21 "
                        "has no kubernetes.io/metadata.name label; needs RBAC to patch namespaces)")
    p.add_argument("--scan-period", type=_positive_seconds, default=3600.0,
                   help="seconds between full background scans of the objects policies select; changes are "
                        "scanned as they happen (default %(default)s)")
    p.add_argument("--scan-cpu-share", type=_share, default=0.5,
                   help="at most this share (0 to 1) of the webhook's event loop goes to the background scan "
                        "(default %(default)s)")
    p.add_argument("--no-scan", action="store_true", help="do not scan existing objects in the background")
    p.add_argument("--policy-reports", action=argparse.BooleanOptionalAction, default=None,
                   help="write PolicyReports (wgpolicyk8s.io/v1alpha2) with the rules' results: admission-time "
                        "Audit and Warn findings, and the background scan's (default: when the API server serves "
                        "the PolicyReport CRD; only the Lease holder writes)")
    p.add_argument("--report-writes-per-second", type=_rate, default=10.0,
                   help="API requests per second at most for writing PolicyReports (default %(default)s)")
    httpflags.add(p)
    p.set_defaults(handler=_serve)


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port (0 to 65535), not {text}")
    return value


def _number(name: str, holds: Callable[[float], bool], must: str) -> Callable[[str], float]:
    """An argparse type named ``name``: a number for which ``holds`` is true, else an error saying
    it ``must`` be that."""
    def parse(text: str) -> float:
        value = float(text)
        if not holds(value):
            raise argparse.ArgumentTypeError(f"must be {must}, not {text}")
        return value

    parse.__name__ = name  # argparse names it in "invalid <name> value"
    return parse


_positive_seconds = _number("_positive_seconds", lambda v: 0 < v < math.inf, "a positive number of seconds")
_seconds = _number("_seconds", lambda v: 0 <= v <= 3600, "between 0 and 3600 seconds")
_share = _number("_share", lambda v: 0 < v <= 1, "above 0 and at most 1")
_rate = _number("_rate", lambda v: 0 < v <= 10000, "above 0 and at most 10000 per second")
_mebibytes = _number("_mebibytes", lambda v: 0 <= v <= 1024, "between 0 and 1024 MiB")


def _serve(args: argparse.Namespace) -> int:
    from kinitiras_py.base import logs
    from kinitiras_py.registration.builder import Registration
    from kinitiras_py.runtime import running
    from kinitiras_py.runtime.certificates import CertSettings
    from kinitiras_py.runtime.reporting import ReportSettings
    from kinitiras_py.runtime.settings import ScanSettings, ServerSettings, Settings

    egress = httpflags.egress(args)
    if isinstance(egress, str):
        print(f"error: {egress}", file=sys.stderr)
        return 2
    logs.configure(args.log_level, args.log_format)
    selector = None
    if args.object_selector:
        key, _, value = args.object_selector.partition("=")
        selector = {"matchLabels": {key: value}}
    settings = Settings(
        server=ServerSettings(bind_address=args.bind_address, port=args.port, cert_dir=args.cert_dir,
                              metrics_address=args.metrics_address, deadline=args.deadline,
                              drain_seconds=args.drain_seconds),
        registration=Registration(
            mutating_name=args.mutating_config, validating_name=args.validating_config, url=args.webhook_url,
            service_name=args.service_name, service_namespace=args.service_namespace,
            failure_policy=args.failure_policy, object_selector=selector,
            excluded_namespaces=("kube-system", args.service_namespace)),
        certs=CertSettings(secret=args.cert_secret, namespace=args.service_namespace, service=args.service_name,
                           extra_dns=tuple(args.cert_dns), ips=tuple(args.cert_ip), lease=args.lease_name,
                           check_interval=args.cert_check_interval, poll_interval=args.cert_poll_interval),
        register=not args.no_register, label_namespaces=args.label_excluded_namespaces,
        kubeconfig=args.kubeconfig, lookup_timeout=max(args.deadline - 0.2, 0.1),
        cel_results_bytes=int(args.cel_results_mib * 1024 * 1024),
        mutation_results_bytes=int(args.mutation_results_mib * 1024 * 1024),
        scan=ScanSettings(enabled=not args.no_scan, period=args.scan_period, cpu_share=args.scan_cpu_share),
        egress=egress,
        reports=ReportSettings(enabled=args.policy_reports, writes_per_second=args.report_writes_per_second),
    )
    asyncio.run(running.run(settings))
    return 0
