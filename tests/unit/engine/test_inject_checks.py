"""Inject templates the policy check refuses: each problem with its field path and message."""

from __future__ import annotations

from typing import Any

import pytest

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.engine.policies.compiling import compile_policy

T = "spec.overrideRules[0].overriders.template"
DB_PORT = {"name": "DB_PORT", "value": "6379"}


def problems(template: dict[str, Any], *, name: str = "db", kind: str = "OverridePolicy",
             **overriders: Any) -> list[tuple[str, str]]:
    meta: dict[str, Any] = {"name": name}
    if kind == "OverridePolicy":
        meta["namespace"] = "myns"
    doc = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind, "metadata": meta,
           "spec": {"overrideRules": [{"overriders": {"template": template, **overriders}}]}}
    with pytest.raises(PolicyErrors) as caught:
        compile_policy(doc)
    return [(e.path, e.reason) for e in caught.value.errors]


def inject(**block: Any) -> dict[str, Any]:
    return {"type": "inject", "inject": block}


CASES: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    ({"type": "inject"}, [(f"{T}.inject", "type inject needs inject (env, envFrom, volumeMounts or volumes)")]),
    (inject(), [(f"{T}.inject", "nothing to inject: set env, envFrom, volumeMounts or volumes")]),
    (inject(env=[DB_PORT], onConflict="Merge"),
     [(f"{T}.inject.onConflict", 'unsupported value "Merge": must be one of Skip, Deny, Override')]),
    ({**inject(env=[DB_PORT]), "operation": "replace"},
     [(f"{T}.operation", "type inject only adds: write operation: add or leave it out")]),
    (inject(env=[DB_PORT, {"name": "DB_PORT", "value": "1"}]),
     [(f"{T}.inject.env[1]", "name DB_PORT is already set by env[0]")]),
    (inject(env=[{"name": "1X", "value": "1"}]),
     [(f"{T}.inject.env[0].name", '"1X" is not a C identifier-like environment variable name (letters, digits, '
       "'_', '-', '.'; not starting with a digit)")]),
    (inject(env=[{"name": "DB_PORT", "value": 6379}]),
     [(f"{T}.inject.env[0].value", "must be of type string, got integer")]),
    (inject(env=[{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
     [(f"{T}.inject.env[0].valueFrom", "may not be set together with value")]),
    (inject(env=[{"name": "X", "valueFrom": {}}]),
     [(f"{T}.inject.env[0].valueFrom",
       "set exactly one of configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef (got 0)")]),
    (inject(envFrom=[{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}]),
     [(f"{T}.inject.envFrom[0]", "set exactly one of configMapRef, secretRef")]),
    (inject(envFrom=[{"configMapRef": {"name": "a"}}, {"configMapRef": {"name": "a"}}]),
     [(f"{T}.inject.envFrom[1]", "configMapRef a is already set by envFrom[0]")]),
    (inject(volumeMounts=[{"name": "cache"}]),
     [(f"{T}.inject.volumeMounts[0].mountPath", "required field is missing")]),
    (inject(volumeMounts=[{"name": "a", "mountPath": "/x"}, {"name": "b", "mountPath": "/x"}]),
     [(f"{T}.inject.volumeMounts[1]", "mountPath /x is already set by volumeMounts[0]")]),
    (inject(volumeMounts=[{"name": "a", "mountPath": "/x", "mountPropagation": "Both"}]),
     [(f"{T}.inject.volumeMounts[0].mountPropagation",
       'unsupported value "Both": must be one of None, HostToContainer, Bidirectional')]),
    (inject(volumes=[{"name": "cache"}]),
     [(f"{T}.inject.volumes[0]", "a volume needs a source, e.g. emptyDir: {} or configMap: {name: ...}")]),
    (inject(volumes=[{"name": "cache", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
     [(f"{T}.inject.volumes[0]", "a volume has exactly one source, got emptyDir, hostPath")]),
    (inject(volumes=[{"name": "cache", "emptydir": {}}]),
     [(f"{T}.inject.volumes[0].emptydir", "unknown volume source: must be one of awsElasticBlockStore, azureDisk, "
       "azureFile, cephfs, cinder, configMap, csi, downwardAPI, emptyDir, ephemeral, fc, flexVolume, flocker, "
       "gcePersistentDisk, gitRepo, glusterfs, hostPath, iscsi, nfs, persistentVolumeClaim, photonPersistentDisk, "
       "portworxVolume, projected, quobyte, rbd, scaleIO, secret, storageos, vsphereVolume")]),
    (inject(volumes=[{"name": "v", "emptyDir": {"sizeLimit": 2**63}}]),
     [(f"{T}.inject.volumes[0].emptyDir", "9223372036854775808 is out of the range of a 64-bit integer")]),
    (inject(volumes=[{"name": "v", "projected": {"a": [{"b": [{"c": [{"d": [{"e": [{"f": [{}]}]}]}]}]}]}}]),
     [(f"{T}.inject.volumes[0].projected", "the volume nests 14 levels deep; at most 12 are supported")]),
    (inject(volumes=[{"name": "Cache", "emptyDir": {}}]),
     [(f"{T}.inject.volumes[0].name",
       '"Cache" is not a DNS label (lowercase letters, digits and \'-\', at most 63 characters)')]),
]


@pytest.mark.parametrize(("template", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_inject_templates_are_refused_naming_the_field(template: dict[str, Any],
                                                           expected: list[tuple[str, str]]) -> None:
    assert problems(template) == expected


def test_an_inject_template_cannot_share_its_rule_with_other_overriders() -> None:
    found = problems(inject(env=[DB_PORT]), plaintext=[{"op": "add", "path": "/a", "value": 1}], cel="[]")
    message = ("an inject template runs together with every other inject rule matching the pod, at the place of "
               "the first one: put this overrider in another rule")
    assert found == [("spec.overrideRules[0].overriders.cel", message),
                     ("spec.overrideRules[0].overriders.plaintext", message)]


@pytest.mark.parametrize(("kind", "longest"), [("OverridePolicy", 56), ("ClusterOverridePolicy", 48)])
def test_a_policy_name_too_long_for_the_marker_annotation_is_refused(kind: str, longest: int) -> None:
    found = problems(inject(env=[DB_PORT]), name="n" * (longest + 1), kind=kind)
    assert len(found) == 1 and found[0][0] == "metadata.name"
    assert f"shorten the policy name to at most {longest}" in found[0][1]
    doc = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": kind,
           "metadata": {"name": "n" * longest, "namespace": "myns"},
           "spec": {"overrideRules": [{"overriders": {"template": inject(env=[DB_PORT])}}]}}
    assert compile_policy(doc).rules[0].inject.on_conflict == "Skip"  # type: ignore[union-attr]


def test_other_template_types_still_need_an_operation() -> None:
    assert problems({"type": "labels", "path": "a", "value": {"string": "b"}}) == [
        (f"{T}.operation", "required field is missing")]


def test_an_inject_rule_runs_on_create_unless_told_otherwise() -> None:
    doc = {"apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "ClusterOverridePolicy", "metadata": {"name": "p"},
           "spec": {"overrideRules": [{"overriders": {"template": inject(env=[DB_PORT])}},
                                      {"targetOperations": ["UPDATE"],
                                       "overriders": {"template": inject(env=[DB_PORT], onConflict="Deny")}}]}}
    rules = compile_policy(doc).rules
    assert rules[0].operations == frozenset({"CREATE"}) and rules[1].operations == frozenset({"UPDATE"})
    assert [r.inject.on_conflict for r in rules] == ["Skip", "Deny"]
