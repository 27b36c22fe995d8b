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
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

from kinitiras_py.base.errors import PolicyError, QuantityError, RuleError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine import workloads
from kinitiras_py.engine.evaluation.quantity import Quantity

_OPERATIONS = ("add", "replace", "remove")
_METADATA_TYPES = frozenset({"annotations", "labels"})
_CPU_STEP = Decimal("0.001")
_UNIT_STEP = Decimal(1)
_FACTOR = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_OPERATORS = ("Equal", "Exists")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

Errors = list[PolicyError]


class _Failure(Exception):
    """A valid entry cannot be applied to this object; ``apply_origin`` makes it a RuleError."""


def _unsupported(value: object, allowed: tuple[str, ...]) -> str:
    choices = ", ".join(repr(a) for a in allowed)
    if value is None or value == "":
        return f"required; supported values: {choices}"
    return f"unsupported value {value!r}; supported values: {choices}"


def _string_map(value: JSON, path: str) -> Errors:
    if not isinstance(value, dict):
        return [PolicyError(path, "must be a map of strings")]
    return [PolicyError(f"{path}.{k}", "must be a string") for k, v in value.items()
            if not isinstance(v, str)]


def _of_type(kind: type, label: str) -> Callable[[JSON, str], Errors]:
    def check(value: JSON, path: str) -> Errors:
        return [] if isinstance(value, kind) else [PolicyError(path, f"must be {label}")]
    return check


def _object_list(value: JSON, path: str) -> Errors:
    if not isinstance(value, list):
        return [PolicyError(path, "must be a list of objects")]
    return [PolicyError(f"{path}[{i}]", "must be an object") for i, v in enumerate(value)
            if not isinstance(v, dict)]


