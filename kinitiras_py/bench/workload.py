"""The benchmark's inputs: one Pod, the policy that matches it, and policies that do not.

The non-matching ("filler") policies are spread over the ways a policy can miss a Pod, so the
policy index is what keeps them off the request path: OverridePolicies for Pods in other
namespaces, ClusterOverridePolicies for other kinds, ClusterValidatePolicies for other kinds.
"""

from __future__ import annotations

from kinitiras_py.base.typedefs import Obj

API_VERSION = "policy.kcloudlabs.io/v1alpha1"
NAMESPACE = "bench"
OTHER_KINDS = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("v1", "ConfigMap"), ("v1", "Service"),
               ("batch/v1", "Job"), ("v1", "Secret"), ("networking.k8s.io/v1", "Ingress"))


def pod() -> Obj:
    """A Pod like a Deployment would create: two containers with limits, labels, annotations."""
    containers = [
        {"name": name, "image": f"registry.example.com/{name}:1.4.2",
         "ports": [{"containerPort": port, "protocol": "TCP"}],
         "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(8)],
         "resources": {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}}}
        for name, port, cpu, memory in (("app", 8080, "2", "4Gi"), ("proxy", 15001, "500m", "256Mi"))
    ]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-5d8f7c9b4-x2k7q", "namespace": NAMESPACE, "generateName": "web-5d8f7c9b4-",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b4", "tier": "frontend"},
            "annotations": {f"example.com/note-{i}": f"note {i}" for i in range(4)},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b4",
                                 "uid": "0b7a0e3c-1b1e-4e7f-9a55-4a3c2f8d0001", "controller": True}],
        },
        "spec": {"containers": containers, "restartPolicy": "Always", "serviceAccountName": "web",
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
    }


def policy_label(index: int) -> str:
    """The label matching policy ``index`` adds."""
    return f"bench.example.com/policy-{index:04d}"


def matching_policy(index: int = 0, namespace: str = NAMESPACE, operations: tuple[str, ...] = ("CREATE",)) -> Obj:
    """An OverridePolicy for the benchmark Pod: oversell its requests and add one label."""
    return {
        "apiVersion": API_VERSION, "kind": "OverridePolicy",
        "metadata": {"name": f"oversell-{index:04d}", "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod",
                                   "labelSelector": {"matchLabels": {"app": "web"}}}],
            "overrideRules": [
                {"targetOperations": list(operations), "overriders": {"template": {
                    "type": "resourcesOversell", "operation": "replace",
                    "resourcesOversell": {"cpuFactor": "0.5", "memoryFactor": "0.25"}}}},
                {"targetOperations": list(operations), "overriders": {"template": {
                    "type": "labels", "operation": "add", "path": policy_label(index),
                    "value": {"string": "applied"}}}},
            ],
        },
    }


def _labels_rule() -> Obj:
    return {"targetOperations": ["CREATE", "UPDATE"], "overriders": {"template": {
        "type": "labels", "operation": "add", "path": "team", "value": {"string": "platform"}}}}


def filler_policy(index: int) -> Obj:
    """A policy that can never match the benchmark Pod (another namespace, or another kind)."""
    api_version, kind = OTHER_KINDS[index % len(OTHER_KINDS)]
    name = f"filler-{index:04d}"
    variant = index % 3
    if variant == 0:
        return {"apiVersion": API_VERSION, "kind": "OverridePolicy",
                "metadata": {"name": name, "namespace": f"team-{index:04d}"},
                "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                         "overrideRules": [_labels_rule()]}}
    if variant == 1:
        return {"apiVersion": API_VERSION, "kind": "ClusterOverridePolicy", "metadata": {"name": name},
                "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
                         "overrideRules": [_labels_rule()]}}
    return {"apiVersion": API_VERSION, "kind": "ClusterValidatePolicy", "metadata": {"name": name},
            "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
                     "validateRules": [{"targetOperations": ["CREATE"], "template": {"type": "condition", "condition": {
                         "cond": "NotExist", "dataRef": {"from": "current", "path": "/metadata/labels/team"},
                         "message": "a team label is required"}}}]}}


def one_matching(total: int) -> list[Obj]:
    """``total`` policies: one matching the Pod, ``total - 1`` fillers."""
    return some_matching(total, 1)


def some_matching(total: int, matching: int) -> list[Obj]:
    """``total`` policies: ``matching`` of them match the Pod (each its own label), the rest are fillers."""
    if not 0 <= matching <= total:
        raise ValueError(f"{matching} matching policies do not fit in {total}")
    return [*(matching_policy(i) for i in range(matching)), *(filler_policy(i) for i in range(matching, total))]


def spread(total: int, matching: dict[str, int]) -> list[Obj]:
    """``total`` policies: for each namespace in ``matching``, that many policies matching the Pod
    there (each its own label); the rest are fillers."""
    count = sum(matching.values())
    if count > total or any(k < 0 for k in matching.values()):
        raise ValueError(f"{count} matching policies do not fit in {total}")
    return [*(matching_policy(i, namespace) for namespace, k in matching.items() for i in range(k)),
            *(filler_policy(i) for i in range(count, total))]


def all_matching(total: int, operations: tuple[str, ...] = ("CREATE",)) -> list[Obj]:
    """``total`` policies that all match the Pod, each adding its own label."""
    return [matching_policy(i, operations=operations) for i in range(total)]


