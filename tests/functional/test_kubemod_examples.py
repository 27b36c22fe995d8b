"""KubeMod's README examples through ``kinitiras-py apply``: each ModRule of
tests/data/foreign/kubemod applied as it is and as converted by ``kinitiras-py convert``, with
the same outcome both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli import run

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "foreign" / "kubemod"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def deployment(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec = {"containers": [{"name": "nginx", "image": "nginx:1.14.2",
                                "ports": [{"containerPort": 80}, {"containerPort": 443}]},
                               {"name": "helper", "image": "docker.io/library/busybox:1", "securityContext": {}}]}
    pod_spec.update(spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"},
                         "annotations": annotations or {}},
            "spec": {"template": {"spec": pod_spec}}}


def apply_both(tmp_path: Path, sample: str, resource: dict[str, Any], *context: dict[str, Any]
               ) -> tuple[int, dict[str, Any]]:
    """The outcome of applying the ModRule, checked to be the converted policy's outcome too."""
    converted = tmp_path / f"converted-{sample}"
    code, out, err = run("convert", str(SAMPLES / sample))
    assert code == 0, err
    converted.write_text(out)
    (tmp_path / "resource.yaml").write_text(yaml.safe_dump(resource))
    extra = []
    for i, doc in enumerate(context):
        (tmp_path / f"context-{i}.yaml").write_text(yaml.safe_dump(doc))
        extra += ["--context", str(tmp_path / f"context-{i}.yaml")]
    outcomes = []
    for policy in (SAMPLES / sample, converted):
        code, out, err = run("apply", "--policy", str(policy), "--resource", str(tmp_path / "resource.yaml"),
                             *extra, "-o", "json")
        assert code in (0, 1), err
        outcomes.append((code, json.loads(out)))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


def containers(result: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result["object"]["spec"]["template"]["spec"]["containers"]
    return found


def test_sidecar_injection_with_a_negate_guard(tmp_path: Path) -> None:
    last = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]}}}}
    code, result = apply_both(tmp_path, "sidecar-injection.yaml",
                              deployment({"tracing/inject": "true", LAST_APPLIED: json.dumps(last)}))
    assert code == 0
    agent = containers(result)[-1]
    assert agent["name"] == "tracing-agent"
    assert agent["args"] == ["--tags=deployment=web,namespace=shop", "--collector=collector.shop:14250"]
    assert agent["ports"] == [{"containerPort": 6832, "protocol": "UDP"}]
    recorded = json.loads(result["object"]["metadata"]["annotations"][LAST_APPLIED])
    assert [c["name"] for c in recorded["spec"]["template"]["spec"]["containers"]] == ["nginx", "tracing-agent"]
    # Run again on its own output: the guard sees the agent and nothing more is added.
    code, again = apply_both(tmp_path, "sidecar-injection.yaml", result["object"])
    assert code == 0 and again["patch"] == []
    # Without the annotation the rule does not apply.
    code, untouched = apply_both(tmp_path, "sidecar-injection.yaml", deployment())
    assert untouched["patch"] == []


def test_security_context_enforcement(tmp_path: Path) -> None:
    code, result = apply_both(tmp_path, "security-context.yaml", deployment())
    assert code == 0
    assert result["object"]["metadata"]["annotations"]["hardened"] == "yes-by-rule"
    assert result["object"]["spec"]["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 101, "runAsGroup": 101, "fsGroup": 101}
    code, result = apply_both(tmp_path, "security-context.yaml", deployment(securityContext={"runAsNonRoot": True}))
    assert result["patch"] == []


def test_external_ip_reject(tmp_path: Path) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "shop"},
               "spec": {"externalIPs": ["10.20.30.4", "1.2.3.4"], "ports": [{"port": 80}]}}
    code, result = apply_both(tmp_path, "reject-external-ips.yaml", service)
    assert code == 1
    assert result["message"] == ("ValidatePolicy shop/allowed-external-ips: external IPs [10.20.30.4 1.2.3.4] "
                                 "are not all in 10.20.30.0/24")
    service["spec"]["externalIPs"] = ["10.20.30.4", "10.20.30.5"]
    assert apply_both(tmp_path, "reject-external-ips.yaml", service)[0] == 0
    del service["spec"]["externalIPs"]
    assert apply_both(tmp_path, "reject-external-ips.yaml", service)[0] == 0


