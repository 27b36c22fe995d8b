"""http references judged when a policy is admitted, and again when its rule runs."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from kinitiras_py.admission.pipeline import Pipeline, Request
from kinitiras_py.admission.policies import admit_policy
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.offline.static import StaticHttp, StaticStore
from kinitiras_py.refs.egress import Egress

ENABLED = Egress.parse(["https://cmdb.example.com/api/"], namespaced=True)

STEAL = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: steal, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  overrideRules:
  - overriders:
      template:
        type: annotations
        operation: add
        path: stolen
        valueRef:
          from: http
          path: body.AccessKeyId
          http: {url: "http://169.254.169.254/latest/meta-data/iam/security-credentials/node"}
""")

EVERY_PLACE = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ValidatePolicy
metadata: {name: everywhere, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
  valueRefs:
    team: {from: http, http: {url: "https://elsewhere.example.com/team"}}
  validateRules:
  - template:
      type: condition
      condition:
        cond: Equal
        dataRef: {from: http, path: body.ok, http: {url: "https://cmdb.example.com/api/ok",
                  auth: {authUrl: "https://login.example.com/token", username: u}}}
        valueRef: {from: http, path: body.want, http: {url: "https://cmdb.example.com/admin/want"}}
        message: not approved
""")


def admitted(policy: dict[str, Any], egress: Egress) -> str | None:
    """The refusal admitting ``policy`` under ``egress`` gives (None: admitted)."""
    return admit_policy(Request("CREATE", policy, namespace="team-a"), egress).error


def test_a_namespaced_http_reference_is_refused_by_default_naming_the_field_and_the_setting() -> None:
    error = admitted(STEAL, Egress())
    assert error == (
        "policy OverridePolicy team-a/steal: spec.overrideRules[0].overriders.template.valueRef.http.url: "
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/node is refused: http references are "
        "off for namespaced policies; the operator allows them with --http-namespaced and --http-allow PREFIX")


def test_allowed_prefixes_do_not_open_the_metadata_endpoint() -> None:
    error = admitted(STEAL, ENABLED)
    assert error is not None and "is under no allowed prefix (https://cmdb.example.com/api/)" in error
    wide = Egress.parse(["http://169.254.169.254/latest/"], namespaced=True)
    assert admitted(STEAL, wide) is None  # the entry names the address itself: the operator's choice


def test_every_place_a_reference_can_be_is_checked() -> None:
    error = admitted(EVERY_PLACE, ENABLED)
    assert error is not None
    assert error.startswith("policy ValidatePolicy team-a/everywhere: ")
    assert re.findall(r"(spec\.[^ ]+): https://", error) == [
        "spec.validateRules[0].template.condition.dataRef.http.auth.authUrl",
        "spec.validateRules[0].template.condition.valueRef.http.url",
        "spec.valueRefs.team.http.url",
    ]


def test_sidecar_value_refs_are_checked() -> None:
    policy = yaml.safe_load("""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: OverridePolicy
metadata: {name: side, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: Pod}]
  overrideRules:
  - overriders:
      template:
        type: sidecar
        operation: add
        sidecar:
          valueRefs:
            image: {from: http, path: body.image, http: {url: "http://[::ffff:169.254.169.254]/"}}
          template: |
            containers:
              - name: proxy
                image: "{{ valueRefs.image }}"
""")
    error = admitted(policy, Egress())
    assert error is not None and "spec.overrideRules[0].overriders.template.sidecar.valueRefs[image].http.url" in error


def test_cluster_policies_keep_calling_any_outside_url_without_prefixes() -> None:
    cluster = copy.deepcopy(STEAL)
    cluster["kind"] = "ClusterOverridePolicy"
    del cluster["metadata"]["namespace"]
    url = cluster["spec"]["overrideRules"][0]["overriders"]["template"]["valueRef"]["http"]
    url["url"] = "https://cmdb.example.com/other"
    assert admitted(cluster, Egress()) is None
    error = admitted(cluster, ENABLED)
    assert error is not None and "valueRef.http.url: https://cmdb.example.com/other is refused: it is under no " \
                                 "allowed prefix" in error
    url["url"] = "http://169.254.169.254/"
    assert "never connects to the link-local address 169.254.169.254" in str(admitted(cluster, Egress()))


@pytest.mark.parametrize(("url", "accepted"), [
    ("https://cmdb.example.com/api/teams/{{metadata.name}}", True),
    ("https://{{metadata.name}}.cmdb.example.com/api/", False),
    ("https://cmdb.example.com{{metadata.annotations.x}}/api/", False),
    ("https://cmdb.example.com/api{{metadata.name}}", False),
])
def test_placeholders_cannot_move_the_host(url: str, accepted: bool) -> None:
    policy = copy.deepcopy(STEAL)
    policy["spec"]["overrideRules"][0]["overriders"]["template"]["valueRef"]["http"]["url"] = url
    assert (admitted(policy, ENABLED) is None) == accepted


async def test_a_namespaced_reference_that_got_in_is_refused_when_its_rule_runs() -> None:
    # Stored before the setting existed (compiled without the admission check).
    compiled = compile_policy(STEAL)
    http = StaticHttp([{"kind": "HTTPResponse", "url": STEAL["spec"]["overrideRules"][0]["overriders"]["template"]
                        ["valueRef"]["http"]["url"], "body": {"AccessKeyId": "AKIA-leaked"}}])
    pipeline = Pipeline(PolicyIndex([compiled]), PolicyIndex(), StaticStore(), http)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}}
    mutation = await pipeline.mutate(Request("CREATE", cm, namespace="team-a"))
    assert mutation.failure is not None and mutation.patch == []
    assert str(mutation.failure) == (
        "policy OverridePolicy team-a/steal, rule 0: http reference: url http://169.254.169.254/latest/meta-data/"
        "iam/security-credentials/node is refused: http references are off for namespaced policies; the operator "
        "allows them with --http-namespaced and --http-allow PREFIX")


async def test_a_namespaced_policy_wide_reference_is_refused_when_it_is_resolved() -> None:
    compiled = compile_policy(EVERY_PLACE)
    answers = [{"kind": "HTTPResponse", "url": url, "body": {"ok": True, "want": True}}
               for url in ("https://elsewhere.example.com/team", "https://cmdb.example.com/api/ok",
                           "https://cmdb.example.com/admin/want")]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}}
    for egress, reason in ((ENABLED, "it is under no allowed prefix (https://cmdb.example.com/api/); the operator "
                                     "allows more with --http-allow PREFIX"),
                           (Egress(), "http references are off for namespaced policies; the operator allows them "
                                      "with --http-namespaced and --http-allow PREFIX")):
        pipeline = Pipeline(PolicyIndex(), PolicyIndex([compiled]), StaticStore(), StaticHttp(answers, egress))
        verdict = await pipeline.validate(Request("CREATE", cm, namespace="team-a"))
        assert not verdict.allowed
        assert verdict.message == ("policy ValidatePolicy team-a/everywhere, rule 0: valueRefs: http reference: url "
                                   f"https://elsewhere.example.com/team is refused: {reason}")
