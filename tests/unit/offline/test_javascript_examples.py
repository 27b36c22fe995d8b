"""js-admissions-controller's README examples (examples/javascript/) through `kinitiras-py apply`,
each both as the JsAdmission (converted on load) and as our policy, with the same outcome."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from kinitiras_py.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "javascript"
FORMS = ("jsadmission.yaml", "policy.yaml")


def apply(policy: Path, resource: dict[str, Any], tmp_path: Path, operation: str = "CREATE") -> tuple[int, dict]:
    target = tmp_path / "resource.yaml"
    target.write_text(yaml.safe_dump(resource))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        old = ["--old-resource", str(target)] if operation == "UPDATE" else []
        code = main(["apply", "--policy", str(policy), "--resource", str(target), "--operation", operation,
                     *old, "-o", "json"])
    # stderr holds the summary table; nothing else (no warning, no error) unless denied
    noted = [line for line in err.getvalue().splitlines() if line.startswith(("warning:", "error:"))]
    assert not noted or code == 1, err.getvalue()
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


def documents(path: Path) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(path.read_text())}


@pytest.mark.parametrize("form", FORMS)
def test_date_annotation_on_create_only(form: str, tmp_path: Path) -> None:
    pod = yaml.safe_load((EXAMPLES / "date-annotation" / "pod.yaml").read_text())
    code, out = apply(EXAMPLES / "date-annotation" / form, pod, tmp_path)
    assert code == 0
    assert [op["path"] for op in out["patch"]] == ["/metadata/annotations"]
    stamp = out["object"]["metadata"]["annotations"]["jsadmissions/date"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert jsonpatch.apply_patch(pod, out["patch"]) == out["object"]
    code, out = apply(EXAMPLES / "date-annotation" / form, pod, tmp_path, "UPDATE")
    assert code == 0 and out["patch"] == []


SAS_CLASSES = {"cas-worker": "cas", "cas-controller": "compute", "compute-server": "compute",
               "stateful-service": "stateful", "plain": "stateless", "crunchy-db": "stateless"}


@pytest.mark.parametrize("form", FORMS)
def test_sas_workload_class_rewrites(form: str, tmp_path: Path) -> None:
    pods = documents(EXAMPLES / "sas-workload-class" / "pods.yaml")
    policy = EXAMPLES / "sas-workload-class" / form
    for name, workload in SAS_CLASSES.items():
        code, out = apply(policy, pods[name], tmp_path)
        assert code == 0, (name, out)
        final = out["object"]
        assert jsonpatch.apply_patch(pods[name], out["patch"]) == final
        assert final["metadata"]["labels"]["workload.sas.com/jsa-class"] == workload, name
        expected_selector = {**pods[name]["spec"].get("nodeSelector", {}), f"workload.sas.com/{workload}": "yes"}
        assert final["spec"]["nodeSelector"] == expected_selector, name
    code, out = apply(policy, pods["cas-worker"], tmp_path)
    server = out["object"]["spec"]["containers"][0]
    assert server["resources"] == {"limits": {"cpu": "6", "memory": "32Gi"}, "requests": {"cpu": "1", "memory": "24Gi"}}
    assert out["object"]["spec"]["containers"][1] == pods["cas-worker"]["spec"]["containers"][1]
    code, out = apply(policy, pods["crunchy-db"], tmp_path)
    assert out["object"]["spec"]["containers"][0]["command"] == [
        "/bin/bash", "-ceEx", "ulimit -c 0 ; ulimit -a ; patroni /etc/patroni"]
    code, out = apply(policy, pods["crunchy-db-changed"], tmp_path)
    assert code == 1 and not out["allowed"] and out["patch"] == []
    assert "unexpected command in the crunchy database container" in out["message"]
    assert "ClusterOverridePolicy sas-workload-class" in out["message"]


@pytest.mark.parametrize("form", FORMS)
def test_pod_limit_validation(form: str, tmp_path: Path) -> None:
    deployments = documents(EXAMPLES / "pod-limit" / "deployments.yaml")
    policy = EXAMPLES / "pod-limit" / form
    assert apply(policy, deployments["small"], tmp_path)[0] == 0
    assert apply(policy, deployments["huge-elsewhere"], tmp_path)[0] == 0
    code, out = apply(policy, deployments["huge"], tmp_path)
    assert code == 1 and out["message"] == (
        "ClusterValidatePolicy pod-limit: Deployment huge asks for 50 pods; "
        "at most 40 may run in the default namespaces")


def test_the_stateful_pod_limit_counts_the_context_pods_through_its_hooks(tmp_path: Path) -> None:
    def pod(name: str, namespace: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}

    def admit(existing: list[dict[str, Any]]) -> tuple[int, str]:
        context = tmp_path / "context.yaml"
        context.write_text(yaml.safe_dump_all(existing))
        target = tmp_path / "pod.yaml"
        target.write_text(yaml.safe_dump(pod("new", "default-a")))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["apply", "--policy", str(EXAMPLES / "pod-limit" / "jsadmission-stateful.yaml"),
                         "--resource", str(target), "--context", str(context), "-o", "json"])
        return code, out.getvalue() + err.getvalue()

    others = [pod(f"o{i}", "elsewhere") for i in range(5)]
    code, text = admit([pod(f"p{i}", "default-a") for i in range(39)] + others)
    assert code == 0, text
    code, text = admit([pod(f"p{i}", "default-b") for i in range(40)] + others)
    assert code == 1 and "the default namespaces already run 40 pods" in text


def test_the_readme_javascript_example_labels_new_objects_with_their_namespace(tmp_path: Path) -> None:
    text = (EXAMPLES.parents[1] / "README.md").read_text()
    block = text[text.index("```yaml\noverriders:\n  javascript:"):]
    overriders = yaml.safe_load(block[len("```yaml\n"):block.index("```", 3)])["overriders"]
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "apiVersion": "policy.kcloudlabs.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "team", "namespace": "team-a"}, "spec": {"overrideRules": [{"overriders": overriders}]}}))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a", "labels": {"app": "x"}},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    code, out = apply(policy, pod, tmp_path)
    assert code == 0 and out["object"]["metadata"]["labels"] == {"app": "x", "team": "team-a"}
    assert out["patch"] == [{"op": "add", "path": "/metadata/labels/team", "value": "team-a"}]
    code, out = apply(policy, pod, tmp_path, "UPDATE")
    assert code == 0 and out["patch"] == []
