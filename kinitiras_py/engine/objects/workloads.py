"""Where the pod spec lives in every kind that carries one.

kinitiras only knew ``Pod`` (``/spec``) and ``Deployment`` (``/spec/template/spec``); every
built-in workload kind is covered here, matched on kind *and* API group so that a CRD that
happens to be called ``Deployment`` in another group is not mistaken for one.
"""

from __future__ import annotations

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.objects import patching

_TEMPLATE_SPEC = ("spec", "template", "spec")

POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": _TEMPLATE_SPEC,
    "StatefulSet": _TEMPLATE_SPEC,
    "DaemonSet": _TEMPLATE_SPEC,
    "ReplicaSet": _TEMPLATE_SPEC,
    "ReplicationController": _TEMPLATE_SPEC,
    "Job": _TEMPLATE_SPEC,
    "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Kind -> keys leading from the object root to its pod spec."""

KIND_GROUPS: dict[str, frozenset[str]] = {
    "Pod": frozenset({""}),
    "ReplicationController": frozenset({""}),
    "PodTemplate": frozenset({""}),
    # extensions/v1beta1 served these kinds before apps/v1 existed.
    "Deployment": frozenset({"apps", "extensions"}),
    "DaemonSet": frozenset({"apps", "extensions"}),
    "ReplicaSet": frozenset({"apps", "extensions"}),
    "StatefulSet": frozenset({"apps"}),
    "Job": frozenset({"batch"}),
    "CronJob": frozenset({"batch"}),
}
"""Kind -> the API groups (``""`` = core) in which it is the built-in pod-bearing kind."""

CONTAINER_FIELDS = ("containers", "initContainers")
"""Pod spec lists whose items are containers an overrider may change (not ephemeralContainers)."""


def kind_pod_spec_path(api_version: object, kind: object) -> tuple[str, ...] | None:
    """The keys leading to the pod spec of objects of this apiVersion and kind, or None."""
    api_version = str(api_version or "")
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    if not isinstance(kind, str) or group not in KIND_GROUPS.get(kind, ()):
        return None
    return POD_TEMPLATE_PATHS[kind]


def pod_spec_path(obj: Obj) -> tuple[str, ...] | None:
    """The keys leading to ``obj``'s pod spec, or None when its kind carries no pod spec."""
    return kind_pod_spec_path(obj.get("apiVersion"), obj.get("kind"))


def is_pod_bearing(obj: Obj) -> bool:
    """Whether ``obj`` is of a kind that carries a pod spec."""
    return pod_spec_path(obj) is not None


def pod_spec_pointer(obj: Obj) -> str | None:
    """The JSON pointer of ``obj``'s pod spec (e.g. ``/spec/template/spec``), or None."""
    path = pod_spec_path(obj)
    return None if path is None else patching.pointer(*path)


def pod_spec(obj: Obj, create: bool = False) -> Obj | None:
    """The pod spec dict inside ``obj`` (not a copy), or None.

    None when the kind carries no pod spec or a level on the way is missing or not an object.
    With ``create``, missing (or null) levels are created as empty objects first.
    """
    path = pod_spec_path(obj)
    if path is None:
        return None
    node = obj
    for key in path:
        child = node.get(key)
        if child is None and create:
            child = node[key] = {}
        if not isinstance(child, dict):
            return None
        node = child
    return node


def containers(obj: Obj, include_init: bool = True,
               names: list[str] | None = None) -> list[tuple[str, int, Obj]]:
    """Every container of ``obj``'s pod spec as ``(list field, index, container dict)``.

    Regular containers come first, then init containers (when ``include_init``); with ``names``
    only containers of those names. Items that are not objects are skipped; the index is still
    the item's position in its list.
    """
    spec = pod_spec(obj)
    if spec is None:
        return []
    fields = CONTAINER_FIELDS if include_init else CONTAINER_FIELDS[:1]
    found: list[tuple[str, int, Obj]] = []
    for field in fields:
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if isinstance(container, dict) and (names is None or container.get("name") in names):
                found.append((field, index, container))
    return found
