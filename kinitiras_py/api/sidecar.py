"""The ``sidecar`` template: containers, init containers, volumes, image pull secrets and pod
annotations added to every pod a policy selects, from a jinja2 template written inline or kept
in a ConfigMap (the job of the App Mesh sidecar injector)."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.api.schema import Model, prop


@dataclass(frozen=True, kw_only=True)
class ConfigMapKeyRef(Model):
    """One key of a ConfigMap."""

    namespace: str | None = prop("Namespace of the ConfigMap; defaults to the policy's namespace "
                                 "(cluster-scoped policies must set it). A namespaced policy may "
                                 "name only its own.")
    name: str = prop("Name of the ConfigMap.", required=True)
    key: str = prop("The data key holding the template.", required=True)


@dataclass(frozen=True, kw_only=True)
class SidecarTemplate(Model):
    """What a sidecar template adds to a pod, and the rules a pod must meet to get it."""

    template: str | None = prop("The jinja2 template, written inline; it renders YAML with "
                                "containers, initContainers, volumes, imagePullSecrets and "
                                "annotations to add.")
    config_map_ref: ConfigMapKeyRef | None = prop("Where to read the template instead of template; "
                                                  "a change to the ConfigMap applies to the next pods.")
    values: dict[str, Any] = prop("Constants the template reads as values.<name>.", factory=dict)
    value_refs: dict[str, ResourceRefer] = prop("Per-pod values the template reads as "
                                                "valueRefs.<name> (current, old, k8s, owner, http).",
                                                factory=dict)
    group: str | None = prop("A pod may match at most one sidecar policy of a group; a second one "
                             "denies the pod, naming both policies.")
    required_labels: list[str] = prop("Pod labels that must be present; a pod without one is "
                                      "denied, naming the label.", factory=list)
    require_container_ports: bool = prop("Deny a pod with a container that declares no "
                                         "containerPort, naming the container.", factory=bool)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Exactly one of template and configMapRef says where the template is."""
        if (self.template is None) == (self.config_map_ref is None):
            yield "template", "set exactly one of template and configMapRef"