def test_root_workloads_reject(tmp_path: Path) -> None:
    code, result = apply_both(tmp_path, "reject-root-workloads.yaml", deployment())
    assert code == 1 and result["message"].endswith("workloads in this namespace must set runAsNonRoot")
    code, _ = apply_both(tmp_path, "reject-root-workloads.yaml", deployment(securityContext={"runAsNonRoot": True}))
    assert code == 0


def test_owner_reference_removal(tmp_path: Path) -> None:
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "shop", "labels": {"search.example.org/type": "index-data"},
                          "ownerReferences": [{"apiVersion": "example.org/v1", "kind": "Search", "name": "s",
                                               "uid": "1"}]},
             "spec": {"accessModes": ["ReadWriteOnce"]}}
    code, result = apply_both(tmp_path, "remove-owner-reference.yaml", claim)
    assert result["patch"] == [{"op": "remove", "path": "/metadata/ownerReferences/0"}]
    del claim["metadata"]["ownerReferences"]
    code, result = apply_both(tmp_path, "remove-owner-reference.yaml", claim)
    assert code == 0 and result["patch"] == []  # removing what is not there: nothing to do


def test_label_from_the_namespace(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    blue = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop",
                                                                 "labels": {"color": "blue", "flavor": "mint"}}}
    code, result = apply_both(tmp_path, "namespace-label.yaml", pod, blue)
    assert code == 0
    assert result["patch"] == [{"op": "add", "path": "/metadata/labels", "value": {"flavor": "mint"}}]
    red = {**blue, "metadata": {"name": "shop", "labels": {"color": "red", "flavor": "mint"}}}
    assert apply_both(tmp_path, "namespace-label.yaml", pod, red)[1]["patch"] == []


def test_zone_from_the_node(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "shop", "annotations": {"ref.kubemod.io/node": "n1"}},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "zone-b"}}}
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(pod))
    code, result = apply_both(tmp_path, "node-labels.yaml", pod, node)
    assert code == 0 and result["patch"] == []  # admissionOperations: UPDATE only
    converted = tmp_path / "converted-node-labels.yaml"  # written by apply_both
    for policy in (SAMPLES / "node-labels.yaml", converted):
        (tmp_path / "node.yaml").write_text(yaml.safe_dump(node))
        code, out, err = run("apply", "--policy", str(policy), "--resource", str(tmp_path / "old.yaml"),
                             "--old-resource", str(tmp_path / "old.yaml"), "--operation", "UPDATE",
                             "--context", str(tmp_path / "node.yaml"), "-o", "json")
        assert code == 0, err
        assert json.loads(out)["patch"] == [{"op": "add", "path": "/metadata/labels",
                                             "value": {"topology.kubernetes.io/zone": "zone-b"}}]


def test_tiers(tmp_path: Path) -> None:
    code, result = apply_both(tmp_path, "tiers.yaml", deployment())
    spec = result["object"]["spec"]["template"]["spec"]
    assert spec["containers"][1]["image"] == "registry.example.org/library/busybox:1"
    assert spec["imagePullSecrets"] == [{"name": "registry-example"}]
    # Images from neither Docker Hub nor the registry: neither tier applies.
    code, result = apply_both(tmp_path, "tiers.yaml", deployment(containers=[{"name": "a", "image": "nginx"}]))
    assert code == 0 and result["patch"] == []
    # Images already in the registry get the secret from tier 2 alone.
    code, result = apply_both(tmp_path, "tiers.yaml",
                              deployment(containers=[{"name": "a", "image": "registry.example.org/a:1"}]))
    assert result["patch"] == [{"op": "add", "path": "/spec/template/spec/imagePullSecrets",
                                "value": [{"name": "registry-example"}]}]


