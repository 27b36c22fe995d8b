"""The ``inject`` block of an override template: what a service-injection rule (PodPreset's job)
adds to the pods it selects, and what happens when the pod, or another inject rule, already sets
the same key to something else."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.containers import EnvFromSource, EnvVar, Volume, VolumeMount
from kinitiras_py.api.schema import Model, OneOf, prop

ON_CONFLICT = ("Skip", "Deny", "Override")


@dataclass(frozen=True, kw_only=True)
class Marker(Model):
    """The annotation an inject rule writes on every pod (or pod template) it injects; a rule that
    is skipped or conflicts writes none."""

    key: str = prop("Annotation key, a qualified name (e.g. podpreset.admission.kubernetes.io/podpreset-db, "
                    "what a converted PodPreset writes).", required=True)
    value: str | None = prop("Its value; absent: the policy's resourceVersion as the webhook compiled it "
                             "(empty when the policy has none, as offline from a file).")


@dataclass(frozen=True, kw_only=True)
class Inject(Model):
    """Items added to every selected container and init container (env, envFrom, volumeMounts) and,
    once, to the pod spec (volumes). An item the pod already has, equal, is kept once."""

    env: list[EnvVar] = prop("Environment variables, keyed by name.", factory=list)
    env_from: list[EnvFromSource] = prop("Whole ConfigMaps or Secrets as env vars, keyed by source and "
                                         "prefix.", factory=list)
    volume_mounts: list[VolumeMount] = prop("Volume mounts, keyed by name and, separately, by mountPath.",
                                            factory=list)
    volumes: list[Volume] = prop("Volumes of the pod, keyed by name.", factory=list)
    on_conflict: Annotated[str, OneOf(ON_CONFLICT)] = prop(
        "When the pod or another inject rule has the same key with another value: Skip (the pod is "
        "admitted without the injections of every rule involved, with a warning), Deny, or Override "
        "(this rule's item replaces the pod's; between rules, the later one wins).", default="Skip")
    marker: Marker | None = prop(
        "The annotation marking the pods this rule injects; absent: policy.kcloudlabs.io/inject-<policy name> "
        "(cluster-inject-<name> for a ClusterOverridePolicy) set to the policy's resourceVersion.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """Something to inject; no key twice (the rule would conflict with itself)."""
        if not (self.env or self.env_from or self.volume_mounts or self.volumes):
            yield "", "nothing to inject: set env, envFrom, volumeMounts or volumes"
        seen: dict[str, int] = {}
        for field, items in (("env", self.env), ("envFrom", self.env_from), ("volumeMounts", self.volume_mounts),
                             ("volumes", self.volumes)):
            seen.clear()
            for i, item in enumerate(items):
                for key in item_keys(field, item.raw):
                    if key in seen:
                        yield f"{field}[{i}]", f"{key} is already set by {field}[{seen[key]}]"
                    seen.setdefault(key, i)


def item_keys(field: str, item: dict[str, object]) -> list[str]:
    """The keys an item is matched by (PodPreset's merge keys; envFrom by source and prefix)."""
    if field == "envFrom":
        source = "configMapRef" if isinstance(item.get("configMapRef"), dict) else "secretRef"
        ref = item.get(source)
        name = ref.get("name") if isinstance(ref, dict) else None
        return [f"{source} {name}" + (f" prefix {item['prefix']}" if item.get("prefix") else "")]
    if field == "volumeMounts":
        return [f"name {item.get('name')}", f"mountPath {item.get('mountPath')}"]
    return [f"name {item.get('name')}"]
