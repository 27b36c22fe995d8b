"""core/v1 container and pod spec items that an ``inject`` template copies into pods: env
variables, envFrom sources, volume mounts and volumes. Field names follow core/v1 so the items are
written into Pods as they are; what the API server would refuse later (a mount without a path, an
env var with both value and valueFrom, a volume with no or two sources) is refused here, with the
field path, when the policy is admitted."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.core import Quantity
from kinitiras_py.api.schema import Model, OneOf, Pattern, prop

MOUNT_PROPAGATIONS = ("None", "HostToContainer", "Bidirectional")
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
VOLUME_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi",
    "downwardAPI", "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk",
    "gitRepo", "glusterfs", "hostPath", "iscsi", "nfs", "persistentVolumeClaim", "photonPersistentDisk",
    "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret", "storageos", "vsphereVolume",
)
"""The volume sources of core/v1 ``Volume`` (exactly one is set)."""
MAX_VOLUME_DEPTH = 12
"""Deepest nesting of objects and lists in a volume (the deepest core/v1 source, an ephemeral
volume's claim template selector, has 8): the volume is written into CEL, whose parser stops at
32 levels for the whole expression."""

EnvName = Annotated[str, Pattern(ENV_NAME_PATTERN, "a C identifier-like environment variable name "
                                                   "(letters, digits, '_', '-', '.'; not starting with a digit)")]
VolumeName = Annotated[str, Pattern(DNS_LABEL_PATTERN, "a DNS label (lowercase letters, digits and '-', "
                                                       "at most 63 characters)")]


@dataclass(frozen=True, kw_only=True)
class KeySelector(Model):
    """A key of a ConfigMap or Secret (``configMapKeyRef``, ``secretKeyRef``)."""

    name: str = prop("Name of the ConfigMap or Secret.", required=True)
    key: str = prop("The key to read.", required=True)
    optional: bool | None = prop("Whether the ConfigMap or Secret and its key may be missing.")


@dataclass(frozen=True, kw_only=True)
class ObjectFieldSelector(Model):
    """A field of the pod (``fieldRef``)."""

    field_path: str = prop("Path of the field, e.g. metadata.name or status.podIP.", required=True)
    api_version: str | None = prop("Version of the schema the path is written in (v1).")


@dataclass(frozen=True, kw_only=True)
class ResourceFieldSelector(Model):
    """A container resource amount (``resourceFieldRef``)."""

    resource: str = prop("Resource, e.g. limits.cpu or requests.memory.", required=True)
    container_name: str | None = prop("Container whose resources are read (for volumes).")
    divisor: Quantity | None = prop("Unit the amount is divided by, e.g. 1m or 1Mi.")


@dataclass(frozen=True, kw_only=True)
class EnvVarSource(Model):
    """Where an env var's value comes from; set exactly one."""

    config_map_key_ref: KeySelector | None = prop("A key of a ConfigMap.")
    secret_key_ref: KeySelector | None = prop("A key of a Secret.")
    field_ref: ObjectFieldSelector | None = prop("A field of the pod.")
    resource_field_ref: ResourceFieldSelector | None = prop("A resource amount of a container.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """Exactly one source."""
        count = sum(v is not None for v in (self.config_map_key_ref, self.secret_key_ref, self.field_ref,
                                             self.resource_field_ref))
        if count != 1:
            yield "", (f"set exactly one of configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef "
                       f"(got {count})")


@dataclass(frozen=True, kw_only=True)
class EnvVar(Model):
    """A core/v1 environment variable."""

    name: EnvName = prop("Name of the variable.", required=True)
    value: str | None = prop("The value (a string: quote numbers in YAML).")
    value_from: EnvVarSource | None = prop("Where to read the value; not with value.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """value and valueFrom exclude each other."""
        if self.value not in (None, "") and self.value_from is not None:
            yield "valueFrom", "may not be set together with value"


@dataclass(frozen=True, kw_only=True)
class LocalObjectReference(Model):
    """A ConfigMap or Secret of the pod's namespace, whole (``configMapRef``, ``secretRef``)."""

    name: str = prop("Name of the ConfigMap or Secret.", required=True)
    optional: bool | None = prop("Whether it may be missing.")


@dataclass(frozen=True, kw_only=True)
class EnvFromSource(Model):
    """Every key of a ConfigMap or Secret as env vars; set exactly one of configMapRef, secretRef."""

    prefix: EnvName | None = prop("Prepended to every key.")
    config_map_ref: LocalObjectReference | None = prop("The ConfigMap.")
    secret_ref: LocalObjectReference | None = prop("The Secret.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """Exactly one source."""
        if (self.config_map_ref is None) == (self.secret_ref is None):
            yield "", "set exactly one of configMapRef, secretRef"


@dataclass(frozen=True, kw_only=True)
class VolumeMount(Model):
    """A core/v1 volume mount."""

    name: VolumeName = prop("Name of the volume (in the pod's volumes).", required=True)
    mount_path: Annotated[str, Pattern(r"^[^:]+$", "a path without ':'")] = prop(
        "Where the volume appears in the container.", required=True)
    read_only: bool | None = prop("Mount read-only.")
    sub_path: str | None = prop("Path inside the volume to mount instead of its root.")
    sub_path_expr: str | None = prop("subPath with $(VAR) references to env vars; not with subPath.")
    mount_propagation: Annotated[str, OneOf(MOUNT_PROPAGATIONS)] | None = prop(
        "How mounts propagate between host and container.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """subPath and subPathExpr exclude each other."""
        if self.sub_path and self.sub_path_expr:
            yield "subPathExpr", "may not be set together with subPath"


@dataclass(frozen=True, kw_only=True)
class Volume(Model):
    """A core/v1 volume: its name and exactly one source (``emptyDir``, ``configMap``, ``secret``...),
    whose fields are passed to the API server as written."""

    OPEN = True

    name: VolumeName = prop("Name that volumeMounts refer to.", required=True)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Exactly one known volume source, an object."""
        sources = [key for key in self.raw if key != "name"]
        for key in sources:
            if key not in VOLUME_SOURCES:
                yield str(key), f"unknown volume source: must be one of {', '.join(VOLUME_SOURCES)}"
            elif not isinstance(self.raw[key], dict):
                yield str(key), "must be of type object"
            elif (depth := _depth(self.raw)) > MAX_VOLUME_DEPTH:
                yield str(key), f"the volume nests {depth} levels deep; at most {MAX_VOLUME_DEPTH} are supported"
            elif (number := _huge_integer(self.raw[key])) is not None:
                yield str(key), f"{number} is out of the range of a 64-bit integer"
        if not sources:
            yield "", "a volume needs a source, e.g. emptyDir: {} or configMap: {name: ...}"
        elif len(sources) > 1:
            yield "", f"a volume has exactly one source, got {', '.join(map(str, sources))}"



def _depth(value: object) -> int:
    """Levels of objects and lists in ``value`` (a scalar is 0)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _huge_integer(value: object) -> int | None:
    """An integer in ``value`` that no 64-bit integer holds (the API server would refuse it), or None."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return next((n for n in map(_huge_integer, value) if n is not None), None)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return value
    return None
