"""PolicyWatch and StatusWriter against the real API server: policies applied with kubectl."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.cluster.status import StatusWriter
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture
def suffix(cluster: Cluster) -> Iterator[str]:
    """A unique name suffix; cluster-scoped policies with it are deleted afterwards."""
    tag = uuid.uuid4().hex[:8]
    yield tag
    for kind in ("clusteroverridepolicies", "clustervalidatepolicies"):
        names = cluster.kubectl("get", f"{kind}.policy.kcloudlabs.io", "-o", "name").stdout.split()
        for name in (n for n in names if n.endswith(tag)):
            cluster.kubectl("delete", name, "--wait=false")


async def eventually(check: Callable[[], object], within: float = 30.0) -> float:
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > within:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - began


def op(name: str, namespace: str, rules: int = 1) -> str:
    rule = """
    - targetOperations: [CREATE]
      overriders:
        plaintext:
          - {op: add, path: /metadata/annotations/added-by, value: op}"""
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: Pod}}
  overrideRules:{rule * rules}
"""


def templated_cop(name: str) -> str:
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: Pod}}
  overrideRules:
    - targetOperations: [UPDATE]
      overriders:
        template: {{type: labels, operation: remove, path: xxx-id}}
    - targetOperations: [UPDATE]
      overriders:
        template: {{type: labels, operation: replace, path: owned-by, value: {{string: me}}}}
"""


def cue_cvp(name: str) -> str:
    """A policy whose CUE rule is outside the compiled subset (division), so it never compiles."""
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: Namespace}}
  validateRules:
    - targetOperations: [DELETE]
      cue: |-
        object: _ @tag(object)
        validate: {{valid: len(object.metadata.name) / 2 > 1}}
"""


def cel_cvp(name: str) -> str:
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors:
    - {{apiVersion: v1, kind: Namespace}}
  validateRules:
    - targetOperations: [DELETE]
      cel: "true"
      message: never refused
