"""The admission pipeline: variables rules see, and what happens without matching policies."""

from __future__ import annotations

from typing import Any

import yaml

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticStore

NEEDS_ENV = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: env-label}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - cel: >
      namespaceObject != null && has(namespaceObject.metadata.labels) &&
      'env' in namespaceObject.metadata.labels
    message: the namespace needs an env label
""")
CM: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team-a"}}


def pipeline(*namespaces: dict[str, Any]) -> Pipeline:
    compiled = compile_policy(NEEDS_ENV)
    return Pipeline(PolicyIndex(), PolicyIndex([compiled]), StaticStore(list(namespaces)))


def namespace(labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}


async def test_rules_see_the_namespace_object() -> None:
    request = Request("CREATE", CM, namespace="team-a")
    assert (await pipeline(namespace({"env": "prod"})).validate(request)).allowed
    verdict = await pipeline(namespace({"other": "x"})).validate(request)
    assert not verdict.allowed
    assert verdict.message == "ClusterValidatePolicy env-label: the namespace needs an env label"


async def test_a_missing_namespace_object_is_null() -> None:
    verdict = await pipeline().validate(Request("CREATE", CM, namespace="team-a"))
    assert not verdict.allowed


class CountingStore(StaticStore):
    def __init__(self, *objects: dict[str, Any]) -> None:
        super().__init__(list(objects))
        self.gets: list[str] = []

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.gets.append(f"{kind}/{name}")
        return await super().get(api_version, kind, namespace, name)


async def test_the_namespace_is_looked_up_only_for_rules_that_may_read_it() -> None:
    labels = compile_policy(yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: label}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders: {template: {type: labels, operation: add, path: seen, value: {string: "yes"}}}
"""))
    store = CountingStore(namespace({"env": "prod"}))
    request = Request("CREATE", CM, namespace="team-a")
    mutation = await Pipeline(PolicyIndex([labels]), PolicyIndex([compile_policy(NEEDS_ENV)]), store).mutate(request)
    assert mutation.patch and store.gets == []  # the labels template does not read namespaceObject
    assert (await Pipeline(PolicyIndex(), PolicyIndex([compile_policy(NEEDS_ENV)]), store).validate(request)).allowed
    assert store.gets == ["Namespace/team-a"]


async def test_no_matching_policy_is_allowed_untouched() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team-a"}}
    p = pipeline()
    assert (await p.validate(Request("CREATE", secret, namespace="team-a"))).allowed
    mutation = await p.mutate(Request("CREATE", secret, namespace="team-a"))
    assert mutation.patch == [] and mutation.object is secret


class CountingHttp:
    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, spec: dict[str, Any], namespaced: bool) -> dict[str, Any]:
        self.calls += 1
        return {"body": {"ok": True}, "header": {}}


TWO_RULES = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {name: two-rules}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  validateRules:
  - cel: "object.metadata.name != 'bad'"
    message: no configmap called bad
  - template:
      type: condition
      condition:
        cond: Equal
        dataRef: {from: http, path: body.ok, http: {url: "http://127.0.0.1:1/approve"}}
        value: {boolean: false}
        message: not approved
""")


async def test_references_of_rules_after_a_denial_are_never_fetched() -> None:
    http = CountingHttp()
    p = Pipeline(PolicyIndex(), PolicyIndex([compile_policy(TWO_RULES)]), StaticStore(), http)
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "namespace": "team-a"}}
    verdict = await p.validate(Request("CREATE", bad, namespace="team-a"))
    assert not verdict.allowed and verdict.message == "ClusterValidatePolicy two-rules: no configmap called bad"
    assert http.calls == 0
    good = {**bad, "metadata": {"name": "good", "namespace": "team-a"}}
    assert (await p.validate(Request("CREATE", good, namespace="team-a"))).allowed
    assert http.calls == 1


def _tiered(name: str, tier: int, value: str) -> Any:
    return compile_policy(yaml.safe_load(f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {{name: {name}}}
spec:
  executionTier: {tier}
  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]
  overrideRules:
  - overriders:
      cel: "[{{'op': 'add', 'path': '/metadata/labels', 'value': {{'{name}': {value}}}}}]"
"""))


async def test_an_outcome_is_stamped_with_the_index_only_when_it_depends_on_nothing_else() -> None:
    request = Request("CREATE", CM, namespace="team-a")
    store = StaticStore([namespace({"env": "prod"})])
    plain = PolicyIndex([_tiered("first", 1, "'a'"), _tiered("second", 2, "'b'")])
    mutation = await Pipeline(plain, PolicyIndex(), store).mutate(request)
    assert (mutation.object["metadata"]["labels"], mutation.stamp) == ({"second": "b"}, plain.generation)
    # The second tier reads the Namespace: the outcome depends on more than the index.
    reading = PolicyIndex([_tiered("first", 1, "'a'"), _tiered("second", 2, "namespaceObject.metadata.labels.env")])
    mutation = await Pipeline(reading, PolicyIndex(), store).mutate(request)
    assert (mutation.object["metadata"]["labels"], mutation.stamp) == ({"second": "prod"}, None)
    # Nothing matched: the index alone decided.
    nothing = PolicyIndex([_tiered("first", 1, "'a'")])
    secret = {**CM, "kind": "Secret"}
    assert (await Pipeline(nothing, PolicyIndex(), store).mutate(Request("CREATE", secret))).stamp == nothing.generation
