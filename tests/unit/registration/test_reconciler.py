"""The reconciler with a fake API server: diff before write, caBundle injection, debounce."""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
from typing import Any

import jsonpatch
import pytest

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cluster.client import ApiException, Resource
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, CompiledPolicy
from kinitiras_py.registration import builder
from kinitiras_py.registration.builder import Registration
from kinitiras_py.registration.reconciler import Reconciler, side_effects
from tests.unit.registration.test_rules import FakeCatalog

CA1, CA2 = b"-----CA ONE-----\n", b"-----CA TWO-----\n"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kinitiras-py"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kinitiras-py"


class FakeApi:
    """Just enough of the API server: GET, server-side apply and JSON patch of stored objects."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.version = 0
        self.log: list[tuple[str, str, str]] = []

    def _stamp(self, obj: Obj) -> Obj:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return copy.deepcopy(obj)

    async def request(self, method: str, path: str, *, query: Any = (), body: Any = None,
                      content_type: str = "application/json", timeout: float | None = None) -> Obj:
        self.log.append((method, path, content_type))
        if method == "GET":
            if path not in self.objects:
                raise ApiException(status=404, reason="Not Found")
            return copy.deepcopy(self.objects[path])
        if method == "PATCH" and content_type == "application/apply-patch+yaml":
            return self._store(path, copy.deepcopy(body))
        if method == "PATCH" and content_type == "application/json-patch+json":
            if path not in self.objects:
                raise ApiException(status=404, reason="Not Found")
            try:
                patched = jsonpatch.apply_patch(self.objects[path], body)
            except jsonpatch.JsonPatchTestFailed:
                raise ApiException(status=422, reason="test failed") from None
            return self._store(path, patched)
        raise AssertionError(f"unexpected {method} {path}")

    def _store(self, path: str, obj: Obj) -> Obj:
        self.objects[path] = obj
        return self._stamp(obj)

    def writes(self) -> int:
        return sum(1 for method, _, _ in self.log if method == "PATCH")


class FakeWatch:
    def __init__(self) -> None:
        self.overrides = PolicyIndex()
        self.validations = PolicyIndex()
        self.synced = asyncio.Event()
        self.synced.set()


def policy(name: str, *selectors: Obj, http: bool = False, generation: int = 1,
           kind: str = "ClusterOverridePolicy") -> CompiledPolicy:
    refs = {"valueRef": {"from": "http", "http": {"url": "https://example.invalid"}}} if http else {}
    rule = CompiledOverrideRule(index=0, operations=None, failure_policy="Fail", refs=refs)
    return CompiledPolicy(kind=kind, name=name, namespace=None, uid=f"uid-{name}",
                          generation=generation, selectors=list(selectors), rules=(rule,))


CONFIGMAPS = {"apiVersion": "v1", "kind": "ConfigMap"}


def make(api: FakeApi | None = None, watch: FakeWatch | None = None, source: Any = CA1, **kw: Any) -> Reconciler:
    return Reconciler(api or FakeApi(), Registration(), watch or FakeWatch(), FakeCatalog(), source, **kw)


def object_rules(config: Obj) -> list[Obj]:
    hooks = {h["name"]: h for h in config["webhooks"]}
    hook = hooks.get("mutate.kinitiras.kcloudlabs.io") or hooks.get("validate.kinitiras.kcloudlabs.io")
    return [] if hook is None else [{k: r[k] for k in ("apiGroups", "apiVersions", "resources")}
                                    for r in hook["rules"]]


async def test_writes_when_missing_then_never_again_when_unchanged() -> None:
    api, watch = FakeApi(), FakeWatch()
    watch.overrides.put(policy("cm", CONFIGMAPS))
    rec = make(api, watch)
    assert await rec.reconcile() is True
    assert rec.writes == 2 and rec.ready.is_set()
    mutating, validating = api.objects[MUTATING], api.objects[VALIDATING]
    assert object_rules(mutating) == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
    assert object_rules(validating) == []  # no validate policy selects ConfigMaps: /validate is not sent them
    hooks = {h["name"]: h for h in mutating["webhooks"]}
    objects = hooks["mutate.kinitiras.kcloudlabs.io"]
    assert objects["sideEffects"] == "None" and objects["reinvocationPolicy"] == "IfNeeded"
    assert objects["timeoutSeconds"] == 3
    assert objects["clientConfig"]["caBundle"] == base64.b64encode(CA1).decode()
    assert objects["namespaceSelector"] == {"matchExpressions": [
        {"key": builder.IGNORE_LABEL, "operator": "DoesNotExist"},
        {"key": builder.NAME_LABEL, "operator": "NotIn", "values": ["kube-system"]}]}
    assert "objectSelector" not in objects
    versions = (api.objects[MUTATING]["metadata"]["resourceVersion"],
                api.objects[VALIDATING]["metadata"]["resourceVersion"])
    for _ in range(3):
        assert await rec.reconcile() is True
    assert rec.writes == 2 and api.writes() == 2
    assert (api.objects[MUTATING]["metadata"]["resourceVersion"],
            api.objects[VALIDATING]["metadata"]["resourceVersion"]) == versions


async def test_policy_changes_change_the_rules_and_side_effects() -> None:
    api, watch = FakeApi(), FakeWatch()
    rec = make(api, watch)
    await rec.reconcile()
    assert [h["name"] for h in api.objects[MUTATING]["webhooks"]] == ["mutate-policies.kinitiras.kcloudlabs.io"]
    watch.overrides.put(policy("cm", CONFIGMAPS))
    watch.validations.put(policy("deploy", {"apiVersion": "apps/v1", "kind": "Deployment"}, http=True,
                                 kind="ClusterValidatePolicy"))
    await rec.reconcile()
    assert object_rules(api.objects[MUTATING]) == [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
    assert object_rules(api.objects[VALIDATING]) == [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]
    assert {h["sideEffects"] for h in api.objects[VALIDATING]["webhooks"]} == {"NoneOnDryRun"}
    watch.validations.remove("ClusterValidatePolicy", None, "deploy")
    watch.overrides.remove("ClusterOverridePolicy", None, "cm")
    await rec.reconcile()
    assert object_rules(api.objects[VALIDATING]) == []
    assert {h["sideEffects"] for h in api.objects[VALIDATING]["webhooks"]} == {"None"}


def test_side_effects_follow_http_refs() -> None:
    assert side_effects([policy("a", CONFIGMAPS)]) == "None"
    assert side_effects([policy("a", CONFIGMAPS), policy("b", http=True)]) == "NoneOnDryRun"


async def test_drift_in_an_owned_field_is_repaired_and_others_are_left_alone() -> None:
    api = FakeApi()
    rec = make(api)
    await rec.reconcile()
    api.objects[MUTATING]["webhooks"][0]["timeoutSeconds"] = 30
    api.objects[VALIDATING]["metadata"]["annotations"] = {"someone": "else"}
    await rec.reconcile()
    assert rec.writes == 3
    assert api.objects[MUTATING]["webhooks"][0]["timeoutSeconds"] == 3


async def test_server_defaults_do_not_count_as_differences() -> None:
    mutating, _ = builder.desired(Registration(), CA1, [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "resources": ["pods"], "scope": "*"}])
    stored = copy.deepcopy(mutating)
    for hook in stored["webhooks"]:
        hook.setdefault("objectSelector", {})
        hook.setdefault("namespaceSelector", {})
        hook["clientConfig"]["service"]["port"] = 443
    assert builder.differences(stored, mutating) == []
    stored["webhooks"][1]["rules"][0]["resources"] = ["pods", "secrets"]
    stored["webhooks"].append({"name": "extra"})
    assert builder.differences(stored, mutating) == ["-extra", "mutate.kinitiras.kcloudlabs.io/rules"]
    assert builder.differences(None, mutating) == ["(missing)"]


async def test_nothing_is_written_without_a_bundle() -> None:
    api = FakeApi()
    rec = make(api, source=lambda: None)
    assert await rec.reconcile() is False
    assert api.writes() == 0 and not rec.ready.is_set()


async def test_inject_patches_only_the_ca_bundle() -> None:
    api = FakeApi()
    rec = make(api)
    assert await rec.inject(CA2) is True  # nothing registered yet: created at once with this bundle
    encoded = base64.b64encode(CA2).decode()
    assert {h["clientConfig"]["caBundle"] for h in api.objects[MUTATING]["webhooks"]} == {encoded}
    before = api.writes()
    assert await rec.inject(CA1) is True
    assert api.writes() == before + 2
    assert all(c == "application/json-patch+json" for m, _, c in api.log[-4:] if m == "PATCH")
    encoded = base64.b64encode(CA1).decode()
    for path in (MUTATING, VALIDATING):
        assert {h["clientConfig"]["caBundle"] for h in api.objects[path]["webhooks"]} == {encoded}
    assert await rec.inject(CA1) is True and api.writes() == before + 2  # verified, not rewritten
    await rec.reconcile()
    assert api.writes() == before + 2  # the injected bundle stays current


async def test_the_bundle_that_changed_last_wins() -> None:
    current = {"ca": CA1}
    rec = make(source=lambda: current["ca"])
    assert await rec.current_bundle() == CA1
    rec._bundle = CA2  # as inject() leaves it
    assert await rec.current_bundle() == CA2
    current["ca"] = b"THREE"
    assert await rec.current_bundle() == b"THREE"

    async def async_source() -> bytes:
        return CA2

    assert await make(source=async_source).current_bundle() == CA2


async def test_incomplete_discovery_keeps_the_existing_configuration() -> None:
    api, watch = FakeApi(), FakeWatch()
    watch.overrides.put(policy("w", {"apiVersion": "example.com/v1", "kind": "Widget"}))
    rec = make(api, watch)
    rec.catalog = FakeCatalog(broken=frozenset({"example.com"}))
    assert await rec.reconcile() is False  # nothing existed: written anyway, but not complete
    assert api.writes() == 2 and not rec.ready.is_set()
    assert await rec.reconcile() is False
    assert api.writes() == 2
    rec.catalog = FakeCatalog()
    assert await rec.reconcile() is True
    assert object_rules(api.objects[MUTATING])[0]["resources"] == ["widgets"]


def test_the_polled_fingerprint_follows_changes_without_reading_the_policies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    watch = FakeWatch()
    for i in range(50):
        watch.overrides.put(policy(f"p{i}", CONFIGMAPS))
    rec = make(watch=watch)
    # Polled four times a second: it must not walk (or sort) every policy.
    monkeypatch.setattr(PolicyIndex, "__iter__", lambda _self: pytest.fail("the fingerprint read the policies"))
    first = rec.fingerprint()
    assert rec.fingerprint() == first
    watch.overrides.put(policy("p1", CONFIGMAPS, generation=2))
    second = rec.fingerprint()
    assert second != first
    watch.validations.remove("ClusterValidatePolicy", None, "absent")  # nothing to remove: nothing changes
    assert rec.fingerprint() == second
    watch.overrides.remove("ClusterOverridePolicy", None, "p2")
    assert rec.fingerprint() != second


async def test_loop_debounces_bursts_and_follows_changes() -> None:
    api, watch = FakeApi(), FakeWatch()
    watch.synced.clear()
    rec = make(api, watch, debounce=0.2, poll_interval=0.01, resync_interval=60)
    rec.start()
    try:
        await asyncio.sleep(0.1)
        assert rec.passes == 0  # waits for the policy watch to sync
        watch.synced.set()
        await asyncio.wait_for(rec.ready.wait(), 2)
        assert rec.passes == 1
        for i in range(5):
            watch.overrides.put(policy(f"p{i}", {"apiVersion": "v1", "kind": "Pod" if i % 2 else "ConfigMap"}))
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert rec.passes == 2  # one pass for the whole burst
        assert object_rules(api.objects[MUTATING]) == [
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "pods"]}]
        for i in range(5):
            watch.overrides.remove("ClusterOverridePolicy", None, f"p{i}")
        rec.notify()
        await asyncio.sleep(0.5)
        assert rec.passes == 3 and object_rules(api.objects[MUTATING]) == []
        writes = api.writes()
        rec.notify()  # nothing changed: a pass, no write
        await asyncio.sleep(0.4)
        assert rec.passes == 4 and api.writes() == writes
    finally:
        await rec.stop()


async def test_loop_retries_unknown_kinds_and_backs_off_on_errors(caplog: pytest.LogCaptureFixture) -> None:
    api, watch = FakeApi(), FakeWatch()
    watch.overrides.put(policy("s", {"apiVersion": "example.com/v1", "kind": "Sprocket"}))
    rec = make(api, watch, debounce=0.01, poll_interval=0.01, retry_interval=0.1)
    caplog.set_level(logging.WARNING, "kinitiras_py.registration")
    rec.start()
    try:
        await asyncio.wait_for(rec.ready.wait(), 2)
        assert rec.last is not None and rec.last.retry
        rec.catalog = FakeCatalog([*FakeCatalog().served, Resource("example.com", "v1", "sprockets", True, "Sprocket")])
        await asyncio.sleep(0.3)
        assert object_rules(api.objects[MUTATING]) == [
            {"apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["sprockets"]}]
        assert sum("not registered" in r.message for r in caplog.records) == 1  # reported once

        async def failing(*_a: Any, **_k: Any) -> Obj:
            raise ApiException(status=500, reason="boom")

        api.request = failing  # type: ignore[method-assign]
        passes = rec.passes
        rec.notify()
        await asyncio.sleep(0.5)
        assert rec.passes - passes <= 4  # backing off, not spinning
        assert any("failed (retry in" in r.message for r in caplog.records)
    finally:
        await rec.stop()


async def test_excluded_namespaces_without_the_name_label_are_reported_or_labelled(
        caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.objects["/api/v1/namespaces/kube-system"] = {"metadata": {"name": "kube-system"}}
    api.objects["/api/v1/namespaces/ours"] = {
        "metadata": {"name": "ours", "labels": {builder.NAME_LABEL: "ours"}}}
    reg = Registration(excluded_namespaces=("kube-system", "ours", "absent"))
    rec = Reconciler(api, reg, FakeWatch(), FakeCatalog(), CA1)
    caplog.set_level(logging.WARNING, "kinitiras_py.registration")
    assert await rec.check_namespaces() == ["kube-system"]
    assert any("kubectl label namespace kube-system" in r.message for r in caplog.records)
    assert not any(m == "PATCH" and "namespaces" in p for m, p, _ in api.log)
    labelling = Reconciler(api, reg, FakeWatch(), FakeCatalog(), CA1, label_namespaces=True)
    assert await labelling.check_namespaces() == ["kube-system"]
    assert api.objects["/api/v1/namespaces/kube-system"]["metadata"]["labels"] == {builder.IGNORE_LABEL: "true"}


async def test_opt_in_mode_sets_the_object_selector() -> None:
    api, watch = FakeApi(), FakeWatch()
    watch.overrides.put(policy("cm", CONFIGMAPS))
    watch.validations.put(policy("cmv", CONFIGMAPS, kind="ClusterValidatePolicy"))
    selector = {"matchLabels": {"kinitiras.kcloudlabs.io/webhook": "enabled"}}
    rec = Reconciler(api, Registration(object_selector=selector), watch, FakeCatalog(), CA1)
    await rec.reconcile()
    hooks = {h["name"]: h for h in api.objects[VALIDATING]["webhooks"]}
    assert hooks["validate.kinitiras.kcloudlabs.io"]["objectSelector"] == selector
    assert "objectSelector" not in hooks["validate-policies.kinitiras.kcloudlabs.io"]
    rec.reg = Registration()
    await rec.reconcile()
    assert rec.writes == 4  # the selector's removal is a difference too


async def test_only_the_leader_writes_and_a_new_leader_checks_at_once() -> None:
    api, watch = FakeApi(), FakeWatch()
    leader = [False]
    rec = make(api, watch, is_leader=lambda: leader[0], poll_interval=0.01, debounce=0.01, resync_interval=60)
    assert await rec.reconcile() is True and rec.ready.is_set()
    assert api.log == []
    rec.start()
    try:
        await asyncio.sleep(0.1)
        assert api.writes() == 0
        leader[0] = True
        await asyncio.sleep(0.2)
        assert api.writes() == 2
    finally:
        await rec.stop()