def validate_policy(index: int) -> Obj:
    """A ClusterValidatePolicy the benchmark Pod passes: two CEL checks over its containers."""
    return {"apiVersion": API_VERSION, "kind": "ClusterValidatePolicy", "metadata": {"name": f"check-{index:04d}"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                     "validateRules": [
                         {"targetOperations": ["CREATE"], "message": "images come from registry.example.com",
                          "cel": "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))"},
                         {"targetOperations": ["CREATE"], "message": "every container sets a memory limit",
                          "cel": "object.spec.containers.all(c, has(c.resources.limits.memory))"}]}}


def all_validating(total: int) -> list[Obj]:
    """``total`` validate policies that all match the Pod and admit it."""
    return [validate_policy(i) for i in range(total)]


def _sidecar(name: str, port: int, cpu: str, memory: str) -> Obj:
    return {
        "name": name, "image": f"registry.example.com/{name}:2.7.1", "imagePullPolicy": "IfNotPresent",
        "args": [f"--listen=:{port}", "--log-format=json", f"--config=/etc/{name}/config.yaml"],
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [{"name": f"{name.upper().replace('-', '_')}_SETTING_{i}", "value": f"setting-value-{i:02d}"}
                for i in range(19)]
               + [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                  {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "resources": {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": port}, "initialDelaySeconds": 15},
        "volumeMounts": [{"name": f"{name}-config", "mountPath": f"/etc/{name}", "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


SERVER_CONTAINERS = (("app", 8080, "2", "4Gi"), ("proxy", 15001, "500m", "256Mi"),
                     ("log-shipper", 2020, "200m", "128Mi"), ("metrics-exporter", 9100, "100m", "64Mi"))


def server_pod() -> Obj:
    """The Pod of the webhook and end-to-end benchmarks: four containers as a service-mesh
    Deployment would create them (probes, mounts, environment); its AdmissionReview is about
    9.5 KB. No owner and the default ServiceAccount, so the API server stores it as it is."""
    containers = [_sidecar(*c) for c in SERVER_CONTAINERS]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "web-5d8f7c9b4-", "namespace": NAMESPACE,
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b4", "tier": "frontend",
                       "app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.4.2"},
            "annotations": {f"example.com/note-{i}": f"note {i}" for i in range(4)},
        },
        "spec": {"containers": containers, "restartPolicy": "Always", "automountServiceAccountToken": False,
                 "terminationGracePeriodSeconds": 30,
                 "volumes": [{"name": f"{c[0]}-config", "configMap": {"name": f"{c[0]}-config"}}
                             for c in SERVER_CONTAINERS] + [{"name": "tmp", "emptyDir": {}}],
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]},
    }


SLOW_LABEL = "bench.example.com/slow"
"""On one distinct Pod in :data:`SLOW_EVERY`: what the slow neighbour's rule selects."""
SLOW_EVERY = 10


def _plus(quantity: str, extra: int) -> str:
    """``quantity`` (a whole number, ``Nm``, or ``NMi``/``NGi``) made ``extra`` units of its finest form larger."""
    if quantity.endswith("Gi"):
        return f"{int(quantity[:-2]) * 1024 + extra}Mi"
    if quantity.endswith(("m", "Mi")):
        number, suffix = (quantity[:-1], "m") if quantity.endswith("m") else (quantity[:-2], "Mi")
        return f"{int(number) + extra}{suffix}"
    return f"{int(quantity) * 1000 + extra}m"


def distinct_server_pod(index: int, prefix: str, namespace: str = NAMESPACE) -> Obj:
    """:func:`server_pod` as a Pod unlike any other: its own name (``prefix-index``) and limits
    (each container's cpu and memory ``index`` millicores and MiB above the template's); every
    :data:`SLOW_EVERY`-th carries :data:`SLOW_LABEL`. As StatefulSets, Jobs and bare Pods look."""
    pod = server_pod()
    meta = pod["metadata"]
    del meta["generateName"]
    meta |= {"name": f"{prefix}-{index}", "namespace": namespace}
    if index % SLOW_EVERY == 0:
        meta["labels"][SLOW_LABEL] = "yes"
    for container in pod["spec"]["containers"]:
        limits = container["resources"]["limits"]
        limits |= {"cpu": _plus(limits["cpu"], index), "memory": _plus(limits["memory"], index)}
        container["resources"]["requests"] = dict(limits)
    return pod


def slow_policy(namespace: str, timeout_ms: int = 100) -> Obj:
    """An OverridePolicy whose JavaScript rule runs to its time limit on the Pods labelled
    :data:`SLOW_LABEL`; the rule fails and is skipped (failurePolicy Ignore): the slow neighbour."""
    return {
        "apiVersion": API_VERSION, "kind": "OverridePolicy",
        "metadata": {"name": "slow-neighbour", "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod",
                                   "labelSelector": {"matchLabels": {SLOW_LABEL: "yes"}}}],
            "overrideRules": [{"targetOperations": ["CREATE"], "failurePolicy": "Ignore", "overriders": {
                "javascript": {"timeoutMs": timeout_ms,
                               "source": "function jsa_mutate(op, obj) { for (;;) {} }"}}}],
        },
    }