def _parse_quantity(value: JSON) -> Quantity:
    """Parse a quantity written as a string or a JSON number (as the API server accepts)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"invalid quantity {value!r}")
    return Quantity.parse(str(value))


def _resources(value: JSON, path: str) -> Errors:
    if not isinstance(value, dict):
        return [PolicyError(path, "must be an object")]
    errors: Errors = []
    for key, items in value.items():
        if key == "claims":
            errors += _object_list(items, f"{path}.claims")
        elif key not in ("limits", "requests"):
            errors.append(PolicyError(f"{path}.{key}", "unknown field; expected limits, requests or claims"))
        elif not isinstance(items, dict):
            errors.append(PolicyError(f"{path}.{key}", "must be a map of quantities"))
        else:
            for name, raw in items.items():
                try:
                    _parse_quantity(raw)
                except QuantityError:
                    errors.append(PolicyError(f"{path}.{key}.{name}", f"invalid quantity {raw!r}"))
    return errors


def _parse_factor(raw: JSON) -> Decimal:
    """An oversell factor: a decimal string with 0 < factor <= 1, else ValueError."""
    if not isinstance(raw, str):
        raise ValueError(f"factor {raw!r} must be a decimal string, e.g. \"0.5\"")
    if not _FACTOR.fullmatch(raw):
        raise ValueError(f"factor {raw!r} is not a decimal number")
    factor = Decimal(raw)
    if not 0 < factor <= 1:
        raise ValueError(f"factor {raw!r} is out of range: must be > 0 and <= 1")
    return factor


def _oversell(value: JSON, path: str) -> Errors:
    if not isinstance(value, dict):
        return [PolicyError(path, "must be an object with requests and/or limits")]
    errors: Errors = []
    for key, factors in value.items():
        if key not in ("limits", "requests"):
            errors.append(PolicyError(f"{path}.{key}", "unknown field; expected limits or requests"))
        elif not isinstance(factors, dict):
            errors.append(PolicyError(f"{path}.{key}", "must be a map of resource name to factor"))
        else:
            for name, raw in factors.items():
                try:
                    _parse_factor(raw)
                except ValueError as e:
                    errors.append(PolicyError(f"{path}.{key}.{name}", str(e)))
    return errors


def _qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``[prefix/]name``), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return "a qualified name has at most one '/'"
    name = parts[-1]
    if len(parts) == 2 and not (parts[0] and len(parts[0]) <= 253 and _DNS_SUBDOMAIN.fullmatch(parts[0])):
        return "the prefix must be a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    if not (len(name) <= 63 and _NAME.fullmatch(name)):
        return ("the name part must be at most 63 characters of alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric")
    return None


def _toleration(item: Obj, path: str) -> Errors:
    """Kubernetes' toleration rules (ValidateTolerations)."""
    fields = {f: "" if item.get(f) is None else item[f] for f in ("key", "operator", "value", "effect")}
    errors = [PolicyError(f"{path}.{f}", "must be a string") for f, v in fields.items()
              if not isinstance(v, str)]
    if errors:
        return errors
    key, operator, value, effect = fields.values()
    if key and (problem := _qualified_name_problem(key)):
        errors.append(PolicyError(f"{path}.key", f"invalid key {key!r}: {problem}"))
    if operator not in ("", *_OPERATORS):
        errors.append(PolicyError(f"{path}.operator", _unsupported(operator, _OPERATORS)))
    elif not key and operator != "Exists":
        errors.append(PolicyError(f"{path}.operator", "must be 'Exists' when key is empty"))
    if operator == "Exists" and value:
        errors.append(PolicyError(f"{path}.value", "must be empty when operator is 'Exists'"))
    elif value and not (len(value) <= 63 and _NAME.fullmatch(value)):
        errors.append(PolicyError(f"{path}.value", f"invalid value {value!r}: must be a valid label value"))
    if effect and effect not in _EFFECTS:
        errors.append(PolicyError(f"{path}.effect", _unsupported(effect, _EFFECTS)))
    seconds = item.get("tolerationSeconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            errors.append(PolicyError(f"{path}.tolerationSeconds", "must be an integer"))
        if effect != "NoExecute":
            errors.append(PolicyError(f"{path}.effect", "must be 'NoExecute' when tolerationSeconds is set"))
    return errors


def _tolerations(value: JSON, path: str) -> Errors:
    errors = _object_list(value, path)
    if not errors:
        for i, item in enumerate(value):
            errors += _toleration(item, f"{path}[{i}]")
    return errors


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
            resources[key] = {name: str(_parse_quantity(raw)) for name, raw in value.items()}
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
                quantity = _parse_quantity(current[name])
                if quantity.sign() != 0:
                    current[name] = str(quantity.scaled(_parse_factor(raw), step))
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
    check: Callable[[JSON, str], Errors]
    apply: Callable[[Obj, Obj], None]


_TYPES: dict[str, _Type] = {
    "annotations": _Type("annotations", _OPERATIONS, True, _string_map, _apply_map),
    "labels": _Type("labels", _OPERATIONS, True, _string_map, _apply_map),
    "nodeSelector": _Type("nodeSelector", _OPERATIONS, True, _string_map, _apply_map),
    "hostNetwork": _Type("hostNetwork", _OPERATIONS, False, _of_type(bool, "a boolean"), _apply_set),
    "schedulerName": _Type("schedulerName", _OPERATIONS, False, _of_type(str, "a string"), _apply_set),
    "affinity": _Type("affinity", _OPERATIONS, False, _of_type(dict, "an object"), _apply_set),
    "topologySpreadConstraints": _Type("topologySpreadConstraints", _OPERATIONS, False, _object_list,
                                       _apply_set),
    "resourceRequirements": _Type("resourceRequirements", _OPERATIONS, False, _resources,
                                  _apply_requirements),
    # Scaling has no inverse, so there is nothing to remove.
    "resourceOversell": _Type("resourcesOversell", ("add", "replace"), True, _oversell, _apply_oversell),
    "tolerations": _Type("tolerations", _OPERATIONS, True, _tolerations, _apply_tolerations),
}
_TYPE_NAMES = tuple(_TYPES)
_RESOURCE_TYPES = ("resourceRequirements", "resourceOversell")


def _check_entry(entry: JSON, path: str) -> Errors:
    """Everything wrong with one ``origin[]`` entry on its own."""
    if not isinstance(entry, dict):
        return [PolicyError(path, "must be an object")]
    errors: Errors = []
    type_, operation = entry.get("type"), entry.get("operation")
    spec = _TYPES.get(type_) if isinstance(type_, str) else None
    if spec is None:
        errors.append(PolicyError(f"{path}.type", _unsupported(type_, _TYPE_NAMES)))
    if operation not in _OPERATIONS:
        errors.append(PolicyError(f"{path}.operation", _unsupported(operation, _OPERATIONS)))
    elif spec is not None and operation not in spec.operations:
        errors.append(PolicyError(f"{path}.operation",
                                  f"operation {operation!r} is not supported for type {type_!r}; "
                                  f"supported: {', '.join(repr(o) for o in spec.operations)}"))
    if entry.get("replace") is not None:
        errors += _of_type(bool, "a boolean")(entry["replace"], f"{path}.replace")
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
    errors: Errors = []
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