def test_fan_out_over_containers_and_ports(tmp_path: Path) -> None:
    code, result = apply_both(tmp_path, "container-ports.yaml", deployment())
    assert code == 0
    nginx, helper = containers(result)
    assert nginx["ports"] == [{"containerPort": 8080}, {"containerPort": 443}]
    assert nginx["securityContext"] == helper["securityContext"] == {"runAsNonRoot": True,
                                                                     "capabilities": {"drop": ["ALL"]}}


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
            "spec": {"containers": list(containers)}}


def test_a_count_over_a_filter_and_key_parts_in_values(tmp_path: Path) -> None:
    bare = {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}, {"containerPort": 81, "name": "x"}]}
    hardened = {"name": "b", "image": "nginx", "securityContext": {}, "ports": [{"containerPort": 90}]}
    code, result = apply_both(tmp_path, "pod-hardening.yaml", _pod(bare, {**bare, "name": "c"}))
    assert code == 1 and "p: at most one container may go without a securityContext" in result["message"]
    code, result = apply_both(tmp_path, "pod-hardening.yaml", _pod(bare, hardened))
    assert code == 0
    assert [[port.get("name") for port in c["ports"]] for c in result["object"]["spec"]["containers"]] == \
        [["c0-p0", "x"], ["c1-p0"]]


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_render_and_test_accept_modrules(sample: str) -> None:
    code, out, err = run("render", str(SAMPLES / sample))
    assert code == 0, err
    rendered = list(yaml.safe_load_all(out))
    assert all(doc["apiVersion"] == "policy.kcloudlabs.io/v1alpha1" for doc in rendered)
    assert all(doc["spec"]["renderedMatchConditions"] for doc in rendered)


NATIVE = Path(__file__).resolve().parents[1] / "data" / "examples" / "kubemod"


@pytest.mark.parametrize(("native", "modrule", "resource", "context"), [
    ("sidecar-injection.yaml", "sidecar-injection.yaml", deployment({"tracing/inject": "true"}), []),
    ("tiers-*.yaml", "tiers.yaml", deployment(), []),
    ("namespace-label.yaml", "namespace-label.yaml",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop", "labels": {}},
      "spec": {"containers": []}},
     [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"color": "blue",
                                                                                        "flavor": "mint"}}}]),
])
def test_native_examples_do_what_the_modrules_do(tmp_path: Path, native: str, modrule: str,
                                                  resource: dict[str, Any], context: list[dict[str, Any]]) -> None:
    expected = apply_both(tmp_path, modrule, resource, *context)[1]
    (tmp_path / "native-resource.yaml").write_text(yaml.safe_dump(resource))
    extra = []
    for i, doc in enumerate(context):
        (tmp_path / f"native-context-{i}.yaml").write_text(yaml.safe_dump(doc))
        extra += ["--context", str(tmp_path / f"native-context-{i}.yaml")]
    policies = [arg for path in sorted(NATIVE.glob(native)) for arg in ("--policy", str(path))]
    code, out, err = run("apply", *policies, "--resource",
                         str(tmp_path / "native-resource.yaml"), *extra, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["object"]["spec"] == expected["object"]["spec"]
    assert json.loads(out)["object"]["metadata"]["labels"] == expected["object"]["metadata"]["labels"]


def test_the_test_command_runs_modrules(tmp_path: Path) -> None:
    (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(deployment({"tracing/inject": "true"})))
    (tmp_path / "service.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "shop"},
         "spec": {"externalIPs": ["1.2.3.4"]}}))
    (tmp_path / "kinitiras-test.yaml").write_text(yaml.safe_dump({
        "name": "modrules", "policies": [str(SAMPLES / "sidecar-injection.yaml"),
                                         str(SAMPLES / "reject-external-ips.yaml")],
        "cases": [{"name": "injected", "resource": "deployment.yaml", "expect": {"allowed": True}},
                  {"name": "refused", "resource": "service.yaml",
                   "expect": {"allowed": False, "message": "external IPs [1.2.3.4] are not all in"}},
                  {"name": "a wrong expectation fails", "resource": "service.yaml", "expect": {"allowed": True}}]}))
    code, out, err = run("test", str(tmp_path))
    assert code == 1, (out, err)
    assert "injected" in out and "refused" in out
    assert out.count("FAIL") == 1 and "a wrong expectation fails" in out
