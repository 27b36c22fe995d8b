"""What an origin overrider entry may carry: checks of each type's payload, with field paths.

Only :mod:`.origin` uses this; it pairs these checks with the code that applies each type.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

from kinitiras_py.base.errors import PolicyError, QuantityError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.evaluation.quantity import Quantity

_FACTOR = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_OPERATORS = ("Equal", "Exists")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

Errors = list[PolicyError]


def unsupported(value: object, allowed: tuple[str, ...]) -> str:
    """The message for a missing or unknown enum value, listing the supported ones."""
    choices = ", ".join(repr(a) for a in allowed)
    if value is None or value == "":
        return f"required; supported values: {choices}"
    return f"unsupported value {value!r}; supported values: {choices}"


def string_map(value: JSON, path: str) -> Errors:
    """Problems of a map whose values must be strings (labels, annotations, nodeSelector)."""
    if not isinstance(value, dict):
        return [PolicyError(path, "must be a map of strings")]
    return [PolicyError(f"{path}.{k}", "must be a string") for k, v in value.items()
            if not isinstance(v, str)]


def of_type(kind: type, label: str) -> Callable[[JSON, str], Errors]:
    """A check that a value is of ``kind``, described as ``label`` in the message."""
    def check(value: JSON, path: str) -> Errors:
        return [] if isinstance(value, kind) else [PolicyError(path, f"must be {label}")]
    return check


def object_list(value: JSON, path: str) -> Errors:
    """Problems of a value that must be a list of objects."""
    if not isinstance(value, list):
        return [PolicyError(path, "must be a list of objects")]
    return [PolicyError(f"{path}[{i}]", "must be an object") for i, v in enumerate(value)
            if not isinstance(v, dict)]


def parse_quantity(value: JSON) -> Quantity:
    """Parse a quantity written as a string or a JSON number (as the API server accepts)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"invalid quantity {value!r}")
    return Quantity.parse(str(value))


def _per_resource(value: dict[str, JSON], path: str, expected: str, what: str,
                  check: Callable[[JSON], object], claims: bool = False) -> Errors:
    """Problems of ``limits``/``requests`` maps of resource name to a value ``check`` accepts
    (it raises ValueError, or QuantityError, which is one, with the reason); with ``claims``,
    also of a ``claims`` list of objects."""
    errors: Errors = []
    for key, items in value.items():
        if claims and key == "claims":
            errors += object_list(items, f"{path}.claims")
        elif key not in ("limits", "requests"):
            errors.append(PolicyError(f"{path}.{key}", f"unknown field; expected {expected}"))
        elif not isinstance(items, dict):
            errors.append(PolicyError(f"{path}.{key}", f"must be a map of {what}"))
        else:
            for name, raw in items.items():
                try:
                    check(raw)
                except ValueError as e:
                    errors.append(PolicyError(f"{path}.{key}.{name}", str(e)))
    return errors


def _quantity(raw: JSON) -> None:
    try:
        parse_quantity(raw)
    except QuantityError:
        raise QuantityError(f"invalid quantity {raw!r}") from None


def resources(value: JSON, path: str) -> Errors:
    """Problems of a resourceRequirements payload (limits, requests, claims)."""
    if not isinstance(value, dict):
        return [PolicyError(path, "must be an object")]
    return _per_resource(value, path, "limits, requests or claims", "quantities", _quantity, claims=True)


def parse_factor(raw: JSON) -> Decimal:
    """An oversell factor: a decimal string with 0 < factor <= 1, else ValueError."""
    if not isinstance(raw, str):
        raise ValueError(f"factor {raw!r} must be a decimal string, e.g. \"0.5\"")
    if not _FACTOR.fullmatch(raw):
        raise ValueError(f"factor {raw!r} is not a decimal number")
    factor = Decimal(raw)
    if not 0 < factor <= 1:
        raise ValueError(f"factor {raw!r} is out of range: must be > 0 and <= 1")
    return factor


def oversell(value: JSON, path: str) -> Errors:
    """Problems of a resourceOversell payload (factors per resource name)."""
    if not isinstance(value, dict):
        return [PolicyError(path, "must be an object with requests and/or limits")]
    return _per_resource(value, path, "limits or requests", "resource name to factor", parse_factor)


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


def toleration(item: Obj, path: str) -> Errors:
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
        errors.append(PolicyError(f"{path}.operator", unsupported(operator, _OPERATORS)))
    elif not key and operator != "Exists":
        errors.append(PolicyError(f"{path}.operator", "must be 'Exists' when key is empty"))
    if operator == "Exists" and value:
        errors.append(PolicyError(f"{path}.value", "must be empty when operator is 'Exists'"))
    elif value and not (len(value) <= 63 and _NAME.fullmatch(value)):
        errors.append(PolicyError(f"{path}.value", f"invalid value {value!r}: must be a valid label value"))
    if effect and effect not in _EFFECTS:
        errors.append(PolicyError(f"{path}.effect", unsupported(effect, _EFFECTS)))
    seconds = item.get("tolerationSeconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            errors.append(PolicyError(f"{path}.tolerationSeconds", "must be an integer"))
        if effect != "NoExecute":
            errors.append(PolicyError(f"{path}.effect", "must be 'NoExecute' when tolerationSeconds is set"))
    return errors


def tolerations(value: JSON, path: str) -> Errors:
    """Problems of a tolerations payload, entry by entry."""
    errors = object_list(value, path)
    if not errors:
        for i, item in enumerate(value):
            errors += toleration(item, f"{path}[{i}]")
    return errors
