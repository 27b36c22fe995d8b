"""The kustomize deployment in config/: it renders, hangs together, passes a server-side dry
run, and its RBAC is enough for the registration reconciler and no more than intended."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.cli import serve
from kinitiras_py.cluster import client
from kinitiras_py.cluster.discovery import Discovery
from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.registration import applying
from kinitiras_py.registration.builder import Registration
from kinitiras_py.registration.reconciler import Reconciler
from tests.cluster.test_registration import Webhook, webhook  # noqa: F401  (fixture)
from tests.conftest import ROOT, Cluster

CONFIG = ROOT / "config"
LEGACY = CONFIG / "overlays" / "k8s-1.20"
NAMESPACE = "kinitiras-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:kinitiras-py"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl renders kustomizations")


def kubectl_minor() -> int:
    """The minor version of the kubectl on PATH (kubectl 1.20 carries kustomize v2)."""
    out = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return int(yaml.safe_load(out)["clientVersion"]["minor"].rstrip("+"))


def builds_config() -> bool:
    """Whether kubectl's kustomize builds config/ (directories under `resources` need kustomize v3+)."""
    return shutil.which("kubectl") is not None and kubectl_minor() >= 21


def render(path: Path) -> list[Obj]:
    proc = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def by_kind(docs: list[Obj], kind: str) -> list[Obj]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Obj], kind: str) -> Obj:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    """config/ rendered; with kubectl 1.20 the 1.20 overlay, which differs only in the PDB's apiVersion."""
    return render(CONFIG if builds_config() else LEGACY)


# --- rendering (kubectl only) ---------------------------------------------------------------


@needs_kubectl
def test_base_renders_everything_into_the_namespace(base: list[Obj]) -> None:
    kinds = sorted({d["kind"] for d in base})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Deployment", "Namespace",
                     "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"]
    assert len(by_kind(base, "CustomResourceDefinition")) == 6  # four policy kinds, two report kinds
    assert not by_kind(base, "MutatingWebhookConfiguration")  # written by the controller at runtime
    for doc in base:
        if doc["kind"] in ("Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "PodDisruptionBudget"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
    labels = one(base, "Namespace")["metadata"]["labels"]
    assert labels["kinitiras.kcloudlabs.io/ignore"] == "true"
    assert labels["kubernetes.io/metadata.name"] == NAMESPACE


@needs_kubectl
def test_rbac_has_no_wildcards_and_secrets_stay_in_the_namespace(base: list[Obj]) -> None:
    for doc in by_kind(base, "ClusterRole") + by_kind(base, "Role"):
        for rule in doc.get("rules") or []:
            for key in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule.get(key, []), (doc["metadata"]["name"], rule)
    bound = {b["roleRef"]["name"] for b in by_kind(base, "ClusterRoleBinding")}
    assert bound == {"kinitiras-py-controller", "kinitiras-py-reader", "kinitiras-py-scanner"}
    for doc in by_kind(base, "ClusterRole"):
        if doc["metadata"]["name"] in bound:
            assert not any("secrets" in r.get("resources", []) for r in doc.get("rules") or [])
    reader = next(d for d in by_kind(base, "ClusterRole") if d["metadata"]["name"] == "kinitiras-py-reader")
    selector = reader["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
    assert selector == {"kinitiras.kcloudlabs.io/aggregate-to-reader": "true"}
    default = next(d for d in by_kind(base, "ClusterRole") if d["metadata"]["name"] == "kinitiras-py-reader-default")
    assert default["metadata"]["labels"]["kinitiras.kcloudlabs.io/aggregate-to-reader"] == "true"
    # Across namespaces only what every installation needs (docs/security.md): no ConfigMaps, no Pods.
    assert {r for rule in default["rules"] for r in rule["resources"]} == {"replicasets", "deployments", "namespaces"}
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in default["rules"])
    per_namespace = next(d for d in by_kind(base, "ClusterRole")
                         if d["metadata"]["name"] == "kinitiras-py-namespace-reader")
    assert "configmaps" in per_namespace["rules"][0]["resources"]
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in per_namespace["rules"])
    role = one(base, "Role")
    assert {r for rule in role["rules"] for r in rule["resources"]} == {"secrets", "leases"}


