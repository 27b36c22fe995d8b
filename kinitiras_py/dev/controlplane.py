"""Bring a loopback control plane (etcd, kube-apiserver, kube-controller-manager) up and down.

State lives in one run directory: data, logs, certificates, the admin kubeconfig and
``state.json`` with the pids we started, so ``down`` stops exactly those and nothing else.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kinitiras_py.base.errors import DevError
from kinitiras_py.dev import binaries, processes
from kinitiras_py.dev.rest import Rest

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "webhook")
MIN_FREE_BYTES = 512 * 1024 * 1024


@dataclass
class State:
    """What `dev up` started: written to ``state.json`` in the run directory."""

    run_dir: str
    kubeconfig: str
    server: str
    pids: dict[str, int] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    binaries: str = ""
    started: float = 0.0

    def rest(self) -> Rest:
        """A REST client for this control plane's API server."""
        token = (Path(self.run_dir) / "token").read_text().strip()
        return Rest(self.server, token, str(Path(self.run_dir) / "certs" / "apiserver.crt"))


def default_run_dir() -> Path:
    """The run directory `dev up` uses unless told otherwise."""
    return binaries.cache_root() / "run"


def load_state(run_dir: Path) -> State | None:
    """The state of a control plane in ``run_dir``, or None when there is none."""
    try:
        return State(**json.loads((run_dir / "state.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running(state: State) -> dict[str, bool]:
    """Which of the recorded components still run."""
    return {name: processes.alive(pid) for name, pid in state.pids.items()}


def ensure_not_running(run_dir: Path) -> None:
    """Raise DevError when a control plane recorded in ``run_dir`` still runs."""
    previous = load_state(run_dir)
    if previous is not None and any(running(previous).values()):
        raise DevError(f"a control plane already runs from {run_dir} "
                       f"(export KUBECONFIG={previous.kubeconfig}); run `kinitiras-py dev down` first")


def up(run_dir: Path, apiserver_port: int | None = None, log: Callable[[str], None] = print,
       crds: list[dict[str, Any]] | None = None, webhook: bool = False) -> State:
    """Start the control plane in ``run_dir`` and apply ``crds``; raise DevError on any failure.

    On failure everything started so far is stopped again, so a failed `up` leaves nothing behind.
    """
    ensure_not_running(run_dir)
    _check_disk(run_dir)
    bin_dir = binaries.ensure_binaries()
    etcd = binaries.etcd_binary()
    if apiserver_port is not None:
        processes.ensure_port_free(apiserver_port, "kube-apiserver")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    for sub in ("etcd", "certs", "logs"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    ports = {"etcd": processes.free_port(), "etcd-peer": processes.free_port(),
             "kube-apiserver": apiserver_port or processes.free_port()}
    server = f"https://127.0.0.1:{ports['kube-apiserver']}"
    state = State(run_dir=str(run_dir), kubeconfig=str(run_dir / "kubeconfig"), server=server,
                  ports=ports, binaries=str(bin_dir), started=time.time())
    try:
        _start_all(state, etcd, bin_dir, log)
        if crds:
            apply_crds(state.rest(), crds, log)
        _wait_default_service_account(state.rest())
        if webhook:
            start_webhook(state, log)
    except BaseException:
        down(run_dir, remove=False)
        raise
    return state


def _start_all(state: State, etcd: str, bin_dir: Path, log: Callable[[str], None]) -> None:
    run_dir = Path(state.run_dir)
    logs = run_dir / "logs"
    ports = state.ports
    token = secrets.token_hex(16)
    (run_dir / "token").write_text(token)
    (run_dir / "tokens.csv").write_text(f"{token},admin,admin,system:masters\n")
    _write_sa_keys(run_dir)

    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    state.pids["etcd"] = processes.spawn([
        etcd, "--data-dir", str(run_dir / "etcd"), "--name", "kinitiras-dev",
        "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
        "--listen-peer-urls", f"http://127.0.0.1:{ports['etcd-peer']}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{ports['etcd-peer']}",
        "--initial-cluster", f"kinitiras-dev=http://127.0.0.1:{ports['etcd-peer']}",
    ], logs / "etcd.log")
    _save(state)
    _wait("etcd", state, logs / "etcd.log", 30, lambda: _http_ok(f"{etcd_url}/health"))
    log(f"etcd ready on 127.0.0.1:{ports['etcd']}")

    state.pids["kube-apiserver"] = processes.spawn([
        str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
        f"--secure-port={ports['kube-apiserver']}", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", f"--cert-dir={run_dir / 'certs'}",
        f"--token-auth-file={run_dir / 'tokens.csv'}", "--authorization-mode=Node,RBAC",
        f"--service-account-key-file={run_dir / 'sa.pub'}",
        f"--service-account-signing-key-file={run_dir / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
    ], logs / "kube-apiserver.log")
    _save(state)
    _wait("kube-apiserver", state, logs / "kube-apiserver.log", 120,
          lambda: (run_dir / "certs" / "apiserver.crt").exists() and state.rest().get("/readyz", 3)[0] == 200)
    _write_kubeconfig(state, token)
    log(f"kube-apiserver ready on {state.server}")

    state.pids["kube-controller-manager"] = processes.spawn([
        str(bin_dir / "kube-controller-manager"), f"--kubeconfig={state.kubeconfig}",
        f"--service-account-private-key-file={run_dir / 'sa.key'}",
        f"--root-ca-file={run_dir / 'certs' / 'apiserver.crt'}",
        "--use-service-account-credentials=false", "--leader-elect=false",
        "--bind-address=127.0.0.1", "--secure-port=0", "--port=0",
    ], logs / "kube-controller-manager.log")
    _save(state)
    time.sleep(0.5)
    if not processes.alive(state.pids["kube-controller-manager"]):
        raise DevError("kube-controller-manager exited at start:\n"
                       + processes.tail(logs / "kube-controller-manager.log"))
    log("kube-controller-manager started")


def start_webhook(state: State, log: Callable[[str], None] = print) -> None:
    """Run `kinitiras-py serve` on 127.0.0.1 with a temporary certificate and wait until it is ready.

    The webhook registers itself with a url clientConfig; the certificate rotator replaces the
    temporary certificate in a deployed set-up.
    """
    import ssl
    import sys

    from kinitiras_py.certs import authority

    run_dir = Path(state.run_dir)
    cert_dir = run_dir / "webhook"
    cert_dir.mkdir(exist_ok=True)
    ca = authority.new_ca("kinitiras-py-dev-ca")
    leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
    (cert_dir / "ca.crt").write_bytes(ca.cert)
    (cert_dir / "tls.crt").write_bytes(leaf.cert)
    (cert_dir / "tls.key").write_bytes(leaf.key)
    port = processes.free_port()
    state.ports["webhook"] = port
    state.pids["webhook"] = processes.spawn([
        sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={state.kubeconfig}",
        "--bind-address=127.0.0.1", f"--port={port}", f"--cert-dir={cert_dir}",
        f"--webhook-url=https://127.0.0.1:{port}", "--metrics-address=", "--log-level=info",
        "--label-excluded-namespaces",
    ], run_dir / "logs" / "webhook.log")
    _save(state)
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))

    def ready() -> bool:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=2, context=context) as resp:
            return bool(resp.status == 200)

    _wait("webhook", state, run_dir / "logs" / "webhook.log", 60, ready)
    log(f"webhook ready on https://127.0.0.1:{port} and registered")


def apply_crds(rest: Rest, crds: list[dict[str, Any]], log: Callable[[str], None] = print,
               timeout: float = 60.0) -> None:
    """Apply CustomResourceDefinitions and wait until each is Established."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in crds:
        code, body = rest.apply(base, crd)
        if code >= 300:
            raise DevError(f"applying CRD {crd['metadata']['name']} failed ({code}): {_message(body)}")
    deadline = time.monotonic() + timeout
    for crd in crds:
        name = crd["metadata"]["name"]
        while True:
            code, body = rest.get(f"{base}/{name}")
            conditions = (body.get("status") or {}).get("conditions") or [] if code == 200 else []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise DevError(f"CRD {name} did not become Established within {timeout:.0f} s")
            time.sleep(0.2)
    log(f"applied and established {len(crds)} CRDs")


def down(run_dir: Path, remove: bool = True) -> list[str]:
    """Stop the processes recorded in ``run_dir`` (reverse start order); return what was stopped."""
    state = load_state(run_dir)
    stopped: list[str] = []
    if state is not None:
        for name in reversed(COMPONENTS):
            pid = state.pids.get(name)
            expect = "kinitiras_py" if name == "webhook" else name
            if pid is not None and processes.stop(pid, expect=expect):
                stopped.append(f"{name} (pid {pid})")
    if remove and run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
    return stopped


def _wait(name: str, state: State, log: Path, timeout: float, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    pid = state.pids[name]
    while time.monotonic() < deadline:
        if not processes.alive(pid):
            text = processes.tail(log)
            hint = " (port already in use)" if "address already in use" in text else ""
            raise DevError(f"{name} exited during start-up{hint}; log {log}:\n{text}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.25)
    raise DevError(f"{name} was not ready within {timeout:.0f} s; log {log}:\n{processes.tail(log)}")


def _wait_default_service_account(rest: Rest, timeout: float = 60.0) -> None:
    # Pods are refused by the ServiceAccount admission plugin until the token controller has
    # given `default/default` its token secret; waiting here makes the first Pod creation work.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, body = rest.get("/api/v1/namespaces/default/serviceaccounts/default")
        if code == 200 and body.get("secrets"):
            return
        time.sleep(0.25)
    raise DevError("the default ServiceAccount got no token within 60 s; "
                   "see the kube-controller-manager log")


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)


def _write_sa_keys(run_dir: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (run_dir / "sa.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    (run_dir / "sa.pub").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def _write_kubeconfig(state: State, token: str) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kinitiras-dev",
        "clusters": [{"name": "kinitiras-dev", "cluster": {
            "server": state.server,
            "certificate-authority": str(Path(state.run_dir) / "certs" / "apiserver.crt")}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "kinitiras-dev", "context": {"cluster": "kinitiras-dev", "user": "admin"}}],
    }
    Path(state.kubeconfig).write_text(yaml.safe_dump(config, sort_keys=False))


def _save(state: State) -> None:
    path = Path(state.run_dir) / "state.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2))
    tmp.replace(path)


def _check_disk(run_dir: Path) -> None:
    probe = run_dir
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < MIN_FREE_BYTES:
        raise DevError(f"not enough disk space for the control plane under {probe}: "
                       f"{free // (1024 * 1024)} MiB free, need {MIN_FREE_BYTES // (1024 * 1024)} MiB")


def _message(body: Any) -> str:
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)
