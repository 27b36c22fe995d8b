"""The converter registry and ``kinitiras-py convert`` with a converter registered by the test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert import registry
from tests.cli import run

WIDGET = {"apiVersion": "example.io/v2", "kind": "Widget", "metadata": {"name": "w", "namespace": "team-a"},
          "spec": {"label": "blue", "unknown": 1}}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}


def _widget(doc: Obj, source: str, _all: Sequence[Obj]) -> registry.Conversion:
    out = registry.Conversion()
    meta = doc["metadata"]
    out.documents.append({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "spec": {"overrideRules": [{"overriders": {"plaintext": [
            {"op": "add", "path": "/metadata/labels", "value": {"color": doc["spec"]["label"]}}]}}]}})
    if "unknown" in doc["spec"]:
        out.problems.append(registry.Problem(source, "spec.unknown", "has no equivalent"))
    return out


@pytest.fixture(autouse=True)
def widget_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_CONVERTERS", {})
    registry.register("example.io", ["Widget", "Widgets"], _widget)


def test_foreign_kinds_are_claimed_by_group_and_kind_in_any_version() -> None:
    assert registry.is_foreign(WIDGET)
    assert registry.is_foreign({**WIDGET, "apiVersion": "example.io/v1", "kind": "Widgets"})
    assert not registry.is_foreign({**WIDGET, "apiVersion": "other.io/v2"})
    assert not registry.is_foreign(CONFIGMAP)


def test_other_documents_pass_through_in_order() -> None:
    result = registry.convert_all([CONFIGMAP, WIDGET, CONFIGMAP], "f.yaml")
    assert [d["kind"] for d in result.documents] == ["ConfigMap", "OverridePolicy", "ConfigMap"]
    assert result.documents[0] is CONFIGMAP
    assert [str(p) for p in result.problems] == ["f.yaml: spec.unknown: has no equivalent"]


def test_converted_refuses_an_inexact_conversion() -> None:
    with pytest.raises(registry.ConversionError, match=r"spec\.unknown: has no equivalent"):
        registry.converted([WIDGET], "f.yaml")
    exact = {**WIDGET, "spec": {"label": "blue"}}
    assert registry.converted([exact], "f.yaml")[0]["kind"] == "OverridePolicy"


def test_convert_command_prints_yaml_or_reports_each_field(tmp_path: Path) -> None:
    exact = tmp_path / "exact.yaml"
    exact.write_text(yaml.safe_dump_all([{**WIDGET, "spec": {"label": "blue"}}, CONFIGMAP]))
    code, out, err = run("convert", str(exact))
    assert (code, err) == (0, "")
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["OverridePolicy", "ConfigMap"]
    inexact = tmp_path / "inexact.yaml"
    inexact.write_text(yaml.safe_dump(WIDGET))
    code, out, err = run("convert", str(exact), str(inexact))
    assert code == 2 and out == ""
    assert err == f"error: {inexact}: spec.unknown: has no equivalent\n"


def test_offline_commands_convert_foreign_policies_on_load(tmp_path: Path) -> None:
    policy = tmp_path / "widget.yaml"
    policy.write_text(yaml.safe_dump({**WIDGET, "spec": {"label": "blue"}}))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}))
    code, out, err = run("apply", "--policy", str(policy), "--resource", str(pod), "--namespace", "team-a")
    assert code == 0, err
    assert yaml.safe_load(out)["object"]["metadata"]["labels"] == {"color": "blue"}
    # the OverridePolicy applies only in its own namespace: --namespace decides the request's namespace
    code, out, _ = run("apply", "--policy", str(policy), "--resource", str(pod), "--namespace", "team-b")
    assert code == 0 and "labels" not in yaml.safe_load(out)["object"]["metadata"]
    policy.write_text(yaml.safe_dump(WIDGET))
    code, _, err = run("render", str(policy))
    assert code == 2 and "spec.unknown: has no equivalent" in err
