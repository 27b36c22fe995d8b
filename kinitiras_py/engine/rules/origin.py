"""Origin overriders: typed changes to native fields (labels, tolerations, resources, ...).

Differences from kinitiras (behaviour spec §7, §12.3), all deliberate:

* entries apply in order and each sees the previous one's result (kinitiras computed all of
  them from one snapshot, so the last entry of a type silently dropped the earlier ones);
* pod-level types work on every built-in pod-bearing kind (``engine.objects.workloads``), not only
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

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from kinitiras_py.api.overrides import OverrideRuleOrigin
from kinitiras_py.base.errors import KinitirasError, PatchError, PolicyError, QuantityError, RuleError
from kinitiras_py.base.ids import RuleId
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.objects import patching, workloads
from kinitiras_py.engine.rules import origin_values as values

_OPERATIONS = ("add", "replace", "remove")
_METADATA_TYPES = frozenset({"annotations", "labels"})
_CPU_STEP = Decimal("0.001")
_UNIT_STEP = Decimal(1)


class _Failure(KinitirasError):
    """A valid entry cannot be applied to this object; ``apply_origin`` makes it a RuleError."""


def _kind(obj: Obj) -> str:
    kind = str(obj.get("kind") or "an object without kind")
    # A built-in kind name in the wrong group needs its apiVersion to make sense.
    return f"{kind} ({obj.get('apiVersion')})" if kind in workloads.POD_TEMPLATE_PATHS else kind


def _holder_path(obj: Obj, type_: str) -> tuple[str, ...]:
    """The keys leading to the dict that holds ``type_``'s field: metadata or the pod spec."""
    if type_ in _METADATA_TYPES:
        return ("metadata",)
    path = workloads.pod_spec_path(obj)
    if path is None:
        raise _Failure(f"origin type '{type_}' needs a pod-bearing kind; got {_kind(obj)}")
    return path


def _holder(obj: Obj, type_: str) -> Obj | None:
    """The dict that holds ``type_``'s field: metadata or the pod spec (None when absent)."""
    if type_ in _METADATA_TYPES:
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise _Failure("metadata is not an object")
        return meta
    _holder_path(obj, type_)  # rejects kinds without a pod spec
    return workloads.pod_spec(obj)


def _creatable(obj: Obj, path: tuple[str, ...]) -> bool:
    """Whether every level of ``path`` is an object or missing (then the lenient add creates it)."""
    node: Any = obj
    for key in path:
        node = node.get(key)
        if node is None:
            return True
        if not isinstance(node, dict):
            return False
    return True


def _current(obj: Obj, field: str, kind: type) -> Any:
    """The current value of ``field`` (the field is named like its type), or an empty one."""
    holder = _holder(obj, field)
    value = None if holder is None else holder.get(field)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise _Failure(f"{field} is not {'an object' if kind is dict else 'a list'}")
    return value


def _store(obj: Obj, field: str, value: JSON) -> Patch:
    """Set ``field``; an absent or empty map, list or string removes it instead.

    Missing (or null) levels on the way are created by the lenient ``add``.
    """
    holder, path = _holder(obj, field), _holder_path(obj, field)
    where = patching.pointer(*path, field)
    if value is None or (isinstance(value, dict | list | str) and not value):
        return [{"op": "remove", "path": where}] if holder is not None and field in holder else []
    if holder is None and not _creatable(obj, path):
        raise _Failure(f"the pod spec at {patching.pointer(*path)} is not an object")
    return [{"op": "add", "path": where, "value": value}]


def _map_ops(obj: Obj, entry: Obj) -> Patch:
    field, payload = entry["type"], entry[entry["type"]]
    current: Obj = _current(obj, field, dict)
    if entry["operation"] == "remove":
        result = {k: v for k, v in current.items() if k not in payload}
    elif entry.get("replace"):
        result = dict(payload)
    else:
        result = {**current, **payload}
    return _store(obj, field, result)


def _set_ops(obj: Obj, entry: Obj) -> Patch:
    field = entry["type"]
    return _store(obj, field, None if entry["operation"] == "remove" else entry[field])


def _container(obj: Obj, entry: Obj) -> tuple[str, Obj]:
    """The pointer of the entry's container (``containerCount``-th regular one) and the container."""
    path = _holder_path(obj, entry["type"])  # rejects kinds without a pod spec
    found = workloads.containers(obj, include_init=False)
    index = entry.get("containerCount") or 0
    if index >= len(found):
        raise _Failure(f"containerCount {index} out of range: the pod spec has {len(found)} containers")
    field, position, container = found[index]
    return patching.pointer(*path, field, position), container


