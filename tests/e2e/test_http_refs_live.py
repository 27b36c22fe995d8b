"""``from: http`` value references against a real HTTP server started by the test.

The webhook process calls the server on 127.0.0.1 while the API server admits objects created
with kubectl. The webhook runs with ``--http-namespaced --http-allow http://127.0.0.1:<port>/``
(tests/e2e/conftest.py): loopback is reached only through that exact entry, and the server
listens on that port.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster

SLOW_SECONDS = 3.0


@dataclass
class Lookups:
    """The test's HTTP server: its base URL and the requests it received (path, query)."""

    url: str
    seen: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)

    def queries(self, path: str) -> list[dict[str, list[str]]]:
        return [q for p, q in list(self.seen) if p == path]


def _handler(lookups: Lookups) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            lookups.seen.append((url.path, query))
            name = query.get("name", [""])[0]
            status, content_type = 200, "application/json"
            if url.path == "/team":
                body = json.dumps({"team": f"team-{name}"})
            elif url.path == "/approval":
                body = json.dumps({"reject": name.startswith("frozen")})
            elif url.path == "/slow":
                time.sleep(SLOW_SECONDS)
                body = json.dumps({"team": "late"})
            elif url.path == "/text":
                body, content_type = "<html>maintenance</html>", "text/html"
            else:
                status, body = 500, json.dumps({"error": "backend exploded"})
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the webhook gave up waiting (the slow endpoint)
                pass

        def log_message(self, *_args: Any) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def lookups(webhook: Webhook) -> Iterator[Lookups]:
    """A plain-HTTP JSON server on the port the webhook may call, stopped after the module."""
    holder = Lookups("")
    server = ThreadingHTTPServer(("127.0.0.1", webhook.http_port), _handler(holder))
    server.daemon_threads = True
    holder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="http-refs", daemon=True)
    thread.start()
    try:
        yield holder
    finally:
        server.shutdown()
        server.server_close()


def apply_policy(cluster: Cluster, policy: dict[str, Any], resource: str, namespace: str) -> None:
    """Apply a namespaced policy and wait until the webhook has it in force."""
    name, rules = policy["metadata"]["name"], len(policy["spec"].get("overrideRules")
                                                   or policy["spec"].get("validateRules"))
    kubectl_ok(cluster, "apply", "-n", namespace, "-f", "-", input=json.dumps(policy))

    def ready() -> bool:
        out = cluster.kubectl("get", resource, name, "-n", namespace, "--no-headers").stdout.split()
        return out[1:3] == ["True", str(rules)]

    assert wait_for(ready, 60), cluster.kubectl("get", resource, name, "-n", namespace, "-o", "yaml").stdout


def label_policy(name: str, url: str, path: str, failure_policy: str = "Fail", timeout: float = 1,
                 extra_rules: list[dict[str, Any]] | None = None, kind: str = "ConfigMap") -> dict[str, Any]:
    """An OverridePolicy setting label example.com/team from ``url`` (queried with ?name=<object name>)."""
    rule = {"targetOperations": ["CREATE"], "failurePolicy": failure_policy, "overriders": {"template": {
        "type": "labels", "operation": "add", "path": "example.com/team",
        "valueRef": {"from": "http", "path": path, "http": {
            "url": url, "method": "GET", "params": {"name": "{{metadata.name}}"}, "timeoutSeconds": timeout}}}}}
    return {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": kind}],
                     "overrideRules": [rule, *(extra_rules or [])]}}


def create_configmap(cluster: Cluster, namespace: str, name: str) -> tuple[int, str]:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    proc = cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(cm))
    return proc.returncode, proc.stderr


def labels_of(cluster: Cluster, resource: str, name: str, namespace: str) -> dict[str, str]:
    out = kubectl_ok(cluster, "get", resource, name, "-n", namespace, "-o", "json")
    return json.loads(out)["metadata"].get("labels") or {}


@pytest.mark.parametrize("path", ["body.team", "team"])
def test_configmap_gets_the_label_from_the_http_answer(cluster: Cluster, webhook: Webhook, namespace: str,
                                                       lookups: Lookups, path: str) -> None:
    apply_policy(cluster, label_policy("team-from-http", f"{lookups.url}/team", path), "op", namespace)
    code, stderr = create_configmap(cluster, namespace, "billing")
    assert code == 0, stderr
    assert labels_of(cluster, "cm", "billing", namespace) == {"example.com/team": "team-billing"}


def test_pod_gets_the_label_from_the_http_answer(cluster: Cluster, webhook: Webhook, namespace: str,
                                                 lookups: Lookups) -> None:
    apply_policy(cluster, label_policy("pod-team", f"{lookups.url}/team", "body.team", kind="Pod"), "op", namespace)
    kubectl_ok(cluster, "run", "web-1", "-n", namespace, "--image=nginx", "--restart=Never")
    assert labels_of(cluster, "pod", "web-1", namespace) == {"example.com/team": "team-web-1", "run": "web-1"}


