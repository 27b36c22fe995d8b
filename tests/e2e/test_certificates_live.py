"""Secret-backed certificates on the live API server (``serve --cert-secret``).

Each test runs its own `kinitiras-py serve` (the Lease holder: it creates the Secret, injects the CA
bundle into webhook configurations only this test uses, and issues the leaf for 127.0.0.1) in a
namespace of its own. The API server calls it directly at https://127.0.0.1:<port>. A
ClusterValidatePolicy refusing ConfigMaps named ``bad`` in a second namespace of the test makes
every ConfigMap admission there reach the webhook, which proves each call succeeded.

* the Secret is created when missing and the API server trusts the injected bundle;
* a stream of >= 100 admissions/s for 30 s through the API server sees no failure while the
  operator asks for a leaf rotation (annotation ``kinitiras.kcloudlabs.io/rotate=leaf``) at ~5 s
  and a CA rotation (``=ca``) at ~15 s; the served leaf changes twice and ``ca.crt`` holds two
  CAs, then one;
* a Secret whose ``tls.key`` no longer matches ``tls.crt`` is never served: admissions go on, a
  Warning Event ``CertificateInvalid`` appears, and the leader repairs the Secret.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kinitiras_py.certs import authority
from kinitiras_py.certs import policy as certpolicy
from kinitiras_py.certs.tls import leaf_fingerprint
from kinitiras_py.dev import processes
from kinitiras_py.dev.rest import Rest
from tests.conftest import Cluster
from tests.e2e.stream import Stream

pytestmark = pytest.mark.cluster

SECRET = "kinitiras-webhook-cert"
ROTATE = "kinitiras.kcloudlabs.io/rotate"
T = TypeVar("T")


def poll(check: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """``check()`` until truthy (returned); AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def insecure_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def served_fingerprint(port: int) -> str | None:
    """SHA-256 of the leaf served on 127.0.0.1:``port`` (None when nothing answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock, \
                insecure_context().wrap_socket(sock) as tls:
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    return hashlib.sha256(der).hexdigest() if der else None


def verified_handshake(port: int, ca_pem: bytes) -> bool:
    """True when 127.0.0.1:``port`` presents a certificate for 127.0.0.1 that chains to ``ca_pem``."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock, \
                ctx.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True
    except (OSError, ssl.SSLError):
        return False


def validate_calls(port: int) -> int:
    """Validating admission requests answered so far by the replica on ``port`` (its /metrics)."""
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=insecure_context()) as r:
        text = r.read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('kinitiras_webhook_requests_total{') and 'endpoint="validate"' in line))


def count_cas(bundle: bytes) -> int:
    return len(certpolicy.split_pems(bundle))


# -- the serve process ----------------------------------------------------------------------------------