@needs_kubectl
def test_the_background_scan_reads_the_common_workload_kinds_and_no_configmaps_or_secrets(base: list[Obj]) -> None:
    roles = {d["metadata"]["name"]: d for d in by_kind(base, "ClusterRole")}
    binding = next(b for b in by_kind(base, "ClusterRoleBinding") if b["roleRef"]["name"] == "kinitiras-py-scanner")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kinitiras-py", "namespace": NAMESPACE}]
    selector = roles["kinitiras-py-scanner"]["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
    assert selector == {"kinitiras.kcloudlabs.io/aggregate-to-scanner": "true"}
    default = roles["kinitiras-py-scanner-default"]
    assert default["metadata"]["labels"]["kinitiras.kcloudlabs.io/aggregate-to-scanner"] == "true"
    assert "kinitiras.kcloudlabs.io/aggregate-to-reader" not in default["metadata"]["labels"]
    granted = {(group, resource) for rule in default["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"]}
    assert granted == {("", "namespaces"), ("", "pods"), ("", "services"), ("apps", "deployments"),
                       ("apps", "replicasets"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "jobs"),
                       ("batch", "cronjobs"), ("networking.k8s.io", "ingresses")}
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in default["rules"])  # reads, never writes


@needs_kubectl
def test_namespace_owners_may_write_only_the_namespaced_policy_kinds(base: list[Obj]) -> None:
    authors = next(d for d in by_kind(base, "ClusterRole") if d["metadata"]["name"] == "kinitiras-py-policy-author")
    labels = authors["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in labels  # policies may hold inline credentials
    assert {r for rule in authors["rules"] for r in rule["resources"]} == {
        "overridepolicies", "validatepolicies", "overridepolicies/status", "validatepolicies/status"}
    assert all(rule["apiGroups"] == ["policy.kcloudlabs.io"] for rule in authors["rules"])


@needs_kubectl
def test_deployment_service_pdb_and_servicemonitor_agree(base: list[Obj]) -> None:
    deployment, service, pdb = one(base, "Deployment"), one(base, "Service"), one(base, "PodDisruptionBudget")
    spec = deployment["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    assert spec["replicas"] == 2 and pdb["spec"]["minAvailable"] == 1
    selectors = (spec["selector"]["matchLabels"], service["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"])
    for selector in selectors:
        assert selector.items() <= pod_labels.items()
    assert service["metadata"]["name"] == "kinitiras-webhook"
    assert service["metadata"]["labels"]["app.kubernetes.io/name"] == "kinitiras-py"
    assert service["metadata"]["labels"]["app.kubernetes.io/instance"] == "kinitiras-webhook"
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {"https": (443, "https"), "metrics": (8080, "metrics")}
    monitor = one(render(CONFIG / "monitoring"), "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= set(ports)
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


@needs_kubectl
def test_monitoring_renders_the_monitor_the_alerts_and_the_dashboard() -> None:
    docs = render(CONFIG / "monitoring")
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PrometheusRule", "ServiceMonitor"]
    assert {d["metadata"]["namespace"] for d in docs} == {NAMESPACE}
    dashboard = one(docs, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["kinitiras-py.json"]) == json.loads(
        (CONFIG / "monitoring" / "dashboard.json").read_text())
    rule = yaml.safe_load((CONFIG / "monitoring" / "prometheusrule.yaml").read_text())
    assert one(docs, "PrometheusRule")["spec"] == rule["spec"]


@needs_kubectl
def test_the_container_is_locked_down_and_its_args_are_serve_flags(base: list[Obj]) -> None:
    pod = one(base, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kinitiras-py"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8443, "metrics": 8080}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "https", "HTTPS")
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container["env"]}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/certs", "/tmp"}
    assert all("emptyDir" in v for v in pod["volumes"])
    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    args = parser.parse_args([a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in container["args"]])
    assert (args.port, args.cert_dir, args.metrics_address) == (8443, Path("/certs"), ":8080")
    assert (args.service_name, args.service_namespace) == (service_name(base), NAMESPACE)
    assert args.mutating_config == args.validating_config == "kinitiras-py"
    # a stopping replica drains for a while, then waits for requests in flight; the kubelet must not
    # SIGKILL it before (shutdown of the rest takes a few seconds more)
    assert args.drain_seconds >= 5
    assert pod["terminationGracePeriodSeconds"] >= args.drain_seconds + args.deadline + 5


def service_name(base: list[Obj]) -> str:
    return str(one(base, "Service")["metadata"]["name"])


# --- against the API server -------------------------------------------------------------------


def serves_policy_v1(cluster: Cluster) -> bool:
    return "policy/v1" in cluster.kubectl("api-versions", check=True).stdout.split()


@pytest.fixture(scope="module")
def namespace(cluster: Cluster) -> Iterator[str]:
    """kinitiras-system, created for these tests unless it exists (then left alone)."""
    deadline = time.monotonic() + 60
    while True:  # a namespace being deleted accepts nothing new: wait until it is gone
        proc = cluster.kubectl("get", "namespace", NAMESPACE, "-o", "jsonpath={.status.phase}")
        if proc.returncode != 0 or proc.stdout != "Terminating" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    created = proc.returncode != 0
    if created:
        cluster.kubectl("create", "namespace", NAMESPACE, check=True)
    yield NAMESPACE
    if created:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


@pytest.mark.cluster
def test_server_side_dry_run_accepts_the_deployment(cluster: Cluster, namespace: str) -> None:
    path = CONFIG if serves_policy_v1(cluster) else LEGACY
    rendered = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True).stdout
    proc = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("(server dry run)") == len([d for d in yaml.safe_load_all(rendered) if d])


@needs_kubectl
@pytest.mark.skipif(not builds_config(), reason="kubectl 1.20's kustomize v2 cannot build config/ (needs 1.21+)")
def test_the_1_20_overlay_changes_only_the_pdb_api_version() -> None:
    def key(doc: Obj) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    current, legacy = sorted(render(CONFIG), key=key), sorted(render(LEGACY), key=key)
    assert [key(d) for d in current] == [key(d) for d in legacy]
    changed = [(a["kind"], a["apiVersion"], b["apiVersion"]) for a, b in zip(current, legacy, strict=True) if a != b]
    assert changed == [("PodDisruptionBudget", "policy/v1", "policy/v1beta1")]
    assert [{**a, "apiVersion": ""} for a in current] == [{**b, "apiVersion": ""} for b in legacy]


def _token(cluster: Cluster) -> str:
    proc = cluster.kubectl("-n", NAMESPACE, "create", "token", "kinitiras-py")
    if proc.returncode == 0:
        return proc.stdout.strip()
    deadline = time.monotonic() + 30  # before 1.24 the token controller writes a Secret
    while time.monotonic() < deadline:
        out = cluster.kubectl("-n", NAMESPACE, "get", "secrets", "-o", "yaml", check=True).stdout
        for secret in yaml.safe_load(out)["items"]:
            if (secret.get("type") == "kubernetes.io/service-account-token"
                    and secret["metadata"].get("annotations", {}).get("kubernetes.io/service-account.name")
                    == "kinitiras-py" and secret.get("data", {}).get("token")):
                return base64.b64decode(secret["data"]["token"]).decode()
        time.sleep(0.3)
    raise AssertionError("no token for the service account")


@pytest.fixture
def service_account_kubeconfig(cluster: Cluster, namespace: str, base: list[Obj]) -> Iterator[str]:
    """Apply the RBAC of config/ for real; a kubeconfig acting as the controller's ServiceAccount."""
    rbac = yaml.safe_dump_all([d for d in base if d["kind"] in RBAC_KINDS])
    cluster.kubectl("apply", "-f", "-", input=rbac, check=True)
    work = Path(tempfile.mkdtemp(prefix="kinitiras-sa-"))
    try:
        admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
                  "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
                  "users": [{"name": "sa", "user": {"token": _token(cluster)}}],
                  "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}
        (work / "kubeconfig").write_text(yaml.safe_dump(config))
        yield str(work / "kubeconfig")
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "kinitiras-py",
                        "--ignore-not-found")
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=rbac)
        shutil.rmtree(work, ignore_errors=True)