def test_validate_condition_reads_the_http_answer(cluster: Cluster, webhook: Webhook, namespace: str,
                                                  lookups: Lookups) -> None:
    policy = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ValidatePolicy",
              "metadata": {"name": "approval"},
              "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}], "validateRules": [{
                  "targetOperations": ["CREATE"], "template": {"type": "condition", "condition": {
                      "cond": "Equal", "value": {"boolean": True}, "message": "the approver refused",
                      "dataRef": {"from": "http", "path": "body.reject", "http": {
                          "url": f"{lookups.url}/approval", "params": {"name": "{{metadata.name}}"}}}}}}]}}
    apply_policy(cluster, policy, "vp", namespace)
    code, stderr = create_configmap(cluster, namespace, "frozen-1")
    assert code != 0
    assert f"ValidatePolicy {namespace}/approval: the approver refused" in stderr
    code, stderr = create_configmap(cluster, namespace, "open-1")
    assert code == 0, stderr


def test_slow_endpoint_with_failure_policy_fail_denies(cluster: Cluster, webhook: Webhook, namespace: str,
                                                       lookups: Lookups) -> None:
    apply_policy(cluster, label_policy("slow-fail", f"{lookups.url}/slow", "body.team"), "op", namespace)
    code, stderr = create_configmap(cluster, namespace, "late-1")
    assert code != 0
    # The webhook answered, after its own 1 s lookup timeout: the denial is ours, not the API server's
    # "failed calling webhook" at its 3 s webhook timeout (what a wall clock said here depended on
    # how busy the machine was).
    assert f"policy OverridePolicy {namespace}/slow-fail, rule 0: http reference: " in stderr
    assert f"GET {lookups.url}/slow?name=late-1: no answer within 1 s" in stderr
    assert "failed calling webhook" not in stderr and "deadline exceeded" not in stderr
    assert cluster.kubectl("get", "cm", "late-1", "-n", namespace).returncode != 0


def test_slow_endpoint_with_failure_policy_ignore_admits_with_a_warning(cluster: Cluster, webhook: Webhook,
                                                                        namespace: str, lookups: Lookups) -> None:
    static = {"targetOperations": ["CREATE"], "overriders": {"template": {
        "type": "labels", "operation": "add", "path": "example.com/static", "value": {"string": "yes"}}}}
    policy = label_policy("slow-ignore", f"{lookups.url}/slow", "body.team", failure_policy="Ignore",
                          extra_rules=[static])
    apply_policy(cluster, policy, "op", namespace)
    code, stderr = create_configmap(cluster, namespace, "late-2")
    assert code == 0, stderr
    assert f"Warning: policy OverridePolicy {namespace}/slow-ignore, rule 0: http reference: " in stderr
    assert "no answer within 1 s (failurePolicy Ignore: rule skipped)" in stderr
    # The skipped rule left no trace; the next rule still applied.
    assert labels_of(cluster, "cm", "late-2", namespace) == {"example.com/static": "yes"}


def test_non_json_answer_denies_and_the_placeholder_is_filled(cluster: Cluster, webhook: Webhook, namespace: str,
                                                              lookups: Lookups) -> None:
    apply_policy(cluster, label_policy("text-answer", f"{lookups.url}/text", "body.team"), "op", namespace)
    code, stderr = create_configmap(cluster, namespace, "plain-1")
    assert code != 0
    assert f"policy OverridePolicy {namespace}/text-answer, rule 0: http reference: " in stderr
    assert "is not JSON" in stderr and "maintenance" in stderr
    # {{metadata.name}} in params reached the server as ?name=<the object's name>.
    assert wait_for(lambda: {"name": ["plain-1"]} in lookups.queries("/text"), 30), lookups.seen


def test_error_status_denies_naming_the_status(cluster: Cluster, webhook: Webhook, namespace: str,
                                               lookups: Lookups) -> None:
    apply_policy(cluster, label_policy("broken-backend", f"{lookups.url}/broken", "body.team"), "op", namespace)
    code, stderr = create_configmap(cluster, namespace, "err-1")
    assert code != 0
    assert f"policy OverridePolicy {namespace}/broken-backend, rule 0: http reference: " in stderr
    assert f"GET {lookups.url}/broken?name=err-1 answered 500" in stderr
    assert "backend exploded" in stderr


@pytest.mark.parametrize(("url", "reason"), [
    ("http://169.254.169.254/latest/meta-data/iam/security-credentials/node", "is under no allowed prefix"),
    ("http://127.0.0.1:{other}/team", "is under no allowed prefix"),
    ("http://[::ffff:127.0.0.1]:{port}/team", "is under no allowed prefix"),
])
def test_a_policy_calling_outside_the_allow_list_is_refused_by_the_webhook(
        cluster: Cluster, webhook: Webhook, namespace: str, lookups: Lookups, url: str, reason: str) -> None:
    url = url.format(port=webhook.http_port, other=webhook.port)
    policy = label_policy("ssrf", url, "body.team")
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(policy))
    assert proc.returncode != 0
    assert ('admission webhook "' in proc.stderr and f"policy OverridePolicy {namespace}/ssrf: "
            "spec.overrideRules[0].overriders.template.valueRef.http.url: " in proc.stderr), proc.stderr
    assert reason in proc.stderr and "--http-allow PREFIX" in proc.stderr
    assert cluster.kubectl("get", "op", "ssrf", "-n", namespace).returncode != 0