def _requirements_ops(obj: Obj, entry: Obj) -> Patch:
    where, container = _container(obj, entry)
    if entry["operation"] == "remove":
        return [{"op": "remove", "path": f"{where}/resources"}] if "resources" in container else []
    resources: Obj = {}
    for key, value in entry["resourceRequirements"].items():
        if key in ("limits", "requests"):
            resources[key] = {name: str(values.parse_quantity(raw)) for name, raw in value.items()}
        else:
            resources[key] = value
    return [{"op": "add", "path": f"{where}/resources", "value": resources}]


def _oversell_ops(obj: Obj, entry: Obj) -> Patch:
    where, container = _container(obj, entry)
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return []
    ops: Patch = []
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
                    ops.append({"op": "replace", "path": f"{where}/resources/{patching.pointer(section, name)[1:]}",
                                "value": str(quantity.scaled(values.parse_factor(raw), step))})
            except QuantityError as e:  # a bad quantity in the object, or an absurd magnitude
                raise _Failure(f"resources.{section}.{name}: {e}") from None
    return ops


def _identity(toleration: Obj) -> tuple[str, str, str, str]:
    # tolerationSeconds is not part of the identity; an empty operator means Equal.
    return (toleration.get("key") or "", toleration.get("operator") or "Equal",
            toleration.get("value") or "", toleration.get("effect") or "")


def _tolerations_ops(obj: Obj, entry: Obj) -> Patch:
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
        fresh = list(policy.values())
        result = fresh if entry.get("replace") else fresh + kept
    return _store(obj, "tolerations", result)


class _Type(NamedTuple):
    payload: str
    operations: tuple[str, ...]
    remove_needs_payload: bool
    check: Callable[[JSON, str], values.Errors]
    ops: Callable[[Obj, Obj], Patch]
    """The RFC 6902 ops that apply an entry to an object (read, never changed)."""
    in_model: Callable[[OverrideRuleOrigin], object]
    """The payload field of the entry's model (None when not written, or when it failed the model)."""


_TYPES: dict[str, _Type] = {
    "annotations": _Type("annotations", _OPERATIONS, True, values.string_map, _map_ops, lambda e: e.annotations),
    "labels": _Type("labels", _OPERATIONS, True, values.string_map, _map_ops, lambda e: e.labels),
    "nodeSelector": _Type("nodeSelector", _OPERATIONS, True, values.string_map, _map_ops,
                          lambda e: e.node_selector),
    "hostNetwork": _Type("hostNetwork", _OPERATIONS, False, values.of_type(bool, "a boolean"), _set_ops,
                         lambda e: e.host_network),
    "schedulerName": _Type("schedulerName", _OPERATIONS, False, values.of_type(str, "a string"), _set_ops,
                           lambda e: e.scheduler_name),
    "affinity": _Type("affinity", _OPERATIONS, False, values.of_type(dict, "an object"), _set_ops,
                      lambda e: e.affinity),
    "topologySpreadConstraints": _Type("topologySpreadConstraints", _OPERATIONS, False, values.object_list,
                                       _set_ops, lambda e: e.topology_spread_constraints),
    "resourceRequirements": _Type("resourceRequirements", _OPERATIONS, False, values.resources,
                                  _requirements_ops, lambda e: e.resource_requirements),
    # Scaling has no inverse, so there is nothing to remove.
    "resourceOversell": _Type("resourcesOversell", ("add", "replace"), True, values.oversell, _oversell_ops,
                              lambda e: e.resources_oversell),
    "tolerations": _Type("tolerations", _OPERATIONS, True, values.tolerations, _tolerations_ops,
                         lambda e: e.tolerations),
}
_TYPE_NAMES = tuple(_TYPES)
_RESOURCE_TYPES = ("resourceRequirements", "resourceOversell")


