"""Settings of `kinitiras-py serve`, grouped by concern."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kinitiras_py.admission import mutationmemo
from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.refs.egress import Egress
from kinitiras_py.registration.builder import Registration
from kinitiras_py.runtime.certificates import CertSettings
from kinitiras_py.runtime.reporting import ReportSettings


@dataclass(frozen=True)
class ServerSettings:
    """Where and how the webhook listens."""

    bind_address: str = "0.0.0.0"
    port: int = 8443
    cert_dir: Path = Path("/certs")
    metrics_address: str = ":8080"
    """host:port of a separate plain-HTTP /metrics listener; empty serves /metrics on the webhook port."""
    deadline: float = 2.5
    drain_seconds: float = 0.0
    """After SIGTERM, keep answering (every connection closed after its answer) this long before
    the listener closes: the time the Service's endpoints take to drop a terminating pod."""
    shutdown_timeout: float = 10.0


@dataclass(frozen=True)
class ScanSettings:
    """The background scan of existing objects (docs/background-scan.md)."""

    enabled: bool = True
    period: float = 3600.0
    """Seconds between full passes (``--scan-period``)."""
    cpu_share: float = 0.5
    """At most this share of the event loop's time goes to the scan (``--scan-cpu-share``)."""


@dataclass(frozen=True)
class Settings:
    """Everything `serve` needs."""

    server: ServerSettings = field(default_factory=ServerSettings)
    registration: Registration = field(default_factory=Registration)
    certs: CertSettings = field(default_factory=CertSettings)
    register: bool = True
    label_namespaces: bool = False
    """Label excluded namespaces so the namespaceSelector skips them (needed before Kubernetes 1.21)."""
    kubeconfig: str | None = None
    lookup_timeout: float = 2.3
    """Below the deadline, so an overrunning lookup is decided by the rule's failurePolicy."""
    cel_results_bytes: int = celmemo.DEFAULT_BYTES
    """Memory for CEL results remembered by the parts of the object a rule read (0: none)."""
    mutation_results_bytes: int = mutationmemo.DEFAULT_BYTES
    """Memory for whole mutations remembered by all their inputs, half of it for their answers
    remembered by the request's bytes (0: none)."""
    scan: ScanSettings = field(default_factory=ScanSettings)
    reports: ReportSettings = field(default_factory=ReportSettings)
    """Whether and how fast PolicyReports are written (``--policy-reports``)."""
    egress: Egress = field(default_factory=Egress)
    """What http references may call (``--http-allow``, ``--http-namespaced``); the API server's
    addresses are added to the guarded ones at start."""
