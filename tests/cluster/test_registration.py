"""The registration reconciler against the real API server.

An allow-everything webhook runs on 127.0.0.1 with a certificate of our own CA, so the API
server really calls it: the policy entry fails closed, so creating a policy proves that the
caBundle written is the one the API server uses.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.certs import authority
from kinitiras_py.cluster import client
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.registration import applying
from kinitiras_py.registration.builder import Registration
from kinitiras_py.registration.reconciler import Reconciler
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"


class _AllowAll(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        type(self).calls += 1
        body = json.dumps({"apiVersion": review.get("apiVersion"), "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@dataclass(frozen=True)
class Webhook:
    url: str
    ca: bytes
    other_ca: bytes
    """A CA that did not sign the serving certificate."""


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    ca, other = authority.new_ca("registration-test-ca"), authority.new_ca("registration-test-other")
    leaf = authority.new_serving(ca, ["localhost"], ["127.0.0.1"])
    work = Path(tempfile.mkdtemp(prefix="kinitiras-reg-"))
    (work / "tls.crt").write_bytes(leaf.cert)
    (work / "tls.key").write_bytes(leaf.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "tls.crt", work / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AllowAll)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Webhook(f"https://127.0.0.1:{server.server_address[1]}", ca.cert, other.cert)
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Setup:
    rec: Reconciler
    api: Any
    reg: Registration
    cluster: Cluster

    async def config(self, kind: str = MUTATING) -> Obj:
        name = self.reg.mutating_name if kind == MUTATING else self.reg.validating_name
        found = await applying.read_config(self.api, kind, name)
        assert found is not None, f"{kind} {name} missing"
        return found

    async def resources(self, kind: str = MUTATING) -> set[str]:
        """Every resource in the objects entry's rules, as ``plural.group``."""
        hooks = (await self.config(kind))["webhooks"]
        found: set[str] = set()
        for hook in hooks:
            if "-policies." in hook["name"]:
                continue
            for rule in hook["rules"]:
                found |= {f"{r}.{g}" if g else r for r in rule["resources"] for g in rule["apiGroups"]}
        return found

    async def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return await asyncio.to_thread(self.cluster.kubectl, *args, input=input, check=check)


@pytest.fixture
async def setup(cluster: Cluster, webhook: Webhook) -> AsyncIterator[Setup]:
    # Policies of earlier tests go with their namespaces, in the background: while they do, the
    # reconciler rightly rewrites the rules, and these tests count writes. Start once they are gone.
    for _ in range(600):
        phases = await cluster.kubectl_ok("get", "namespaces", "-o", "jsonpath={.items[*].status.phase}")
        if "Terminating" not in phases:
            break
        await asyncio.sleep(0.1)
    api = await client.api_client(cluster.kubeconfig)
    tag = uuid.uuid4().hex[:8]
    reg = Registration(mutating_name=f"reg-test-{tag}", validating_name=f"reg-test-{tag}", url=webhook.url,
                       failure_policy="Ignore", object_selector={"matchLabels": {"reg-test": tag}})
    watch = PolicyWatch(api)
    rec = Reconciler(api, reg, watch, Discovery(api, max_age=0.5), webhook.ca,
                     debounce=0.3, poll_interval=0.05, retry_interval=1.0)
    watch.start()
    rec.start()
    try:
        await asyncio.wait_for(rec.ready.wait(), 30)
        yield Setup(rec, api, reg, cluster)
    finally:
        await rec.stop()
        await watch.stop()
        # Unregister before the test webhook goes: its policy entry fails closed.
        cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                        reg.mutating_name, "--ignore-not-found")
        await api.close()


async def eventually(check: Callable[[], Any], within: float = 30.0) -> float:
    """Await ``check()`` (a coroutine function) until it is truthy; return the time it took."""
    began = time.monotonic()
    while not await check():
        if time.monotonic() - began > within:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - began


def configmap_policy(name: str) -> str:
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: ConfigMap}}
  overrideRules:
    - overriders:
        plaintext:
          - {{op: add, path: /metadata/labels/seen, value: "yes"}}