def _entry_problems(type_: JSON, operation: JSON, replace: JSON, count: JSON, payload: Callable[[_Type], JSON],
                    path: str) -> values.Errors:
    """Everything wrong with one ``origin[]`` entry on its own, from its fields; ``payload`` gives
    the JSON of the type's payload field (None when not written), which is checked as written
    because that is what :func:`apply_origin` applies."""
    errors: values.Errors = []
    spec = _TYPES.get(type_) if isinstance(type_, str) else None
    if spec is None:
        errors.append(PolicyError(f"{path}.type", values.unsupported(type_, _TYPE_NAMES)))
    if operation not in _OPERATIONS:
        errors.append(PolicyError(f"{path}.operation", values.unsupported(operation, _OPERATIONS)))
    elif spec is not None and operation not in spec.operations:
        errors.append(PolicyError(f"{path}.operation",
                                  f"operation {operation!r} is not supported for type {type_!r}; "
                                  f"supported: {', '.join(repr(o) for o in spec.operations)}"))
    if replace is not None:
        errors += values.of_type(bool, "a boolean")(replace, f"{path}.replace")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        errors.append(PolicyError(f"{path}.containerCount", "must be a non-negative integer"))
    if spec is None:
        return errors
    written = payload(spec)
    if written is not None:
        errors += spec.check(written, f"{path}.{spec.payload}")
    elif operation in spec.operations and (operation != "remove" or spec.remove_needs_payload):
        errors.append(PolicyError(f"{path}.{spec.payload}",
                                  f"required for type {type_!r} with operation {operation!r}"))
    return errors


def entry_problems(entry: JSON, path: str) -> values.Errors:
    """Everything wrong with one ``origin[]`` entry as it is applied: its JSON, which nothing may
    have checked (a policy stored while the webhook was down)."""
    if not isinstance(entry, dict):
        return [PolicyError(path, "must be an object")]
    return _entry_problems(entry.get("type"), entry.get("operation"), entry.get("replace"),
                           entry.get("containerCount"), lambda spec: entry.get(spec.payload), path)


def _payload_as_written(entry: OverrideRuleOrigin, json: Obj) -> Callable[[_Type], JSON]:
    """The payload of ``entry`` as written, when its model has one: a payload that failed its
    model is absent there, and the model's error says why."""
    return lambda spec: None if spec.in_model(entry) is None else json[spec.payload]


def validate_origin(entries: Sequence[OverrideRuleOrigin | None], written: Sequence[Obj | None], path: str
                    ) -> list[PolicyError]:
    """Every problem in a rule's ``overriders.origin`` list; ``path`` is that list's field path.

    ``entries`` are the entries' models, which a partial model leaves None when an entry is not
    an object, and ``written`` their JSON, which is what is applied: the model says which fields
    an entry has, and the payload is checked as written. Besides each entry on its own,
    kinitiras' rule holds: one rule may not both set (resourceRequirements) and oversell
    (resourceOversell) the same container.
    """
    errors: values.Errors = []
    first_of: dict[tuple[str, int], int] = {}  # (type, containerCount) -> first entry index
    for i, (entry, json) in enumerate(zip(entries, written, strict=True)):
        if entry is None or json is None:
            errors.append(PolicyError(f"{path}[{i}]", "must be an object"))
            continue
        errors += _entry_problems(entry.type, entry.operation, entry.replace, entry.container_count,
                                  _payload_as_written(entry, json), f"{path}[{i}]")
        # A count that failed its model is at its default (0) there: an entry whose written count
        # is not an integer is left out of the conflicts instead (the model's error names it).
        if entry.type not in _RESOURCE_TYPES or type(json.get("containerCount") or 0) is not int:
            continue
        count = entry.container_count
        first_of.setdefault((entry.type, count), i)
        other = _RESOURCE_TYPES[1 - _RESOURCE_TYPES.index(entry.type)]
        if (other, count) in first_of:
            errors.append(PolicyError(
                f"{path}[{i}].containerCount",
                f"container {count} is already changed by {other} entry {path}[{first_of[other, count]}]; "
                "resourceRequirements and resourceOversell may not target the same container in one rule"))
    return errors


def apply_origin(obj: Obj, entries: list[Obj], rule: RuleId,
                 apply: Callable[[Patch], Obj] | None = None) -> Obj:
    """Apply a rule's ``overriders.origin`` entries to ``obj``, in order; return the result.

    Each entry becomes RFC 6902 ops computed from the result of the previous ones. ``apply``
    applies them and returns the document they produced (an overriding draft, whose document
    ``obj`` must be); without it they are applied to ``obj`` in place. An invalid entry, or one
    that cannot apply to this object (wrong kind, container index out of range, ...), raises
    RuleError naming ``rule`` and the entry; the document may then be partly
    changed, so the caller applies this to a copy it can throw away.
    """
    for i, entry in enumerate(entries):
        where = f"origin[{i}]"
        # Admission validates policies, but one stored while the webhook was down was not.
        errors = entry_problems(entry, where)
        if errors:
            raise RuleError(rule, str(errors[0]))
        try:
            ops = _TYPES[entry["type"]].ops(obj, entry)
            obj = patching.apply_ops_in_place(obj, ops) if apply is None else apply(ops)
        except (_Failure, PatchError) as e:
            raise RuleError(rule, f"{where}: {e}") from None
    return obj