def can_i(cluster: Cluster, *args: str) -> bool:
    return cluster.kubectl("auth", "can-i", *args, f"--as={SERVICE_ACCOUNT}").stdout.strip() == "yes"


@pytest.mark.cluster
def test_rbac_grants_what_the_controller_needs_and_no_more(cluster: Cluster, service_account_kubeconfig: str) -> None:
    allowed = [("list", "clusteroverridepolicies.policy.kcloudlabs.io"),
               ("watch", "validatepolicies.policy.kcloudlabs.io"),
               ("patch", "overridepolicies.policy.kcloudlabs.io", "--subresource=status", "-n", "default"),
               ("create", "events", "-n", "default"),
               ("create", "secrets", "-n", NAMESPACE), ("patch", "secrets", "-n", NAMESPACE),
               ("update", "leases", "-n", NAMESPACE),
               ("patch", "mutatingwebhookconfigurations/kinitiras-py"), ("create", "validatingwebhookconfigurations"),
               ("watch", "deployments.apps", "-A"), ("list", "replicasets.apps", "-A"), ("get", "namespaces"),
               ("patch", "policyreports.wgpolicyk8s.io", "-n", "default"),
               ("create", "clusterpolicyreports.wgpolicyk8s.io"),
               ("delete", "policyreports.wgpolicyk8s.io", "-n", "default"),
               ("list", "policyreports.wgpolicyk8s.io", "-A"),
               # the background scan's kinds (config/base/rbac/scanner.yaml)
               ("list", "pods", "-A"), ("watch", "pods", "-A"), ("watch", "jobs.batch", "-A"),
               ("list", "cronjobs.batch", "-A"), ("list", "statefulsets.apps", "-A"),
               ("watch", "daemonsets.apps", "-A"), ("list", "services", "-A"),
               ("watch", "ingresses.networking.k8s.io", "-A")]
    denied = [("update", "clusteroverridepolicies.policy.kcloudlabs.io"), ("get", "secrets", "-n", "default"),
              ("delete", "secrets", "-n", NAMESPACE), ("patch", "mutatingwebhookconfigurations/someone-else"),
              ("delete", "mutatingwebhookconfigurations/kinitiras-py"), ("patch", "namespaces"),
              ("create", "pods", "-n", "default"), ("list", "secrets", "-A"),
              ("list", "configmaps", "-A"), ("get", "configmaps", "-n", "kube-system"),
              ("patch", "pods", "-n", "default"), ("delete", "pods", "-n", "default"),
              ("update", "deployments.apps", "-n", "default"), ("list", "serviceaccounts", "-A"),
              ("update", "policyreports.wgpolicyk8s.io", "-n", "default"),
              ("watch", "clusterpolicyreports.wgpolicyk8s.io")]
    deadline = time.monotonic() + 20  # the aggregated reader role is filled in by a controller
    while (not (can_i(cluster, "watch", "deployments.apps", "-A") and can_i(cluster, "watch", "pods", "-A"))
           and time.monotonic() < deadline):
        time.sleep(0.3)
    assert [a for a in allowed if not can_i(cluster, *a)] == []
    assert [d for d in denied if can_i(cluster, *d)] == []


@pytest.mark.cluster
async def test_the_reconciler_runs_as_the_service_account(cluster: Cluster, service_account_kubeconfig: str,
                                                          webhook: Webhook) -> None:  # noqa: F811
    api: Any = await client.api_client(service_account_kubeconfig)
    reg = Registration(url=webhook.url, failure_policy="Ignore",
                       object_selector={"matchLabels": {"deploy-test": uuid.uuid4().hex}})
    watch = PolicyWatch(api)
    watch.start()
    try:
        await asyncio.wait_for(watch.synced.wait(), 20)  # list and watch of the four kinds
        rec = Reconciler(api, reg, watch, Discovery(api), webhook.ca)
        assert await rec.reconcile() is True  # created through server-side apply
        assert rec.writes == 2
        assert await rec.reconcile() is True and rec.writes == 2
        assert await rec.inject(webhook.other_ca) is True  # JSON patch
        assert await rec.inject(webhook.ca) is True
        found = await applying.read_config(api, "ValidatingWebhookConfiguration", "kinitiras-py")
        assert found is not None
    finally:
        await watch.stop()
        await api.close()
