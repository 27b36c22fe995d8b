"""The ``inject`` override template → CEL that describes, item by item, what the rule would add.

Unlike the other templates, the rendered CEL does not return patch operations: it returns a plan,
``{"apply", "podSpec", "claims"}``, one claim per item and place (a container's ``env``, the pod's
``volumes``...), saying whether the pod already has the item (``present``) and at which indexes the
pod holds the item's keys with other values (``clash``). :mod:`kinitiras_py.engine.running.injection`
combines the plans of every inject rule matching a pod, so that conflicts between rules are seen
too, and writes the operations. Items are written as the API server defaults them (a configMap
volume's ``defaultMode: 420``...), so an item injected earlier compares equal when met again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from kinitiras_py.api.overrides import OverrideRuleTemplate
from kinitiras_py.api.policies import GROUP
from kinitiras_py.api.schema import Model
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj

EXCLUDE_ANNOTATIONS = ("podpreset.admission.kubernetes.io/exclude", "policy.kcloudlabs.io/inject-exclude")
"""A pod (or pod template) annotated with either, set to "true", is left alone by every inject rule."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Mirror pods (the API server's copies of static pods) carry it; they are never changed."""
CONTAINER_FIELDS = ("env", "envFrom", "volumeMounts")
_DEFAULT_MODE = 420  # 0644, what the API server writes into configMap, secret, downwardAPI, projected
_OMIT_EMPTY = {"env": ("value",), "envFrom": ("prefix",), "volumeMounts": ("subPath", "subPathExpr", "readOnly")}


def _with_field_ref_version(item: Obj) -> None:
    ref = item.get("fieldRef")
    if isinstance(ref, dict):
        ref.setdefault("apiVersion", "v1")


def _defaulted_volume(volume: Obj) -> Obj:
    """A volume as the API server stores it (the defaults it adds to the common sources)."""
    for source in ("configMap", "secret", "downwardAPI", "projected"):
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", _DEFAULT_MODE)
    if isinstance(volume.get("downwardAPI"), dict):
        for item in volume["downwardAPI"].get("items") or []:
            if isinstance(item, dict):
                _with_field_ref_version(item)
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    return volume


def defaulted(field: str, item: Obj) -> Obj:
    """``item`` of ``field`` as the API server would store it (a copy)."""
    out = copy.deepcopy(item)
    for name in _OMIT_EMPTY.get(field, ()):
        if out.get(name) in ("", False):  # omitempty: the API server drops them
            del out[name]
    if field == "env" and isinstance(out.get("valueFrom"), dict):
        _with_field_ref_version(out["valueFrom"])
    if field == "volumes":
        _defaulted_volume(out)
    return out


def _spec(field: str, item: Obj) -> dict[str, Any]:
    """What the template needs of one item: its value as stored, its keys, how to find it in a pod."""
    from kinitiras_py.api.injection import item_keys

    spec: dict[str, Any] = {"value": defaulted(field, item), "keys": item_keys(field, item)}
    if field == "envFrom":
        spec["source"] = "configMapRef" if isinstance(item.get("configMapRef"), dict) else "secretRef"
        spec["name"] = str(item[spec["source"]].get("name"))
        spec["prefix"] = str(item.get("prefix") or "")
    else:
        # (key, value) pairs; an item of the pod with any of them holds one of the item's keys
        spec["match"] = [[key, item.get(key)] for key in ("name", "mountPath") if key in item]
    return spec


def render_inject(template: OverrideRuleTemplate, path: str, render: Callable[..., str]) -> str:
    """CEL source of an inject template (``render`` renders a template file with a context)."""
    block = template.inject
    if block is None:
        raise PolicyError(f"{path}.inject", "type inject needs inject (env, envFrom, volumeMounts or volumes)")
    written: dict[str, Sequence[Model]] = {"env": block.env, "envFrom": block.env_from,
                                           "volumeMounts": block.volume_mounts, "volumes": block.volumes}
    items: dict[str, list[dict[str, Any]]] = {}
    for field in (*CONTAINER_FIELDS, "volumes"):
        entries = written[field]
        if any(entry is None for entry in entries):
            raise PolicyError(f"{path}.inject.{field}", "must be a list of objects")
        # Each item is stored into the pod as written (its fields, their order).
        items[field] = [_spec(field, entry.raw) for entry in entries]
    if not any(items.values()):
        raise PolicyError(f"{path}.inject", "nothing to inject: set env, envFrom, volumeMounts or volumes")
    return render("inject.cel.j2", names=template.container_names, items=items,
                  override=block.on_conflict == "Override", fields=CONTAINER_FIELDS, exclude=EXCLUDE_ANNOTATIONS,
                  mirror=MIRROR_ANNOTATION)


MAX_KEY_NAME = 63
"""Longest name part of an annotation key (the marker's ``inject-<policy name>``)."""


def marker_key(kind: str, name: str) -> str:
    """The annotation naming an applied inject policy; cluster policies get their own prefix."""
    prefix = "cluster-inject-" if kind == "ClusterOverridePolicy" else "inject-"
    return f"{GROUP}/{prefix}{name}"


def marker_problem(kind: str, name: str) -> str | None:
    """Why the marker annotation of this policy cannot be written (a name too long), or None."""
    part = marker_key(kind, name).split("/", 1)[1]
    if len(part) > MAX_KEY_NAME:
        return (f"an inject policy marks the pods it changes with the annotation {part!r}, whose name "
                f"part may have at most {MAX_KEY_NAME} characters: shorten the policy name to at most "
                f"{MAX_KEY_NAME - len(part) + len(name)}")
    return None


def check_marker(kind: str, name: str) -> None:
    """Refuse a policy name too long for the annotation that marks the pods it injects."""
    problem = marker_problem(kind, name)
    if problem is not None:
        raise PolicyError("metadata.name", problem)
