"""Origin overriders: typed changes to native fields (labels, tolerations, resources, ...).

Differences from kinitiras (behaviour spec §7, §12.3), all deliberate:

* entries apply in order and each sees the previous one's result (kinitiras computed all of
  them from one snapshot, so the last entry of a type silently dropped the earlier ones);
* pod-level types work on every built-in pod-bearing kind (``engine.workloads``), not only
  Pod and Deployment;
* ``add`` and ``replace`` both set hostNetwork, schedulerName, affinity and
  topologySpreadConstraints, and ``remove`` deletes them (kinitiras errored on add/remove for
  hostNetwork and schedulerName);
* ``resourceRequirements`` accepts ``remove`` (deletes the container's resources);
* bad factors, bad quantities and out-of-range container indexes are errors, not panics;
  any resource name can be oversold (cpu rounds down to 1m, the rest to whole units);
* a map or list that ends up empty, or an empty schedulerName, removes the field instead of
  writing ``null`` or ``""``.

``replace: true`` (maps and tolerations) sets exactly the policy value; ``remove`` ignores it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

from kinitiras_py.base.errors import PolicyError, QuantityError, RuleError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine import origin_values as values
from kinitiras_py.engine import workloads

_OPERATIONS = ("add", "replace", "remove")
_METADATA_TYPES = frozenset({"annotations", "labels"})
_CPU_STEP = Decimal("0.001")
_UNIT_STEP = Decimal(1)


class _Failure(Exception):
    """A valid entry cannot be applied to this object; ``apply_origin`` makes it a RuleError."""


def _kind(obj: Obj) -> str:
    kind = str(obj.get("kind") or "an object without kind")
    # A built-in kind name in the wrong group needs its apiVersion to make sense.
    return f"{kind} ({obj.get('apiVersion')})" if kind in workloads.POD_TEMPLATE_PATHS else kind


def _holder(obj: Obj, type_: str, create: bool = False) -> Obj | None:
    """The dict that holds ``type_``'s field: metadata or the pod spec (None when absent)."""
    if type_ in _METADATA_TYPES:
        meta = obj.get("metadata")
        if meta is None and create:
            meta = obj["metadata"] = {}
        if meta is not None and not isinstance(meta, dict):
            raise _Failure("metadata is not an object")
        return meta
    if not workloads.is_pod_bearing(obj):
        raise _Failure(f"origin type '{type_}' needs a pod-bearing kind; got {_kind(obj)}")
    spec = workloads.pod_spec(obj, create=create)
    if spec is None and create:
        raise _Failure(f"the pod spec at {workloads.pod_spec_pointer(obj)} is not an object")
    return spec


def _current(obj: Obj, field: str, kind: type) -> Any:
    """The current value of ``field`` (the field is named like its type), or an empty one."""
    holder = _holder(obj, field)
    value = None if holder is None else holder.get(field)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise _Failure(f"{field} is not {'an object' if kind is dict else 'a list'}")
    return value


def _store(obj: Obj, field: str, value: JSON) -> None:
    """Set ``field``; an absent or empty map, list or string removes it instead."""
    if value is None or (isinstance(value, dict | list | str) and not value):
        holder = _holder(obj, field)
        if holder is not None:
            holder.pop(field, None)
        return
    holder = _holder(obj, field, create=True)
    assert holder is not None  # _holder(create=True) raises rather than return None
    holder[field] = value


def _apply_map(obj: Obj, entry: Obj) -> None:
    field, payload = entry["type"], entry[entry["type"]]
    current: Obj = _current(obj, field, dict)
    if entry["operation"] == "remove":
        result = {k: v for k, v in current.items() if k not in payload}
    elif entry.get("replace"):
        result = dict(payload)
    else:
        result = {**current, **payload}
    _store(obj, field, result)


def _apply_set(obj: Obj, entry: Obj) -> None:
    field = entry["type"]
    _store(obj, field, None if entry["operation"] == "remove" else copy.deepcopy(entry[field]))


