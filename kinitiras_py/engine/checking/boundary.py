"""The namespace boundary of namespaced policies: which objects an OverridePolicy or a
ValidatePolicy in namespace N may read.

* Objects of namespaced kinds in N only. A reference that names no namespace reads in N.
* Of cluster-scoped objects, only N's own Namespace (:data:`ALLOWED_CLUSTER`): the request's
  Namespace, since a namespaced policy applies only to requests in its namespace.

Cluster policies have no boundary. The same rule is applied twice: when a policy is admitted,
to what is written literally (:func:`problems`, with the field named), and when a rule reads,
to the namespace and name its placeholders produced (:func:`bound`, by ``refs.scoped``).
"""

from __future__ import annotations

from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.base.errors import KinitirasError, PolicyError

ALLOWED_CLUSTER = frozenset({("", "Namespace")})
"""Cluster-scoped (group, kind)s a namespaced policy may read: the object named after its namespace."""
CLUSTER_SCOPED = frozenset({
    ("", "Namespace"), ("", "Node"), ("", "PersistentVolume"), ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"), ("storage.k8s.io", "CSIDriver"), ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"), ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("scheduling.k8s.io", "PriorityClass"), ("node.k8s.io", "RuntimeClass"),
    ("apiregistration.k8s.io", "APIService"), ("certificates.k8s.io", "CertificateSigningRequest"),
    ("networking.k8s.io", "IngressClass"), ("policy", "PodSecurityPolicy"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"), ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("policy.kcloudlabs.io", "ClusterOverridePolicy"), ("policy.kcloudlabs.io", "ClusterValidatePolicy"),
})
"""Built-in (and our own) cluster-scoped kinds: what admission knows without asking the API
server. At run time the store's discovery decides, so a cluster-scoped CRD is caught there."""
RULE = "a namespaced policy reads only objects in its own namespace, and its own Namespace"


class Crossing(KinitirasError, LookupError):
    """A namespaced policy tried to read outside its namespace; the message names the boundary."""


def group_of(api_version: str) -> str:
    """The API group of ``apiVersion`` (``""`` for the core group's ``v1``)."""
    return api_version.rpartition("/")[0]


def cluster_scoped(api_version: str, kind: str) -> bool:
    """Whether the kind is one of the :data:`CLUSTER_SCOPED` ones known without discovery."""
    return (group_of(api_version), kind) in CLUSTER_SCOPED


def bound(policy_namespace: str, namespaced: bool, api_version: str, kind: str, namespace: str | None,
          name: str | None) -> str | None:
    """The namespace a read of the policy in ``policy_namespace`` is made in (None for a
    cluster-scoped kind); Crossing when the read is outside the boundary. ``name`` is None for a
    list (of its own Namespace, the caller keeps only that one)."""
    if namespaced:
        if namespace and namespace != policy_namespace:
            raise Crossing(f"{kind} {namespace}/{name or '*'} is outside namespace {policy_namespace!r}: {RULE}")
        return policy_namespace
    if (group_of(api_version), kind) in ALLOWED_CLUSTER and name in (None, policy_namespace):
        return None
    raise Crossing(f"{kind} {name or '*'} is cluster-scoped, outside namespace {policy_namespace!r}: {RULE}")


def _literal(value: object) -> str | None:
    """``value`` when it is a string without placeholders (what admission can judge), else None."""
    return value if isinstance(value, str) and value and "{{" not in value else None


def problems(policy_namespace: str | None, where: str, api_version: str, kind: str, namespace: object,
             name: object) -> list[PolicyError]:
    """What admission refuses of a read written at ``where`` (the map holding ``kind``,
    ``namespace`` and ``name``): a literal other namespace, a cluster-scoped kind other than the
    policy's own Namespace. Placeholders are left to :func:`bound` at run time."""
    if policy_namespace is None:
        return []
    if cluster_scoped(api_version, kind):
        literal = _literal(name)
        if (group_of(api_version), kind) not in ALLOWED_CLUSTER:
            return [PolicyError(f"{where}.kind", f"{kind} is cluster-scoped, outside namespace "
                                f"{policy_namespace!r}: {RULE}")]
        if literal is not None and literal != policy_namespace:
            return [PolicyError(f"{where}.name", f"Namespace {literal} is not this policy's namespace "
                                f"{policy_namespace!r}: {RULE}")]
        return []
    literal = _literal(namespace)
    if literal is not None and literal != policy_namespace:
        return [PolicyError(f"{where}.namespace", f"namespace {literal} is outside this policy's namespace "
                            f"{policy_namespace!r}: {RULE}")]
    return []


def reference_problems(policy_namespace: str | None, ref: ResourceRefer, path: str) -> list[PolicyError]:
    """:func:`problems` of a value reference at ``path``: its ``k8s`` object and its
    ``http.auth.secretRef`` Secret."""
    if policy_namespace is None:
        return []
    found: list[PolicyError] = []
    k8s = ref.k8s
    if ref.from_ == "k8s" and k8s is not None:
        found += problems(policy_namespace, f"{path}.k8s", k8s.api_version or "", k8s.kind or "",
                          k8s.namespace, k8s.name)
    auth = ref.http.auth if ref.http is not None else None
    secret = auth.secret_ref if auth is not None else None
    if ref.from_ == "http" and secret is not None:
        found += problems(policy_namespace, f"{path}.http.auth.secretRef", "v1", "Secret", secret.namespace,
                          secret.name)
    return found