"""


async def test_a_configmap_policy_adds_configmaps_and_its_deletion_removes_them(setup: Setup) -> None:
    assert "configmaps" not in await setup.resources()
    name = f"reg-cm-{uuid.uuid4().hex[:6]}"
    try:
        await setup.kubectl("apply", "-f", "-", input=configmap_policy(name))

        async def added() -> bool:
            return "configmaps" in await setup.resources()

        await eventually(added)
        assert "configmaps" not in await setup.resources(VALIDATING)  # no validate policy selects them
        hooks = {h["name"]: h for h in (await setup.config())["webhooks"]}
        objects = hooks["mutate.kinitiras.kcloudlabs.io"]
        assert objects["reinvocationPolicy"] == "IfNeeded" and objects["timeoutSeconds"] == 3
        assert objects["sideEffects"] == "None" and objects["failurePolicy"] == "Ignore"
        assert objects["objectSelector"] == setup.reg.object_selector
        assert not {"events", "leases.coordination.k8s.io", "events.events.k8s.io"} & await setup.resources()
    finally:
        await setup.kubectl("delete", "clusteroverridepolicy", name, "--ignore-not-found")

    async def removed() -> bool:
        return "configmaps" not in await setup.resources()

    await eventually(removed)


async def test_a_validate_policy_sends_its_kinds_to_validate_only(setup: Setup) -> None:
    name = f"reg-cvp-{uuid.uuid4().hex[:6]}"
    manifest = f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: Secret}}
  validateRules:
    - cel: "true"
      message: never refused
"""
    try:
        await setup.kubectl("apply", "-f", "-", input=manifest)

        async def added() -> bool:
            return "secrets" in await setup.resources(VALIDATING)

        await eventually(added)
        assert "secrets" not in await setup.resources()
    finally:
        await setup.kubectl("delete", "clustervalidatepolicy", name, "--ignore-not-found")


async def test_nothing_is_written_when_nothing_changed(setup: Setup) -> None:
    versions = [(await setup.config(kind))["metadata"]["resourceVersion"] for kind in (MUTATING, VALIDATING)]
    writes = setup.rec.writes
    for _ in range(3):
        assert await setup.rec.reconcile() is True
    setup.rec.notify()
    await asyncio.sleep(1.0)
    assert setup.rec.writes == writes
    assert [(await setup.config(kind))["metadata"]["resourceVersion"] for kind in (MUTATING, VALIDATING)] == versions


async def test_a_hand_edit_of_an_owned_field_is_repaired(setup: Setup) -> None:
    await setup.kubectl("patch", "mutatingwebhookconfiguration", setup.reg.mutating_name, "--type=json",
                        "-p", '[{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 25}]')
    assert await setup.rec.reconcile() is True
    assert (await setup.config())["webhooks"][0]["timeoutSeconds"] == 3


def policy_dry_run(setup: Setup) -> Callable[[], Any]:
    """A server-side dry run creating a policy: it passes the fail-closed policy entry only when
    the API server trusts our webhook's certificate."""
    manifest = configmap_policy(f"reg-probe-{uuid.uuid4().hex[:6]}")

    async def accepted() -> bool:
        proc = await setup.kubectl("apply", "--dry-run=server", "-f", "-", input=manifest, check=False)
        return proc.returncode == 0

    return accepted


async def test_inject_writes_the_bundle_the_api_server_then_uses(setup: Setup, webhook: Webhook) -> None:
    accepted = policy_dry_run(setup)
    assert await accepted()
    assert await setup.rec.inject(webhook.other_ca) is True
    encoded = base64.b64encode(webhook.other_ca).decode()
    for kind in (MUTATING, VALIDATING):
        assert {h["clientConfig"]["caBundle"] for h in (await setup.config(kind))["webhooks"]} == {encoded}

    async def refused() -> bool:
        return not await accepted()

    await eventually(refused)  # the webhook's certificate is not signed by the injected CA
    writes = setup.rec.writes
    assert await setup.rec.reconcile() is True
    assert setup.rec.writes == writes  # the injected bundle is the current one: nothing to write
    assert await setup.rec.inject(webhook.ca) is True
    # Counted right after each call: the background reconciler may write rules meanwhile (a policy
    # of an earlier test being deleted with its namespace changes the kinds to send).
    assert setup.rec.writes == writes + 2  # both configurations written
    await eventually(accepted)
    writes = setup.rec.writes
    assert await setup.rec.inject(webhook.ca) is True
    assert setup.rec.writes == writes  # verified the second time, not rewritten
