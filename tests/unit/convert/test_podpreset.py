"""PodPreset → OverridePolicy: the conversion, its problems by field, and the service-injection
examples run offline (ours and the PodPreset documentation's, converted on load)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.convert import podpreset, registry
from tests.cli import run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "service-injection"
PRESETS = EXAMPLES / "podpreset"
SIMPLE = yaml.safe_load((ROOT / "tests/data/foreign/podpreset/allow-database.yaml").read_text())


def convert(doc: dict[str, Any]) -> registry.Conversion:
    return podpreset.convert_pod_preset(doc, "f.yaml", [doc])


def test_a_podpreset_becomes_an_override_policy_in_its_namespace_with_an_inject_template() -> None:
    result = convert(SIMPLE)
    assert result.problems == []
    assert result.documents == [{
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "allow-database", "namespace": "myns"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod",
                                   "labelSelector": {"matchLabels": {"role": "frontend"}}}],
            "overrideRules": [{"targetOperations": ["CREATE"], "overriders": {"template": {
                "type": "inject", "inject": {
                    "env": [{"name": "DB_PORT", "value": "6379"}],
                    "volumeMounts": [{"mountPath": "/cache", "name": "cache-volume"}],
                    "volumes": [{"name": "cache-volume", "emptyDir": {}}],
                    "onConflict": "Skip",
                    "marker": {"key": "podpreset.admission.kubernetes.io/podpreset-allow-database"}}}}}]}}]


def test_the_registry_claims_podpresets() -> None:
    assert registry.converter_for(SIMPLE) is podpreset.convert_pod_preset
    assert registry.converted([SIMPLE], "f.yaml")[0]["kind"] == "OverridePolicy"


def test_a_podpreset_without_selector_selects_every_pod_of_its_namespace() -> None:
    doc = copy.deepcopy(SIMPLE)
    del doc["spec"]["selector"]
    assert convert(doc).documents[0]["spec"]["resourceSelectors"] == [{"apiVersion": "v1", "kind": "Pod"}]


def _damaged(change: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(SIMPLE)
    for key, value in change.items():
        target = doc
        *parents, last = key.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
    return doc


PROBLEMS = [
    ({"spec.env": [{"name": "DB_PORT", "value": 6379}]},
     "f.yaml: spec.env[0].value: must be of type string, got integer"),
    ({"spec.initContainers": []}, "f.yaml: spec.initContainers: not a PodPreset field: nothing to convert it to"),
    ({"spec.selector": {"matchLabels": {"role": "a b"}}},
     "f.yaml: spec.selector.matchLabels: invalid value 'a b' for label 'role'"),
    ({"spec.volumes": [{"name": "cache-volume"}]},
     "f.yaml: spec.volumes[0]: a volume needs a source, e.g. emptyDir: {} or configMap: {name: ...}"),
    ({"apiVersion": "settings.k8s.io/v1"}, "f.yaml: apiVersion: only settings.k8s.io/v1alpha1 PodPresets are known, "
                                           "got 'settings.k8s.io/v1'"),
    ({"metadata": {"namespace": "myns"}}, "f.yaml: metadata.name: a PodPreset needs a name"),
    ({"spec": "x"}, "f.yaml: spec: a PodPreset needs a spec (selector, env, volumes...)"),
]


@pytest.mark.parametrize(("change", "expected"), PROBLEMS, ids=[str(i) for i in range(len(PROBLEMS))])
def test_what_cannot_be_converted_exactly_is_reported_at_the_podpresets_field(change: dict[str, Any],
                                                                              expected: str) -> None:
    result = convert(_damaged(change))
    assert result.documents == []
    assert any(str(p).startswith(expected) for p in result.problems), [str(p) for p in result.problems]


def test_convert_command_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_damaged({"spec.env": [{"name": "DB_PORT", "value": 6379}]})))
    code, out, err = run("convert", str(bad))
    assert (code, out) == (2, "")
    assert err == f"error: {bad}: spec.env[0].value: must be of type string, got integer\n"


@pytest.mark.parametrize("path", sorted(PRESETS.glob("preset-*.yaml")), ids=lambda p: p.name)
def test_every_podpreset_example_converts_exactly(path: Path) -> None:
    code, out, err = run("convert", str(path))
    assert (code, err) == (0, ""), err
    (policy,) = yaml.safe_load_all(out)
    assert policy["kind"] == "OverridePolicy"
    assert policy["spec"]["overrideRules"][0]["overriders"]["template"]["inject"]["onConflict"] == "Skip"


# --- the examples, offline -------------------------------------------------------------------------


def apply(*policies: Path, resource: Path) -> dict[str, Any]:
    args = ["apply", "--resource", str(resource)]
    for p in policies:
        args += ["--policy", str(p)]
    code, out, err = run(*args)
    assert code == 0, err
    result: dict[str, Any] = yaml.safe_load(out)
    return result


def expected(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = yaml.safe_load(path.read_text())
    return result


@pytest.mark.parametrize(("policy", "resource"), [("allow-database.yaml", "website-pod.yaml"),
                                                  ("allow-database-tier.yaml", "frontend-pod.yaml")])
def test_the_proposals_examples_give_the_expected_pods(policy: str, resource: str) -> None:
    result = apply(EXAMPLES / policy, resource=EXAMPLES / resource)
    assert result["warnings"] == []
    assert result["object"] == expected(EXAMPLES / resource.replace(".yaml", ".expected.yaml"))


def test_the_replicaset_itself_is_left_as_written() -> None:
    result = apply(EXAMPLES / "allow-database-tier.yaml", resource=EXAMPLES / "frontend-replicaset.yaml")
    assert result["patch"] == []


def test_the_podpreset_docs_examples_through_convert_on_load(tmp_path: Path) -> None:
    simple = apply(PRESETS / "preset-simple.yaml", resource=PRESETS / "website-pod.yaml")["object"]
    ours = apply(EXAMPLES / "allow-database.yaml", resource=PRESETS / "website-pod.yaml")["object"]
    # the converted PodPreset and our policy do the same, each writing its own marker
    assert simple["metadata"].pop("annotations") == {"podpreset.admission.kubernetes.io/podpreset-allow-database": ""}
    assert ours["metadata"].pop("annotations") == {"policy.kcloudlabs.io/inject-allow-database": ""}
    assert simple == ours
    with_configmap = apply(PRESETS / "preset-configmap.yaml", resource=PRESETS / "website-pod.yaml")["object"]
    assert with_configmap["spec"]["containers"][0]["envFrom"] == [{"configMapRef": {"name": "etcd-env-config"}}]
    both = apply(PRESETS / "preset-simple.yaml", PRESETS / "preset-proxy.yaml",
                 resource=PRESETS / "website-pod.yaml")["object"]
    container = both["spec"]["containers"][0]
    assert container["volumeMounts"] == [{"mountPath": "/cache", "name": "cache-volume"},
                                         {"mountPath": "/etc/proxy/configs", "name": "proxy-volume"}]
    assert both["metadata"]["annotations"] == {"podpreset.admission.kubernetes.io/podpreset-allow-database": "",
                                               "podpreset.admission.kubernetes.io/podpreset-proxy": ""}


def test_the_podpreset_docs_conflict_example_admits_the_pod_unchanged_with_a_warning() -> None:
    result = apply(PRESETS / "preset-simple.yaml", resource=PRESETS / "conflict-pod.yaml")
    assert result["patch"] == []
    assert result["object"] == expected(PRESETS / "conflict-pod.yaml")
    assert result["warnings"] == ["OverridePolicy myns/allow-database: not injected (onConflict Skip): volumeMounts "
                                  "name cache-volume / mountPath /cache (the pod holds it with another value), "
                                  "in container website"]


def test_the_examples_acceptance_cases_pass() -> None:
    code, out, err = run("test", str(EXAMPLES))
    assert (code, err) == (0, ""), out
    assert out.endswith("8 passed, 0 failed\n")
