"""What a policy can know, when it is admitted, of the values its rules will see: the fields of
``request``, the names ``params`` can hold, whether ``namespaceObject`` can ever be there, and
which lists its objects certainly have. A rule that could only fail on every object against
these shapes is refused then (see :mod:`..evaluation.celshapes` for CEL, :mod:`.overriderules` for
plaintext).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.engine.objects import selectors, workloads

REQUEST_FIELDS = ("operation", "namespace", "userInfo", "dryRun")
"""The members of the ``request`` variable (:meth:`.pipeline.Request.cel_request`), always present."""

CLUSTER_SCOPED: dict[str, frozenset[str]] = {
    "Node": frozenset({""}), "PersistentVolume": frozenset({""}), "ComponentStatus": frozenset({""}),
    "ClusterRole": frozenset({"rbac.authorization.k8s.io"}),
    "ClusterRoleBinding": frozenset({"rbac.authorization.k8s.io"}),
    "StorageClass": frozenset({"storage.k8s.io"}), "CSIDriver": frozenset({"storage.k8s.io"}),
    "CSINode": frozenset({"storage.k8s.io"}), "VolumeAttachment": frozenset({"storage.k8s.io"}),
    "PriorityClass": frozenset({"scheduling.k8s.io"}), "RuntimeClass": frozenset({"node.k8s.io"}),
    "IngressClass": frozenset({"networking.k8s.io"}),
    "CustomResourceDefinition": frozenset({"apiextensions.k8s.io"}),
    "APIService": frozenset({"apiregistration.k8s.io"}),
    "CertificateSigningRequest": frozenset({"certificates.k8s.io"}),
    "MutatingWebhookConfiguration": frozenset({"admissionregistration.k8s.io"}),
    "ValidatingWebhookConfiguration": frozenset({"admissionregistration.k8s.io"}),
    "ValidatingAdmissionPolicy": frozenset({"admissionregistration.k8s.io"}),
    "ValidatingAdmissionPolicyBinding": frozenset({"admissionregistration.k8s.io"}),
    "ClusterOverridePolicy": frozenset({"policy.kcloudlabs.io"}),
    "ClusterValidatePolicy": frozenset({"policy.kcloudlabs.io"}),
}
"""Built-in (and our own) cluster-scoped kinds by API group. Their requests carry no namespace, so
``namespaceObject`` is null for them. Not Namespace: its request names the Namespace itself."""

MAX_ITEMS = 3 * 1024 * 1024 // 2
"""More items than any list in an object can have: objects are at most 3 MiB (the API server's
request limit) and an item takes two bytes at least (``0,``)."""

OBJECT_LISTS = (("metadata", "finalizers"), ("metadata", "ownerReferences"), ("metadata", "managedFields"))
"""Lists every object's metadata has, whatever its kind."""
POD_SPEC_LISTS = (*workloads.CONTAINER_FIELDS, "ephemeralContainers", "volumes", "tolerations",
                  "imagePullSecrets", "hostAliases", "topologySpreadConstraints", "readinessGates")
"""Lists a pod spec has."""


@dataclass(frozen=True)
class Kinds:
    """The (group, kind) of every resource selector of a policy; None when one may select any
    kind (no apiVersion group or no kind), or when there is no selector (which selects all)."""

    known: tuple[tuple[str, str], ...] | None

    @classmethod
    def of(cls, sels: Iterable[ResourceSelector | None]) -> Kinds:
        """The kinds the resource selectors ``sels`` can select (None: a selector that failed its model)."""
        found: list[tuple[str, str]] = []
        for sel in sels:
            group = selectors.selector_group(sel.api_version or "") if sel is not None else None
            kind = sel.kind if sel is not None else None
            if group is None or not kind or kind == "*":
                return cls(None)
            found.append((group, kind))
        return cls(tuple(found) or None)

    def without_namespace(self) -> bool:
        """Whether every object selected is cluster-scoped, so ``namespaceObject`` is always null."""
        return self.known is not None and all(group in CLUSTER_SCOPED.get(kind, ()) for group, kind in self.known)

    def lists(self) -> list[tuple[str, ...]]:
        """The paths of lists every selected object has (those of metadata at least)."""
        found: list[tuple[str, ...]] = list(OBJECT_LISTS)
        if self.known is None:
            return found
        specs = {workloads.kind_pod_spec_path(f"{group}/v1" if group else "v1", kind) for group, kind in self.known}
        (spec, *others) = specs
        if spec is not None and not others:  # every kind has its pod spec there
            found += [(*spec, name) for name in POD_SPEC_LISTS]
        return found


def impossible_index(tokens: list[str], kinds: Kinds) -> str | None:
    """Why the JSON pointer ``tokens`` can reach nothing in any object selected (an index beyond
    any list's length in a list every such object has), or None."""
    for at, lst in ((len(lst), lst) for lst in kinds.lists()):
        if len(tokens) > at and tuple(tokens[:at]) == lst:
            token = tokens[at]
            if token.isascii() and token.isdigit() and int(token) >= MAX_ITEMS:
                return (f"index {token} of /{'/'.join(lst)} is beyond the length of any list an object can hold "
                        f"(at most {MAX_ITEMS:,} items)")
    return None
