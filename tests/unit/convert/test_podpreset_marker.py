"""A converted PodPreset marks the pods it changes with PodPreset's own annotation,
``podpreset.admission.kubernetes.io/podpreset-<name>``, set to the preset's resourceVersion."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.convert import podpreset
from tests.cli import run

PRESET: dict[str, Any] = {
    "apiVersion": "settings.k8s.io/v1alpha1", "kind": "PodPreset",
    "metadata": {"name": "db-env", "namespace": "shop", "resourceVersion": "4711"},
    "spec": {"selector": {"matchLabels": {"tier": "web"}}, "env": [{"name": "DB_HOST", "value": "db"}]},
}
KEY = "podpreset.admission.kubernetes.io/podpreset-db-env"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "shop", "labels": {"tier": "web"}},
       "spec": {"containers": [{"name": "app", "image": "nginx"}]}}


def preset(**meta: Any) -> dict[str, Any]:
    doc = copy.deepcopy(PRESET)
    doc["metadata"].update(meta)
    return {**doc, "metadata": {k: v for k, v in doc["metadata"].items() if v is not None}}


def marker(doc: dict[str, Any]) -> Any:
    [policy] = podpreset.convert_pod_preset(doc, "f.yaml", [doc]).documents
    return policy["spec"]["overrideRules"][0]["overriders"]["template"]["inject"]["marker"]


def apply(tmp_path: Path, *docs: dict[str, Any], resource: dict[str, Any] = POD) -> dict[str, Any]:
    (tmp_path / "presets.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(resource))
    code, out, err = run("apply", "--policy", tmp_path / "presets.yaml", "--resource", tmp_path / "pod.yaml",
                         "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = yaml.safe_load(out)
    return result


def test_the_marker_is_podpresets_annotation_with_the_presets_resource_version() -> None:
    assert marker(preset()) == {"key": KEY, "value": "4711"}


def test_a_preset_without_resource_version_leaves_the_value_to_the_policys() -> None:
    # A preset written by hand has none: in a cluster the value is then the converted policy's
    # resourceVersion (the preset as stored now), offline from a file it is empty.
    assert marker(preset(resourceVersion=None)) == {"key": KEY}
    assert marker(preset(resourceVersion="")) == {"key": KEY}


def test_the_pod_gets_podpresets_annotation_and_not_ours(tmp_path: Path) -> None:
    result = apply(tmp_path, preset())
    assert result["object"]["metadata"]["annotations"] == {KEY: "4711"}
    assert result["object"]["spec"]["containers"][0]["env"] == [{"name": "DB_HOST", "value": "db"}]


def test_offline_a_preset_without_resource_version_writes_an_empty_value(tmp_path: Path) -> None:
    result = apply(tmp_path, preset(resourceVersion=None))
    assert result["object"]["metadata"]["annotations"] == {KEY: ""}


def test_a_conflicting_preset_writes_nothing_and_the_other_preset_its_own(tmp_path: Path) -> None:
    other = preset(name="cache", resourceVersion="12")
    other["spec"] = {"volumes": [{"name": "cache", "emptyDir": {}}]}
    held = copy.deepcopy(POD)
    held["spec"]["containers"][0]["env"] = [{"name": "DB_HOST", "value": "elsewhere"}]
    result = apply(tmp_path, preset(), other, resource=held)
    assert result["object"]["metadata"]["annotations"] == {"podpreset.admission.kubernetes.io/podpreset-cache": "12"}
    assert result["object"]["spec"]["containers"][0]["env"] == [{"name": "DB_HOST", "value": "elsewhere"}]
    assert len(result["warnings"]) == 1 and "db-env: not injected" in result["warnings"][0]


def test_a_pod_the_preset_does_not_select_gets_nothing(tmp_path: Path) -> None:
    elsewhere = copy.deepcopy(POD)
    elsewhere["metadata"]["labels"] = {"tier": "batch"}
    assert apply(tmp_path, preset(), resource=elsewhere)["patch"] == []


@pytest.mark.parametrize(("meta", "expected"), [
    ({"resourceVersion": 4711}, "f.yaml: metadata.resourceVersion: must be a string (quote it)"),
    ({"name": "p" * 54}, f"f.yaml: metadata.name: invalid annotation key "
                         f"'podpreset.admission.kubernetes.io/podpreset-{'p' * 54}': name part must be no more "
                         "than 63 characters"),
])
def test_a_preset_whose_marker_cannot_be_written_is_reported(meta: dict[str, Any], expected: str) -> None:
    doc = preset(**meta)
    result = podpreset.convert_pod_preset(doc, "f.yaml", [doc])
    assert (result.documents, [str(p) for p in result.problems]) == ([], [expected])


def test_the_longest_name_podpreset_could_mark_converts() -> None:
    assert marker(preset(name="p" * 53))["key"] == "podpreset.admission.kubernetes.io/podpreset-" + "p" * 53