@dataclass
class Replica:
    """One `kinitiras-py serve` process."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class Rig:
    """What one test owns: namespaces, configuration and policy names, processes; all removed in
    :meth:`cleanup` (webhook configurations first: a dead webhook with failurePolicy Fail would
    block the shared API server)."""

    cluster: Cluster
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    replicas: list[Replica] = field(default_factory=list)
    after: list[Callable[[], None]] = field(default_factory=list)
    """Run at the very end of :meth:`cleanup` (e.g. stopping a proxy the webhook URL points at)."""

    def __post_init__(self) -> None:
        self.namespace = f"e2e-certs-{self.suffix}"  # Secret and Lease (excluded from the webhook)
        self.objects = f"e2e-certs-{self.suffix}-objects"  # the ConfigMaps under test
        self.config = f"kinitiras-e2e-certs-{self.suffix}"
        self.lease = f"kinitiras-e2e-certs-{self.suffix}"
        self.policy = f"e2e-certs-deny-bad-{self.suffix}"
        self.work = Path(tempfile.mkdtemp(prefix="kinitiras-certs-"))
        for namespace in (self.namespace, self.objects):
            self.kubectl_ok("create", "namespace", namespace)

    def kubectl_ok(self, *args: str, input: str | None = None) -> str:
        proc = self.cluster.kubectl(*args, input=input)
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def start(self, name: str, webhook_url: str | None = None, port: int | None = None,
              extra: tuple[str, ...] = ()) -> Replica:
        """Start a replica (not waiting for it); ``extra`` are more `serve` flags."""
        port = port or processes.free_port()
        url = webhook_url or f"https://127.0.0.1:{port}"
        log = self.work / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kinitiras_py", "serve", f"--kubeconfig={self.cluster.kubeconfig}",
                 "--bind-address=127.0.0.1", f"--port={port}", f"--webhook-url={url}",
                 "--metrics-address=", "--log-level=debug", f"--cert-secret={SECRET}",
                 f"--service-namespace={self.namespace}", "--cert-ip=127.0.0.1", "--label-excluded-namespaces",
                 f"--lease-name={self.lease}", f"--mutating-config={self.config}",
                 f"--validating-config={self.config}", "--cert-check-interval=3600", "--cert-poll-interval=1",
                 *extra],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, POD_NAME=name))
        replica = Replica(name, port, proc, log)
        self.replicas.append(replica)
        return replica

    def wait_ready(self, replica: Replica, timeout: float = 60) -> None:
        def ready() -> bool:
            if replica.proc.poll() is not None:
                raise AssertionError(f"{replica.name} exited: {replica.log_tail()}")
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{replica.port}/readyz", timeout=2,
                                            context=insecure_context()) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        try:
            poll(ready, timeout, f"{replica.name} ready")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{replica.log_tail()}") from None

    def secret(self) -> tuple[dict[str, bytes], dict[str, str]] | None:
        """The Secret's data and annotations, or None when it does not exist."""
        status, obj = self.cluster.rest.get(f"/api/v1/namespaces/{self.namespace}/secrets/{SECRET}")
        if status == 404:
            return None
        assert status == 200, obj
        data = {k: base64.b64decode(v or "") for k, v in (obj.get("data") or {}).items()}
        return data, dict(obj["metadata"].get("annotations") or {})

    def data(self) -> dict[str, bytes]:
        found = self.secret()
        assert found is not None, "the Secret is missing"
        return found[0]

    def ca_bundles(self) -> dict[str, bytes]:
        """caBundle of every webhook of both configurations, by 'kind/webhook'."""
        found: dict[str, bytes] = {}
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            status, obj = self.cluster.rest.get(f"/apis/admissionregistration.k8s.io/v1/{kind}/{self.config}")
            assert status == 200, obj
            for hook in obj["webhooks"]:
                found[f"{kind}/{hook['name']}"] = base64.b64decode(hook["clientConfig"].get("caBundle") or "")
        return found

    def annotate(self, value: str) -> None:
        self.kubectl_ok("annotate", "secret", SECRET, "-n", self.namespace, f"{ROTATE}={value}", "--overwrite")

    def deny_bad_configmaps(self) -> None:
        """Apply the policy and wait until a ConfigMap named bad is refused (and another one admitted)."""
        policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterValidatePolicy",
                  "metadata": {"name": self.policy},
                  "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": self.objects}],
                           "validateRules": [{"cel": 'object.metadata.name != "bad"',
                                              "message": "ConfigMaps named bad are refused"}]}}
        self.kubectl_ok("apply", "-f", "-", input=json.dumps(policy))

        def refused() -> bool:
            status, body = self.dry_run_configmap("bad")
            return status >= 400 and "ConfigMaps named bad are refused" in json.dumps(body)

        poll(refused, 60, "the webhook to refuse ConfigMap bad", interval=0.3)
        status, body = self.dry_run_configmap(f"good-{self.suffix}")
        assert status == 201, body

    def dry_run_configmap(self, name: str) -> tuple[int, Any]:
        return self.cluster.rest.request("POST", f"/api/v1/namespaces/{self.objects}/configmaps?dryRun=All",
                                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                          "data": {"k": "v"}})

    def cleanup(self) -> None:
        configs = ("mutatingwebhookconfiguration,validatingwebhookconfiguration", self.config, "--ignore-not-found")
        self.cluster.kubectl("delete", "clustervalidatepolicies", self.policy, "--ignore-not-found", "--wait=false")
        self.cluster.kubectl("delete", *configs)
        for replica in self.replicas:
            replica.stop()
        self.cluster.kubectl("delete", *configs)  # in case a replica wrote them again meanwhile
        for namespace in (self.namespace, self.objects):
            self.cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
        for callback in self.after:
            callback()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture
def rig(cluster: Cluster) -> Iterator[Rig]:
    owned = Rig(cluster)
    try:
        yield owned
    finally:
        owned.cleanup()


# -- observers ---------------------------------------------------------------------------------------------


class LeafProbe:
    """Records every change of the leaf served on 127.0.0.1:``port`` (handshakes every ``interval``)."""

    def __init__(self, port: int, interval: float = 0.1) -> None:
        self.port, self.interval = port, interval
        self.seen: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leaf-probe", daemon=True)

    def start(self) -> LeafProbe:
        self._thread.start()
        return self

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(10)
        return [fp for _, fp in self.seen]

    def current(self) -> str | None:
        return self.seen[-1][1] if self.seen else None

    def _run(self) -> None:
        while not self._stop.is_set():
            fp = served_fingerprint(self.port)
            if fp is not None and (not self.seen or self.seen[-1][1] != fp):
                self.seen.append((time.monotonic(), fp))
            self._stop.wait(self.interval)


