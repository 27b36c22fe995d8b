"""Admitting a policy never waits for webhook reconciliation (issue 10, item 9).

Discovery takes 5 s here. Before, /validate awaited the reconciliation inside its 2.5 s deadline
and answered the policy's creation with a 500. Now the policy is admitted at once and the
reconciler widens the rules in its own task; the policy gets in force (the request path can
select with it) only after the configuration covering its kinds is in the API server.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
import yaml
from aiohttp.test_utils import TestClient

from kinitiras_py.admission.engine import Engine
from kinitiras_py.cluster.client import Resource
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore
from kinitiras_py.registration.builder import Registration
from kinitiras_py.registration.coverage import CoverageGate
from kinitiras_py.registration.reconciler import Reconciler
from kinitiras_py.webhook.app import make_app
from kinitiras_py.webhook.handlers import Handlers
from kinitiras_py.webhook.metrics import Metrics
from tests.functional.test_webhook import post, review
from tests.unit.registration.test_reconciler import CA1, MUTATING, VALIDATING, FakeApi, FakeWatch
from tests.unit.registration.test_rules import FakeCatalog

DISCOVERY_SECONDS = 5.0
POLICY = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: label-cms, uid: u-1, generation: 1}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders:
      plaintext: [{op: add, path: /metadata/labels, value: {seen: "yes"}}]
""")
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}


class SlowCatalog(FakeCatalog):
    """Discovery that takes DISCOVERY_SECONDS for every kind, as a slow API server would."""

    async def resolve(self, api_version: str, kind: str) -> Resource:
        await asyncio.sleep(DISCOVERY_SECONDS)
        return await super().resolve(api_version, kind)


def sends_configmaps(api: FakeApi) -> bool:
    config = api.objects.get(MUTATING) or {}
    return any("configmaps" in rule["resources"] for hook in config.get("webhooks", []) for rule in hook["rules"])


async def test_policy_admission_does_not_wait_for_slow_discovery_and_rules_widen_first(aiohttp_client: Any) -> None:
    api, watch = FakeApi(), FakeWatch()
    seen_covered: list[bool] = []

    async def on_in_force(_policy: CompiledPolicy) -> None:
        seen_covered.append(sends_configmaps(api))

    engine = Engine(store=StaticStore())
    gate = CoverageGate(watch, on_in_force, engine.overrides, engine.validations)
    rec = Reconciler(api, Registration(), watch, SlowCatalog(), CA1, gate=gate, debounce=0.3,
                     poll_interval=0.01, retry_interval=0.1)
    handlers = Handlers(engine, Metrics(), deadline=2.5, on_policy_admitted=rec.include)
    client: TestClient = await aiohttp_client(make_app(handlers))
    rec.start()
    try:
        await asyncio.wait_for(rec.ready.wait(), 2)  # no policies yet: nothing to discover
        assert VALIDATING in api.objects and not sends_configmaps(api)

        # The policy is admitted within the deadline while discovery is still running.
        status, doc = await post(client, "/validate", review("CREATE", POLICY))
        assert status == 200 and doc["response"]["allowed"] is True, doc["response"]
        assert not sends_configmaps(api)

        # The informer sees the policy: staged, but not in force until its kinds are sent.
        compiled = compile_policy(POLICY)
        watch.overrides.put(compiled)
        _status, doc = await post(client, "/mutate", review("CREATE", CONFIGMAP))
        assert doc["response"] == {"uid": "uid-1", "allowed": True}
        assert not gate.in_force(compiled)

        for _ in range(int(4 * DISCOVERY_SECONDS / 0.05)):
            if gate.in_force(compiled):
                break
            await asyncio.sleep(0.05)
        assert gate.in_force(compiled)
        assert seen_covered == [True]  # the configuration covered ConfigMaps before the policy got in force
        _status, doc = await post(client, "/mutate", review("CREATE", CONFIGMAP))
        patch = orjson.loads(base64.b64decode(doc["response"]["patch"]))
        assert patch == [{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}]
    finally:
        await rec.stop()
