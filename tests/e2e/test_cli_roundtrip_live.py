"""What the offline CLI prints goes through kubectl unchanged (issue 10, item 7).

``kinitiras-py render p.yaml | kubectl create -f -`` used to have ``y``, ``n``, ``1e3`` and ``0o12``
refused ("must be of type string, got boolean") or stored as true, false and 1000. Here the
output is created with ``--dry-run=server`` against the real API server and read back.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import kubectl_ok

pytestmark = pytest.mark.cluster

AMBIGUOUS = ["y", "n", "Y", "N", "yes", "off", "1e3", "0o12", "012", "0x1F", "1_000", "1:20", "2024-01-01", "~"]


def _cli(*args: str, input: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "kinitiras_py", *args], input=input, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_render_output_is_stored_as_written(cluster: Cluster, namespace: str) -> None:
    plaintext = [{"op": "add", "path": f"/metadata/annotations/k{i}", "value": v} for i, v in enumerate(AMBIGUOUS)]
    policy = {
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "roundtrip", "namespace": namespace, "labels": {"v": "y"}},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                 "overrideRules": [{"overriders": {
                     "plaintext": plaintext,
                     "template": {"type": "labels", "operation": "add", "path": "flag",
                                  "value": {"string": "n"}}}}]},
    }
    rendered = _cli("render", "-", input=json.dumps(policy))
    stored = json.loads(kubectl_ok(cluster, "create", "--dry-run=server", "-o", "json", "-f", "-", input=rendered))
    overriders = stored["spec"]["overrideRules"][0]["overriders"]
    assert overriders["plaintext"] == plaintext
    assert overriders["template"]["value"] == {"string": "n"}
    assert stored["metadata"]["labels"] == {"v": "y"}