class SecretWatch:
    """Records ``ca.crt`` and the annotations of every version of the Secret (a watch)."""

    def __init__(self, rest: Rest, namespace: str, timeout: int) -> None:
        query = urllib.parse.urlencode({"watch": "1", "fieldSelector": f"metadata.name={SECRET}",
                                        "timeoutSeconds": str(timeout)})
        self.url = f"{rest.server}/api/v1/namespaces/{namespace}/secrets?{query}"
        self.rest = rest
        self.versions: list[tuple[bytes, dict[str, str]]] = []
        self._thread = threading.Thread(target=self._run, name="secret-watch", daemon=True)
        self._open = threading.Event()

    def start(self) -> SecretWatch:
        self._thread.start()
        assert self._open.wait(10), "the Secret watch did not open"
        return self

    def ca_counts(self) -> list[int]:
        """The number of CAs in ``ca.crt`` per version, consecutive duplicates folded."""
        counts: list[int] = []
        for ca, _ in list(self.versions):
            n = count_cas(ca)
            if not counts or counts[-1] != n:
                counts.append(n)
        return counts

    def _run(self) -> None:
        req = urllib.request.Request(self.url, headers={"Authorization": f"Bearer {self.rest.token}"})
        ctx = ssl.create_default_context(cafile=self.rest.ca_file)
        with urllib.request.urlopen(req, context=ctx, timeout=120) as resp:
            self._open.set()
            for line in resp:
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") in ("ADDED", "MODIFIED"):
                    ca = base64.b64decode((obj.get("data") or {}).get("ca.crt") or "")
                    self.versions.append((ca, dict(obj["metadata"].get("annotations") or {})))


def start_serving(rig: Rig) -> Replica:
    replica = rig.start("replica-a")
    rig.wait_ready(replica)
    rig.deny_bad_configmaps()
    return replica


# -- the tests ----------------------------------------------------------------------------------------------


def test_the_secret_is_created_and_the_api_server_trusts_the_injected_bundle(rig: Rig) -> None:
    assert rig.secret() is None
    replica = rig.start("replica-a")
    rig.wait_ready(replica)
    found = rig.secret()
    assert found is not None, replica.log_tail()
    data, annotations = found
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    status, obj = rig.cluster.rest.get(f"/api/v1/namespaces/{rig.namespace}/secrets/{SECRET}")
    assert obj["type"] == "kubernetes.io/tls"
    ins = certpolicy.inspect(data)
    assert ins.servable and not ins.problems and count_cas(data["ca.crt"]) == 1
    # the replica serves the stored leaf, for 127.0.0.1, chained to the stored CA
    assert served_fingerprint(replica.port) == leaf_fingerprint(data["tls.crt"])
    assert verified_handshake(replica.port, data["ca.crt"])
    assert serving_report(annotations, "replica-a")["fingerprint"] == leaf_fingerprint(data["tls.crt"])
    bundles = rig.ca_bundles()
    assert bundles and all(b == data["ca.crt"] for b in bundles.values()), bundles.keys()
    # the API server calls the webhook with that bundle: the policy refuses bad, admits others
    rig.deny_bad_configmaps()
    status, body = rig.dry_run_configmap("bad")
    assert status == 400 or status == 403, body
    assert "ConfigMaps named bad are refused" in body["message"]


def serving_report(annotations: dict[str, str], name: str) -> dict[str, str]:
    """The serving report of the replica started as ``name`` (its id starts with its POD_NAME)."""
    reports = [json.loads(v) for k, v in annotations.items() if k.startswith(certpolicy.REPORT_PREFIX + name)]
    assert len(reports) == 1, f"serving reports of {name}: {sorted(annotations)}"
    return dict(reports[0])