def _container(obj: Obj, entry: Obj) -> Obj:
    _holder(obj, entry["type"])  # rejects kinds without a pod spec
    found = workloads.containers(obj, include_init=False)
    index = entry.get("containerCount") or 0
    if index >= len(found):
        raise _Failure(f"containerCount {index} out of range: the pod spec has {len(found)} containers")
    return found[index][2]


def _apply_requirements(obj: Obj, entry: Obj) -> None:
    container = _container(obj, entry)
    if entry["operation"] == "remove":
        container.pop("resources", None)
        return
    resources: Obj = {}
    for key, value in entry["resourceRequirements"].items():
        if key in ("limits", "requests"):
            resources[key] = {name: str(values.parse_quantity(raw)) for name, raw in value.items()}
        else:
            resources[key] = copy.deepcopy(value)
    container["resources"] = resources


def _apply_oversell(obj: Obj, entry: Obj) -> None:
    resources = _container(obj, entry).get("resources")
    if not isinstance(resources, dict):
        return
    for section, factors in entry["resourcesOversell"].items():
        current = resources.get(section)
        if not isinstance(current, dict):
            continue
        for name, raw in factors.items():
            if current.get(name) is None:
                continue
            step = _CPU_STEP if name == "cpu" else _UNIT_STEP
            try:
                quantity = values.parse_quantity(current[name])
                if quantity.sign() != 0:
                    current[name] = str(quantity.scaled(values.parse_factor(raw), step))
            except QuantityError as e:  # a bad quantity in the object, or an absurd magnitude
                raise _Failure(f"resources.{section}.{name}: {e}") from None


def _identity(toleration: Obj) -> tuple[str, str, str, str]:
    # tolerationSeconds is not part of the identity; an empty operator means Equal.
    return (toleration.get("key") or "", toleration.get("operator") or "Equal",
            toleration.get("value") or "", toleration.get("effect") or "")


def _apply_tolerations(obj: Obj, entry: Obj) -> None:
    current: list[Any] = _current(obj, "tolerations", list)
    if not all(isinstance(t, dict) for t in current):
        raise _Failure("tolerations holds an item that is not an object")
    policy: dict[tuple[str, str, str, str], Obj] = {}
    for item in entry["tolerations"]:
        policy.setdefault(_identity(item), item)  # the first of duplicate policy items wins
    kept = [t for t in current if _identity(t) not in policy]
    if entry["operation"] == "remove":
        result = kept
    else:
        fresh = [copy.deepcopy(t) for t in policy.values()]
        result = fresh if entry.get("replace") else fresh + kept
    _store(obj, "tolerations", result)


class _Type(NamedTuple):
    payload: str
    operations: tuple[str, ...]
    remove_needs_payload: bool
    check: Callable[[JSON, str], values.Errors]
    apply: Callable[[Obj, Obj], None]


_TYPES: dict[str, _Type] = {
    "annotations": _Type("annotations", _OPERATIONS, True, values.string_map, _apply_map),
    "labels": _Type("labels", _OPERATIONS, True, values.string_map, _apply_map),
    "nodeSelector": _Type("nodeSelector", _OPERATIONS, True, values.string_map, _apply_map),
    "hostNetwork": _Type("hostNetwork", _OPERATIONS, False, values.of_type(bool, "a boolean"), _apply_set),
    "schedulerName": _Type("schedulerName", _OPERATIONS, False, values.of_type(str, "a string"), _apply_set),
    "affinity": _Type("affinity", _OPERATIONS, False, values.of_type(dict, "an object"), _apply_set),
    "topologySpreadConstraints": _Type("topologySpreadConstraints", _OPERATIONS, False, values.object_list,
                                       _apply_set),
    "resourceRequirements": _Type("resourceRequirements", _OPERATIONS, False, values.resources,
                                  _apply_requirements),
    # Scaling has no inverse, so there is nothing to remove.
    "resourceOversell": _Type("resourcesOversell", ("add", "replace"), True, values.oversell, _apply_oversell),
    "tolerations": _Type("tolerations", _OPERATIONS, True, values.tolerations, _apply_tolerations),
}
_TYPE_NAMES = tuple(_TYPES)
_RESOURCE_TYPES = ("resourceRequirements", "resourceOversell")


