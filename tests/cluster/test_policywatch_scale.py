"""Many policies in the real API server: a change to one reaches the index alone, and quickly.

The test loads ``KINITIRAS_SCALE_POLICIES`` policies (default 1,000 to keep CI short; ``bench
--memory`` measures 10,000 through ``serve``). It asserts behaviour: the update and the new
policy take effect, one compilation each. How long they took is printed, never asserted.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.bench import memory
from kinitiras_py.cluster.client import Api
from kinitiras_py.cluster.policywatch import PolicyWatch, policy_resources
from tests.conftest import Cluster

pytestmark = pytest.mark.cluster

POLICIES = int(os.environ.get("KINITIRAS_SCALE_POLICIES", "1000"))
API = "policy.kcloudlabs.io/v1alpha1"


def _policy(name: str, namespace: str, app: str, value: str = "one") -> Obj:
    return {"apiVersion": API, "kind": "OverridePolicy", "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod",
                                            "labelSelector": {"matchLabels": {"app": app}}}],
                     "overrideRules": [{"targetOperations": ["CREATE"], "overriders": {"template": {
                         "type": "labels", "operation": "add", "path": "seen-by", "value": {"string": value}}}}]}}


def _pod(namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": namespace,
                                                            "labels": {"app": "web"}}}


async def _until(check: Callable[[], object], within: float = 60.0) -> float:
    began = time.perf_counter()
    while not check():
        if time.perf_counter() - began > within:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.002)
    return time.perf_counter() - began


async def test_an_update_and_an_addition_take_effect_among_many_policies(api: Api, namespace: str) -> None:
    path = policy_resources()["OverridePolicy"].path(namespace)
    gate = asyncio.Semaphore(16)

    async def create(policy: Obj) -> Obj:
        async with gate:
            return await api.request("POST", path, body=policy, timeout=60)

    began = time.perf_counter()
    await asyncio.gather(create(_policy("match", namespace, "web")),
                         *(create(_policy(f"other-{i:05d}", namespace, f"app-{i}")) for i in range(POLICIES - 1)))
    created = time.perf_counter() - began
    watch = PolicyWatch(api)
    watch.start()
    try:
        began = time.perf_counter()
        await asyncio.wait_for(watch.synced.wait(), 300)
        synced = time.perf_counter() - began
        await _until(lambda: watch.overrides.get("OverridePolicy", namespace, "match") is not None)
        pod = _pod(namespace)

        def labels_set() -> list[str]:
            return [policy.rendered.get(rule.index, "")
                    for policy, rule in watch.overrides.matching(pod, "CREATE") if policy.namespace == namespace]

        assert len(labels_set()) == 1 and '"one"' in labels_set()[0]
        compiles = watch.compiles

        await api.request("PATCH", f"{path}/match", body={"spec": _policy("match", namespace, "web", "two")["spec"]},
                          content_type="application/merge-patch+json", timeout=30)
        updated = await _until(lambda: any('"two"' in s for s in labels_set()))
        await api.request("POST", path, body=_policy("added", namespace, "web", "three"), timeout=30)
        added = await _until(lambda: any('"three"' in s for s in labels_set()))
        assert len(labels_set()) == 2
        await api.request("DELETE", f"{path}/other-00000", timeout=30)
        await _until(lambda: watch.overrides.get("OverridePolicy", namespace, "other-00000") is None)
        # Incremental: one compilation per changed policy, none for the thousands unchanged.
        assert watch.compiles == compiles + 2
        print(f"\n{POLICIES} policies: created in {created:.1f} s, indexed {synced:.1f} s after start; "
              f"update in force after {updated * 1000:.0f} ms, new policy after {added * 1000:.0f} ms")
    finally:
        await watch.stop()


async def test_bench_memory_runs_and_prints_its_figures(cluster: Cluster, capsys: Any) -> None:
    stats = await memory.run(cluster.kubeconfig, total=20, trials=1, requests=5, settle=0.5)
    assert stats.policies == 20 and stats.rss_mib > 0 and len(stats.update_seconds) == len(stats.add_seconds) == 1
    text = memory.table(stats)
    for field in ("RSS while serving", "ratio to 128 MiB", "update takes effect", "new policy in force"):
        assert field in text