def test_leaf_and_ca_rotation_under_load_lose_no_admission(rig: Rig) -> None:
    replica = start_serving(rig)
    first = rig.data()
    fp0 = leaf_fingerprint(first["tls.crt"])
    watch = SecretWatch(rig.cluster.rest, rig.namespace, timeout=90).start()
    probe = LeafProbe(replica.port).start()
    calls = validate_calls(replica.port)
    stream = Stream(rig.cluster.rest, rig.objects, rate=110, duration=30, prefix=f"load-{rig.suffix}").start()
    try:
        poll(lambda: stream.elapsed() >= 5, 30, "5 s of stream")
        rig.annotate("leaf")
        fp1 = poll(lambda: (fp := probe.current()) != fp0 and fp, 60, "the rotated leaf being served")
        leaf_done = stream.elapsed()
        assert ROTATE not in rig.secret()[1]  # type: ignore[index]
        assert rig.data()["ca.crt"] == first["ca.crt"]  # a leaf rotation keeps the CA
        poll(lambda: stream.elapsed() >= 15, 30, "15 s of stream")
        rig.annotate("ca")
        fp2 = poll(lambda: (fp := probe.current()) not in (fp0, fp1) and fp, 60, "the leaf of the new CA")
        poll(lambda: watch.ca_counts()[-1:] == [1] and 2 in watch.ca_counts(), 60, "ca.crt: 2 CAs, then 1")
        ca_done = stream.elapsed()
    finally:
        report = stream.join()
        served = probe.stop()
    print(f"\nrotation under load: {report.describe()}; leaf rotated by t={leaf_done:.1f} s, "
          f"CA rotated by t={ca_done:.1f} s; served leaves {len(served)}; ca.crt CA counts {watch.ca_counts()}")
    assert report.error is None and report.failures == [], \
        f"{report.error}; {len(report.failures)} failed admissions: {report.failures[:10]}"
    # 110/s asked; on a busy machine the sender itself may lag, and every request still counts
    assert report.sent == 3300 and report.rate >= 50, report.describe()
    assert validate_calls(replica.port) - calls >= report.sent  # each admission called the webhook
    final = rig.data()
    assert served == [fp0, fp1, fp2], served
    assert leaf_fingerprint(final["tls.crt"]) == fp2
    assert count_cas(final["ca.crt"]) == 1 and final["ca.crt"] != first["ca.crt"]
    assert watch.ca_counts() == [1, 2, 1], watch.ca_counts()
    assert all(b == final["ca.crt"] for b in rig.ca_bundles().values())
    assert verified_handshake(replica.port, final["ca.crt"]) and not verified_handshake(replica.port, first["ca.crt"])
    assert ROTATE not in rig.secret()[1]  # type: ignore[index]


def test_a_corrupted_secret_is_not_served_is_reported_and_repaired(rig: Rig) -> None:
    replica = start_serving(rig)
    before = rig.data()
    fp0 = leaf_fingerprint(before["tls.crt"])
    calls = validate_calls(replica.port)
    stream = Stream(rig.cluster.rest, rig.objects, rate=30, duration=15, prefix=f"corrupt-{rig.suffix}").start()
    try:
        poll(lambda: stream.elapsed() >= 3, 30, "3 s of stream")
        stranger = authority.new_serving(authority.new_ca("stranger"), ["stranger"]).key
        patch = {"data": {"tls.key": base64.b64encode(stranger).decode()}}
        rig.kubectl_ok("patch", "secret", SECRET, "-n", rig.namespace, "--type=merge", "-p", json.dumps(patch))
        corrupted_at = stream.elapsed()

        def invalid_events() -> list[dict[str, Any]]:
            query = urllib.parse.urlencode(
                {"fieldSelector": f"involvedObject.name={SECRET},reason=CertificateInvalid"})
            status, body = rig.cluster.rest.get(f"/api/v1/namespaces/{rig.namespace}/events?{query}")
            assert status == 200, body
            return list(body.get("items") or [])

        events = poll(invalid_events, 60, "a CertificateInvalid Event")
        assert events[0]["type"] == "Warning" and events[0]["involvedObject"]["kind"] == "Secret"
        assert "tls.key: does not match tls.crt" in events[0]["message"], events[0]["message"]

        def repaired() -> dict[str, bytes] | None:
            data = rig.data()
            ins = certpolicy.inspect(data)
            return data if ins.servable and not ins.problems and data["tls.key"] != stranger else None

        fixed = poll(repaired, 60, "the leader to repair the Secret")
        assert fixed is not None
        fp1 = leaf_fingerprint(fixed["tls.crt"])
        assert fp1 != fp0 and fixed["ca.crt"] == before["ca.crt"]
        poll(lambda: served_fingerprint(replica.port) == fp1, 60, "the repaired leaf being served")
        repaired_at = stream.elapsed()
    finally:
        report = stream.join()
    print(f"\ncorruption: {report.describe()}; corrupted at t={corrupted_at:.1f} s, repaired and served by "
          f"t={repaired_at:.1f} s; events {len(events)}")
    assert report.error is None and report.failures == [], \
        f"{report.error}; {len(report.failures)} failed admissions: {report.failures[:10]}"
    assert report.rate >= 15, report.describe()  # 30/s asked; the sender may lag on a busy machine
    assert validate_calls(replica.port) - calls >= report.sent
    assert "refused a certificate/key pair" not in replica.log.read_text()  # never reached the TLS context