def _check_entry(entry: JSON, path: str) -> values.Errors:
    """Everything wrong with one ``origin[]`` entry on its own."""
    if not isinstance(entry, dict):
        return [PolicyError(path, "must be an object")]
    errors: values.Errors = []
    type_, operation = entry.get("type"), entry.get("operation")
    spec = _TYPES.get(type_) if isinstance(type_, str) else None
    if spec is None:
        errors.append(PolicyError(f"{path}.type", values.unsupported(type_, _TYPE_NAMES)))
    if operation not in _OPERATIONS:
        errors.append(PolicyError(f"{path}.operation", values.unsupported(operation, _OPERATIONS)))
    elif spec is not None and operation not in spec.operations:
        errors.append(PolicyError(f"{path}.operation",
                                  f"operation {operation!r} is not supported for type {type_!r}; "
                                  f"supported: {', '.join(repr(o) for o in spec.operations)}"))
    if entry.get("replace") is not None:
        errors += values.of_type(bool, "a boolean")(entry["replace"], f"{path}.replace")
    count = entry.get("containerCount")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        errors.append(PolicyError(f"{path}.containerCount", "must be a non-negative integer"))
    if spec is None:
        return errors
    payload = entry.get(spec.payload)
    if payload is not None:
        errors += spec.check(payload, f"{path}.{spec.payload}")
    elif operation in spec.operations and (operation != "remove" or spec.remove_needs_payload):
        errors.append(PolicyError(f"{path}.{spec.payload}",
                                  f"required for type {type_!r} with operation {operation!r}"))
    return errors


def validate_origin(entries: list[Obj], path: str) -> list[PolicyError]:
    """Every problem in a rule's ``overriders.origin`` list; ``path`` is that list's field path.

    Besides each entry on its own, kinitiras' rule holds: one rule may not both set
    (resourceRequirements) and oversell (resourceOversell) the same container.
    """
    if not isinstance(entries, list):
        return [PolicyError(path, "must be a list")]
    errors: values.Errors = []
    first_of: dict[tuple[str, int], int] = {}  # (type, containerCount) -> first entry index
    for i, entry in enumerate(entries):
        errors += _check_entry(entry, f"{path}[{i}]")
        if not isinstance(entry, dict) or entry.get("type") not in _RESOURCE_TYPES:
            continue
        count = entry.get("containerCount") or 0
        if type(count) is not int:  # already reported; bool would alias 0 and 1
            continue
        first_of.setdefault((entry["type"], count), i)
        other = _RESOURCE_TYPES[1 - _RESOURCE_TYPES.index(entry["type"])]
        if (other, count) in first_of:
            errors.append(PolicyError(
                f"{path}[{i}].containerCount",
                f"container {count} is already changed by {other} entry {path}[{first_of[other, count]}]; "
                "resourceRequirements and resourceOversell may not target the same container in one rule"))
    return errors


def apply_origin(obj: Obj, entries: list[Obj], policy: str, rule: int) -> None:
    """Apply a rule's ``overriders.origin`` entries to ``obj`` in place, in order.

    Each entry sees the result of the previous ones. An invalid entry, or one that cannot
    apply to this object (wrong kind, container index out of range, ...), raises RuleError
    naming ``policy``, ``rule`` and the entry; ``obj`` may then be partly changed, so the
    caller applies this to a copy it can throw away.
    """
    for i, entry in enumerate(entries):
        where = f"origin[{i}]"
        # Admission validates policies, but one stored while the webhook was down was not.
        errors = _check_entry(entry, where)
        if errors:
            raise RuleError(policy, rule, str(errors[0]))
        try:
            _TYPES[entry["type"]].apply(obj, entry)
        except _Failure as e:
            raise RuleError(policy, rule, f"{where}: {e}") from None