"""


async def test_policies_are_indexed_within_2s_and_removed_on_delete(cluster: Cluster, api: object,
                                                                     namespace: str, suffix: str) -> None:
    watch = PolicyWatch(api)
    watch.start()
    try:
        await asyncio.wait_for(watch.synced.wait(), 30)
        base = watch.counts()
        await cluster.kubectl_ok("apply", "-f", "-", input=op(f"op-{suffix}", namespace))
        await cluster.kubectl_ok("apply", "-f", "-", input=templated_cop(f"cop-{suffix}"))
        await cluster.kubectl_ok("apply", "-f", "-", input=cel_cvp(f"cvp-{suffix}"))
        names = lambda index: {p.name for p in index}  # noqa: E731
        await eventually(lambda: {f"op-{suffix}", f"cop-{suffix}"} <= names(watch.overrides)
                         and f"cvp-{suffix}" in names(watch.validations))
        counts = watch.counts()
        assert counts["OverridePolicy"] == base["OverridePolicy"] + 1
        assert counts["ClusterOverridePolicy"] == base["ClusterOverridePolicy"] + 1
        assert counts["ClusterValidatePolicy"] == base["ClusterValidatePolicy"] + 1
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace}}
        assert [p.name for p in watch.overrides.candidates(pod)
                if p.name.endswith(suffix)] == [f"cop-{suffix}", f"op-{suffix}"]

        await cluster.kubectl_ok("-n", namespace, "delete", "overridepolicies.policy.kcloudlabs.io", f"op-{suffix}")
        await cluster.kubectl_ok("delete", "clustervalidatepolicies.policy.kcloudlabs.io", f"cvp-{suffix}")
        await eventually(lambda: f"op-{suffix}" not in names(watch.overrides)
                         and f"cvp-{suffix}" not in names(watch.validations))
        assert f"cop-{suffix}" in names(watch.overrides)
    finally:
        await watch.stop()


async def test_a_policy_that_does_not_compile_is_never_indexed_and_recovers(cluster: Cluster, api: object,
                                                                            suffix: str) -> None:
    changes: list[tuple[str, str | None, str, bool, str | None]] = []

    async def on_change(kind: str, namespace: str | None, name: str, compiled: object, error: str | None) -> None:
        if name.endswith(suffix):
            changes.append((kind, namespace, name, compiled is not None, error))

    watch = PolicyWatch(api, on_change=on_change)
    watch.start()
    name = f"cvp-{suffix}"
    key = ("ClusterValidatePolicy", None, name)
    try:
        await asyncio.wait_for(watch.synced.wait(), 30)
        await cluster.kubectl_ok("apply", "-f", "-", input=cel_cvp(name))
        await eventually(lambda: any(p.name == name for p in watch.validations))
        # The same policy, now with a rule the API server accepts but compile_policy refuses.
        await cluster.kubectl_ok("apply", "-f", "-", input=cue_cvp(name))
        await eventually(lambda: key in watch.errors)
        assert "spec.validateRules[0].cue" in watch.errors[key]
        assert not any(p.name == name for p in watch.validations)
        assert watch.result(*key)[0] is None
        await cluster.kubectl_ok("apply", "-f", "-", input=cel_cvp(name))
        await eventually(lambda: any(p.name == name for p in watch.validations))
        assert key not in watch.errors
        assert [c[3] for c in changes] == [True, False, True]
        assert changes[1][4] and "cue" in changes[1][4]
    finally:
        await watch.stop()


def _status(cluster: Cluster, resource: str, name: str, namespace: str | None = None) -> dict[str, object]:
    args = ["-n", namespace] if namespace else []
    got = cluster.kubectl(*args, "get", f"{resource}.policy.kcloudlabs.io", name, "-o", "json", check=True)
    status = json.loads(got.stdout).get("status") or {}
    assert isinstance(status, dict)
    return status


def _condition(status: dict[str, object], type_: str) -> dict[str, object]:
    conditions = status.get("conditions") or []
    assert isinstance(conditions, list)
    return next((c for c in conditions if c.get("type") == type_), {})


async def test_status_writer_reports_ready_rules_and_compile_errors(cluster: Cluster, api: object,
                                                                   namespace: str, suffix: str) -> None:
    watch = PolicyWatch(api)
    writer = StatusWriter(api, watch.get)
    watch.on_change = writer.on_change
    writer.start()
    watch.start()
    good, templated, bad = f"op-{suffix}", f"cop-{suffix}", f"cvp-{suffix}"
    try:
        await asyncio.wait_for(watch.synced.wait(), 30)
        await cluster.kubectl_ok("apply", "-f", "-", input=op(good, namespace, rules=2))
        await cluster.kubectl_ok("apply", "-f", "-", input=templated_cop(templated))
        await cluster.kubectl_ok("apply", "-f", "-", input=cue_cvp(bad))

        def ready(resource: str, name: str, ns: str | None = None) -> object:
            return _condition(_status(cluster, resource, name, ns), "Ready").get("status")

        await eventually(lambda: ready("overridepolicies", good, namespace) == "True")
        status = _status(cluster, "overridepolicies", good, namespace)
        assert status["ruleCount"] == 2
        assert _condition(status, "Ready")["observedGeneration"] == 1
        assert _condition(status, "Rendered")["message"] == "0 templates rendered"
        columns = await cluster.kubectl_ok("-n", namespace, "get", "op", good, "--no-headers")
        assert columns.split()[1:3] == ["True", "2"], columns

        await eventually(lambda: ready("clusteroverridepolicies", templated) == "True")
        rendered = _condition(_status(cluster, "clusteroverridepolicies", templated), "Rendered")
        assert (rendered["status"], rendered["message"]) == ("True", "2 templates rendered")

        await eventually(lambda: ready("clustervalidatepolicies", bad) == "False")
        failed = _condition(_status(cluster, "clustervalidatepolicies", bad), "Ready")
        assert failed["reason"] == "CompileError"
        assert "spec.validateRules[0].cue" in str(failed["message"])
        columns = await cluster.kubectl_ok("get", "cvp", bad, "--no-headers")
        assert columns.split()[1:3] == ["False", "1"], columns
        events = await cluster.kubectl_ok("-n", "default", "get", "events", "-o", "json",
                               "--field-selector", f"involvedObject.name={bad}")
        items = json.loads(events)["items"]
        assert [(e["reason"], e["type"]) for e in items] == [("CompileError", "Warning")]
        assert items[0]["involvedObject"]["kind"] == "ClusterValidatePolicy"

        # Our own status writes come back as events: they neither recompile nor write again.
        await writer.flush()
        await asyncio.sleep(0.5)
        await writer.flush()
        writes, compiles = writer.writes, watch.compiles
        first_transition = _condition(_status(cluster, "overridepolicies", good, namespace),
                                      "Ready")["lastTransitionTime"]
        await asyncio.sleep(1.1)  # a later write would carry a later second
        await cluster.kubectl_ok("apply", "-f", "-", input=op(good, namespace, rules=3))
        await eventually(lambda: _status(cluster, "overridepolicies", good, namespace).get("ruleCount") == 3)
        status = _status(cluster, "overridepolicies", good, namespace)
        assert _condition(status, "Ready")["observedGeneration"] == 2
        assert _condition(status, "Ready")["lastTransitionTime"] == first_transition  # no flip, no new time
        await writer.flush()
        await asyncio.sleep(0.5)
        assert (writer.writes, watch.compiles) == (writes + 1, compiles + 1)
    finally:
        await watch.stop()
        await writer.stop()
