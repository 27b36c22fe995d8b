"""js-admissions' watch hooks on the local API server: a converted JsAdmission counting pods per
namespace with jsa_created and jsa_deleted, its marker on the pods it mutates, and its state rebuilt
when the webhook restarts, because the hooks replay the informer's first list."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok, serving, wait_for

pytestmark = pytest.mark.cluster

LIMIT = 2
ADMISSION = f"""
apiVersion: momiji.com/v1
kind: ClusterJsAdmission
metadata:
  name: NAME
spec:
  kinds: [v1/pods]
  js: |
    var LIMIT = {LIMIT};
    function jsa_init(state) {{ state.pods = {{}}; }}
    function jsa_created(obj, sync, state) {{
      var ns = obj.metadata.namespace;
      state.pods[ns] = (state.pods[ns] || 0) + 1;
    }}
    function jsa_deleted(obj, sync, state) {{ state.pods[obj.metadata.namespace]--; }}
    function jsa_validate(op, obj, state) {{
      var count = state.pods[obj.metadata.namespace] || 0;
      if (op === "CREATE" && count >= LIMIT)
        return {{ Allowed: false, Message: obj.metadata.namespace + " already runs " + count + " pods" }};
    }}
    function jsa_mutate(obj) {{ return {{ Allowed: true, Result: obj }}; }}
"""
SHORT = {"ClusterOverridePolicy": "cop", "ClusterValidatePolicy": "cvp"}


def converted(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    source = tmp_path / "admission.yaml"
    source.write_text(ADMISSION.replace("NAME", name))
    proc = subprocess.run([sys.executable, "-m", "kinitiras_py", "convert", str(source)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def apply_all(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        rules = len(doc["spec"].get("overrideRules") or doc["spec"].get("validateRules"))
        apply_policy(cluster, json.dumps(doc), SHORT[doc["kind"]], doc["metadata"]["name"], rules)


def remove_all(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        cluster.kubectl("delete", SHORT[doc["kind"]], doc["metadata"]["name"], "--ignore-not-found")


def pod(name: str, namespace: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                       "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}})


def create(cluster: Cluster, name: str, namespace: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", *flags, "-f", "-", input=pod(name, namespace))


def test_a_jsa_created_counter_limits_pods_per_namespace(cluster: Cluster, webhook: Webhook, namespace: str,
                                                         other_namespace: str, tmp_path: Path) -> None:
    name = f"pod-count-{uuid.uuid4().hex[:6]}"
    docs = converted(tmp_path, name)
    assert [d["kind"] for d in docs] == ["ClusterOverridePolicy", "ClusterValidatePolicy"]
    try:
        apply_all(cluster, docs)
        for i in range(LIMIT):
            proc = create(cluster, f"p{i}", namespace)
            assert proc.returncode == 0, proc.stderr
        # The marker: the converted admission's jsa_mutate returned a Result.
        marked = get_json(cluster, "pod", "p0", namespace)["metadata"]["annotations"]
        assert marked["jsadmissions.momiji.com/mutate"] == name
        # The hooks see the creations through the watch, a moment after they are admitted.
        refused = wait_for(lambda: create(cluster, "extra", namespace, "--dry-run=server").returncode != 0, 10)
        assert refused
        proc = create(cluster, "extra", namespace)
        assert proc.returncode != 0 and f"{namespace} already runs {LIMIT} pods" in proc.stderr
        # Another namespace has its own count.
        assert create(cluster, "extra", other_namespace).returncode == 0
        # A deletion frees a place.
        kubectl_ok(cluster, "delete", "pod", "p0", "-n", namespace, "--wait=false", "--grace-period=0", "--force")
        assert wait_for(lambda: create(cluster, "extra", namespace, "--dry-run=server").returncode == 0, 10)
        assert create(cluster, "extra", namespace).returncode == 0
    finally:
        remove_all(cluster, docs)


def review(hook: Webhook, obj: dict[str, Any]) -> dict[str, Any]:
    """The webhook's answer to a CREATE of ``obj`` sent to its /validate endpoint directly, so that
    what is checked is this process' state, whatever other webhooks are registered."""
    meta = obj["metadata"]
    kind = {"group": "", "version": "v1", "kind": obj["kind"]}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": kind, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": meta["name"], "namespace": meta["namespace"], "operation": "CREATE",
        "userInfo": {"username": "e2e"}, "object": obj, "oldObject": None, "dryRun": True}}
    context = ssl.create_default_context(cafile=str(hook.ca))
    request = urllib.request.Request(f"https://127.0.0.1:{hook.port}/validate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        return dict(json.loads(answer.read())["response"])


def test_the_state_survives_a_restart_of_the_webhook(cluster: Cluster, namespace: str, other_namespace: str,
                                                     tmp_path: Path) -> None:
    name = f"pod-count-{uuid.uuid4().hex[:6]}"
    docs = [d for d in converted(tmp_path, name) if d["kind"] == "ClusterValidatePolicy"]
    third = json.loads(pod("third", namespace))
    elsewhere = json.loads(pod("third", other_namespace))
    config = f"kinitiras-e2e-hooks-{uuid.uuid4().hex[:6]}"
    try:
        with serving(cluster, config) as first:
            apply_all(cluster, docs)
            for i in range(LIMIT):
                assert create(cluster, f"p{i}", namespace).returncode == 0
            assert wait_for(lambda: not review(first, third)["allowed"], 10)
        with serving(cluster, config) as second:
            # Ready means the hooks have replayed the informer's list: the count is there at once.
            answer = review(second, third)
            assert not answer["allowed"], answer
            assert f"{namespace} already runs {LIMIT} pods" in answer["status"]["message"]
            assert review(second, elsewhere)["allowed"]
            assert "watch hooks of ClusterValidatePolicy" in second.log_text()
    finally:
        remove_all(cluster, docs)
