"""kinitiras policies with `cue` rules, applied unchanged on the local API server: READY, their
compiled CEL stored beside the CUE, objects mutated and deletions denied as real CUE decides
(the corpus runs the same programs through real CUE: tests/unit/engine/cue)."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tests.conftest import DATA, Cluster
from tests.e2e.conftest import Webhook, apply_policy, get_json, kubectl_ok

pytestmark = pytest.mark.cluster


def _example(name: str, policy: str) -> dict:
    doc = yaml.safe_load((DATA / "examples" / name).read_text())
    doc["metadata"]["name"] = policy
    return doc


def test_override_cue_example_annotates_pods(cluster: Cluster, webhook: Webhook, namespace: str) -> None:
    policy = f"e2e-cue-{uuid.uuid4().hex[:8]}"
    doc = _example("addanno-cop.yaml", policy)
    try:
        apply_policy(cluster, yaml.safe_dump(doc), "cop", policy, 1)
        stored = get_json(cluster, "cop", policy)["spec"]["overrideRules"][0]["overriders"]
        assert stored["cue"] == doc["spec"]["overrideRules"][0]["overriders"]["cue"]  # the source, untouched
        assert "cue_out" in stored["cueCel"]
        for name, annotations in (("bare", None), ("annotated", {"kept": "yes"})):
            meta = {"name": name, "labels": {"kinitiras.kcloudlabs.io/webhook": "enabled"}}
            if annotations:
                meta["annotations"] = annotations
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                   "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
            kubectl_ok(cluster, "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(pod))
            got = get_json(cluster, "pod", name, namespace)["metadata"]["annotations"]
            assert got == {**(annotations or {}), "added-by": "cue"}
    finally:
        cluster.kubectl("delete", "cop", policy, "--ignore-not-found")


def test_validate_cue_example_denies_deleting_a_labelled_namespace(cluster: Cluster, webhook: Webhook) -> None:
    suffix = uuid.uuid4().hex[:8]
    policy, protected, other = f"e2e-cue-{suffix}", f"e2e-{suffix}-cue", f"e2e-{suffix}-off"
    doc = _example("deletens-cvp.yaml", policy)
    doc["spec"]["resourceSelectors"][0]["labelSelector"] = {"matchLabels": {"e2e-cue": suffix}}
    try:
        for name, value in ((protected, "enabled"), (other, "off")):
            kubectl_ok(cluster, "create", "namespace", name)
            kubectl_ok(cluster, "label", "namespace", name, f"e2e-cue={suffix}",
                       f"kinitiras.kcloudlabs.io/webhook={value}")
        apply_policy(cluster, yaml.safe_dump(doc), "cvp", policy, 1)
        assert "cue_out" in get_json(cluster, "cvp", policy)["spec"]["validateRules"][0]["cueCel"]
        proc = cluster.kubectl("delete", "namespace", protected, "--wait=false")
        assert proc.returncode != 0
        assert f"ClusterValidatePolicy {policy}: operation rejected" in proc.stderr
        kubectl_ok(cluster, "delete", "namespace", other, "--wait=false")
    finally:
        cluster.kubectl("delete", "cvp", policy, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", protected, other, "--wait=false", "--ignore-not-found")
