"""Resource, label and field selectors, on policy spec fragments as written (camelCase dicts).

A ResourceSelector is ``{apiVersion, kind, namespace?, name?, labelSelector?, fieldSelector?}``.

``apiVersion`` forms: ``*`` (any), ``group/version`` (exact), ``group/*`` (any version of the
group), ``v1``-like (``v\\d+`` with an optional ``alpha``/``beta`` suffix: the core group at
that version), any other string without ``/`` (a group name: any version of it). A missing
``apiVersion`` or ``kind`` matches anything, as does ``kind: "*"``; kinds are case-sensitive.

A field selector is ``{matchFields: {path: value}, matchExpressions: [{field, operator,
value: [...]}]}`` (``value`` is a list, as in kinitiras), with paths in ``fieldpath`` syntax.
Fields compare as text: strings as themselves, other values (numbers, booleans, objects,
lists) as their compact JSON text, so ``3``, ``true`` and ``1.5`` are written as such in
selectors. A JSON ``null`` counts as absent.

Invalid selectors match nothing; ``validate_*`` report why, with the field path of each problem;
``selector_problems`` reports the same from a selector's model (what the compiler reads).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson

from kinitiras_py.api.core import LabelSelector
from kinitiras_py.api.selectors import FieldSelector
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.objects import fieldpath

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_WITH_VALUES = frozenset({"In", "NotIn"})
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_CORE_VERSION = re.compile(r"v\d+((alpha|beta)\d+)?")
_ANY = "*"


# --- validation ---------------------------------------------------------------------------


def _name_problem(name: str) -> str | None:
    if not name:
        return "name part must not be empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME.fullmatch(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def qualified_name_problem(key: object) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``[prefix/]name``), or None."""
    if not isinstance(key, str):
        return f"must be a string, got {type(key).__name__}"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix:
            return "must be a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        if not prefix:
            return "prefix part must not be empty"
        if len(prefix) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in prefix.split(".")):
            return ("prefix part must be a lowercase DNS subdomain of at most 253 characters "
                    "(e.g. 'example.com')")
    return _name_problem(name)


def _label_value_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _NAME.fullmatch(value):
        return ("must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def _operator_errors(operator: object, values: object, values_key: str, path: str) -> list[PolicyError]:
    """Check ``operator`` and the presence of its values (``values_key``) in one match expression."""
    if operator not in OPERATORS:
        reason = f"unknown operator {operator!r} (want In, NotIn, Exists or DoesNotExist)"
        return [PolicyError(f"{path}.operator", reason)]
    if values is not None and not isinstance(values, list):
        return [PolicyError(f"{path}.{values_key}", "must be a list")]
    if operator in _WITH_VALUES and not values:
        return [PolicyError(f"{path}.{values_key}", f"must be non-empty when operator is {operator}")]
    if operator not in _WITH_VALUES and values:
        return [PolicyError(f"{path}.{values_key}", f"must be empty when operator is {operator}")]
    return []


def _expressions(sel: Obj, path: str, errors: list[PolicyError]) -> Iterator[tuple[str, Obj]]:
    """Yield the well-formed ``matchExpressions`` entries with their paths.

    Problems go to ``errors`` as iteration reaches them, so errors stay in document order.
    """
    exprs = sel.get("matchExpressions")
    if exprs is not None and not isinstance(exprs, list):
        errors.append(PolicyError(f"{path}.matchExpressions", "must be a list"))
        return
    for i, req in enumerate(exprs or ()):
        where = f"{path}.matchExpressions[{i}]"
        if isinstance(req, dict):
            yield where, req
        else:
            errors.append(PolicyError(where, "must be an object"))


def annotation_key_problem(key: object) -> str | None:
    """Why ``key`` cannot be an annotation key (it must be a qualified name, as a label key), or None."""
    problem = qualified_name_problem(key)
    return f"invalid annotation key {key!r}: {problem}" if problem else None


def validate_label_selector(sel: dict[str, Any], path: str) -> list[PolicyError]:
    """Every problem with a Kubernetes label selector, each with its field path."""
    return _validate(sel, path, "matchLabels", _match_labels_errors, lambda req, where: _label_requirement_errors(
        req.get("key"), req.get("operator"), req.get("values"), where))


def _validate(sel: object, path: str, map_key: str,
              map_errors: Callable[[Mapping[Any, object], str], list[PolicyError]],
              requirement_errors: Callable[[Obj, str], list[PolicyError]]) -> list[PolicyError]:
    """A selector as written: its map (``map_key``) and its match expressions, each checked by the
    given checks once its shape is right."""
    if not isinstance(sel, dict):
        return [PolicyError(path, "must be an object")]
    errors: list[PolicyError] = []
    entries = sel.get(map_key)
    if entries is not None and not isinstance(entries, dict):
        errors.append(PolicyError(f"{path}.{map_key}", "must be an object"))
    errors += map_errors(entries if isinstance(entries, dict) else {}, path)
    for where, req in _expressions(sel, path, errors):
        errors += requirement_errors(req, where)
    return errors


def selector_problems(sel: LabelSelector | FieldSelector, path: str) -> list[PolicyError]:
    """Every problem with a label or field selector's model beyond its schema, each with its field
    path (an expression that is not even an object, None in a partial model, has its model error)."""
    if isinstance(sel, LabelSelector):
        errors = _match_labels_errors(sel.match_labels, path)
        written = [None if r is None else (r.key, r.operator, r.values) for r in sel.match_expressions]
        requirement_errors = _label_requirement_errors
    else:
        errors = _match_fields_errors(sel.match_fields, path)
        written = [None if r is None else (r.field, r.operator, r.value) for r in sel.match_expressions]
        requirement_errors = _field_requirement_errors
    for i, req in enumerate(written):
        if req is not None:
            errors += requirement_errors(*req, f"{path}.matchExpressions[{i}]")
    return errors


def _match_labels_errors(labels: Mapping[Any, object], path: str) -> list[PolicyError]:
    errors = []
    for key, value in labels.items():
        if problem := qualified_name_problem(key):
            errors.append(PolicyError(f"{path}.matchLabels", f"invalid label key {key!r}: {problem}"))
        if problem := _label_value_problem(value):
            reason = f"invalid value {value!r} for label {key!r}: {problem}"
            errors.append(PolicyError(f"{path}.matchLabels", reason))
    return errors


def _label_requirement_errors(key: object, operator: object, values: object, where: str, /) -> list[PolicyError]:
    errors = []
    if problem := qualified_name_problem(key):
        errors.append(PolicyError(f"{where}.key", f"invalid label key {key!r}: {problem}"))
    errors += _operator_errors(operator, values, "values", where)
    for j, value in enumerate(values if isinstance(values, list) else ()):
        if problem := _label_value_problem(value):
            errors.append(PolicyError(f"{where}.values[{j}]", f"invalid label value {value!r}: {problem}"))
    return errors


def _path_problem(path: object) -> str | None:
    if path is None:
        return "a field path is required"
    if not isinstance(path, str):
        return f"field path must be a string, got {type(path).__name__}"
    try:
        fieldpath.parse_path(path)
    except ValueError as err:
        return str(err)
    return None


def validate_field_selector(sel: dict[str, Any], path: str) -> list[PolicyError]:
    """Every problem with a field selector (paths, operators, values), each with its field path."""
    return _validate(sel, path, "matchFields", _match_fields_errors, lambda req, where: _field_requirement_errors(
        req.get("field"), req.get("operator"), req.get("value"), where))


def _match_fields_errors(fields: Mapping[Any, object], path: str) -> list[PolicyError]:
    errors = []
    for key, value in fields.items():
        if problem := _path_problem(key):
            errors.append(PolicyError(f"{path}.matchFields", problem))
        if isinstance(value, dict | list) or value is None:
            reason = f"value for {key!r} must be a string, number or boolean"
            errors.append(PolicyError(f"{path}.matchFields", reason))
    return errors


def _field_requirement_errors(field: object, operator: object, values: object, where: str, /) -> list[PolicyError]:
    errors = []
    if problem := _path_problem(field):
        errors.append(PolicyError(f"{where}.field", problem))
    errors += _operator_errors(operator, values, "value", where)
    for j, value in enumerate(values if isinstance(values, list) else ()):
        if isinstance(value, dict | list) or value is None:
            errors.append(PolicyError(f"{where}.value[{j}]", "must be a string, number or boolean"))
    return errors


# --- matching -----------------------------------------------------------------------------


def _requirement(operator: object, present: bool, actual: object, values: object) -> bool:
    """One In/NotIn/Exists/DoesNotExist requirement; unknown operators never match."""
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator not in _WITH_VALUES or not isinstance(values, list):
        return False
    inside = present and actual in values
    return inside if operator == "In" else not inside


def _parts(sel: dict[str, Any], mapping: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A selector's mapping (``matchLabels``/``matchFields``) and expressions; None if malformed."""
    if not isinstance(sel, dict):
        return None
    pairs, exprs = sel.get(mapping) or {}, sel.get("matchExpressions") or []
    if not isinstance(pairs, dict) or not isinstance(exprs, list):
        return None
    if not all(isinstance(req, dict) for req in exprs):
        return None
    return pairs, exprs


def match_labels(sel: dict[str, Any] | None, labels: dict[str, Any] | None) -> bool:
    """Whether ``labels`` satisfy a label selector (``matchLabels`` AND ``matchExpressions``).

    ``{}`` and None match everything; ``NotIn`` holds when the label is absent.
    """
    if sel is None:
        return True
    parts = _parts(sel, "matchLabels")
    if parts is None:
        return False
    labels = labels or {}
    pairs, exprs = parts
    if any(key not in labels or labels[key] != value for key, value in pairs.items()):
        return False
    for req in exprs:
        key = req.get("key")
        if not isinstance(key, str):
            return False
        if not _requirement(req.get("operator"), key in labels, labels.get(key), req.get("values")):
            return False
    return True


def field_text(value: JSON) -> str:
    """How a field compares in a field selector: strings as is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)  # JSON text of any int, even past orjson's 64-bit range
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _field(obj: Obj, path: object) -> str | None:
    """The text of a field, None when absent or null; ValueError for a malformed path."""
    if not isinstance(path, str):
        raise ValueError(f"field path must be a string, got {type(path).__name__}")
    found, value = fieldpath.get_path(obj, fieldpath.parse_path(path))
    return field_text(value) if found and value is not None else None


def match_fields(sel: dict[str, Any] | None, obj: Obj) -> bool:
    """Whether ``obj`` satisfies a field selector (``matchFields`` AND ``matchExpressions``)."""
    if sel is None:
        return True
    parts = _parts(sel, "matchFields")
    if parts is None:
        return False
    pairs, exprs = parts
    try:
        if any(_field(obj, path) != field_text(want) for path, want in pairs.items()):
            return False
        for req in exprs:
            text, values = _field(obj, req.get("field")), req.get("value")
            wanted = [field_text(v) for v in values] if isinstance(values, list) else values
            if not _requirement(req.get("operator"), text is not None, text, wanted):
                return False
    except ValueError:
        return False  # a malformed path
    return True


def selector_group(api_version: str) -> str | None:
    """The API group a selector's ``apiVersion`` is limited to (``""`` is core), None for any."""
    if not api_version or api_version == _ANY:
        return None
    if "/" in api_version:
        return api_version.split("/", 1)[0]
    return "" if _CORE_VERSION.fullmatch(api_version) else api_version


def _api_version_matches(pattern: str, api_version: str) -> bool:
    group = selector_group(pattern)
    if group is None:
        return True
    if pattern.endswith("/*") or ("/" not in pattern and group):
        # Group-only forms: any version of that group.
        return "/" in api_version and api_version.split("/", 1)[0] == group
    return pattern == api_version


def match_resource(sel: dict[str, Any], obj: Obj) -> bool:
    """Whether ``obj`` is selected by one ResourceSelector.

    Checked in order: apiVersion, kind, namespace (cluster-scoped objects never match a
    namespace), then a set ``name`` decides alone; otherwise the label and field selectors
    that are present must both match.
    """
    if not _api_version_matches(str(sel.get("apiVersion") or _ANY), str(obj.get("apiVersion") or "")):
        return False
    kind = sel.get("kind") or _ANY
    if kind != _ANY and kind != obj.get("kind"):
        return False
    meta = obj.get("metadata") or {}
    namespace = sel.get("namespace")
    if namespace and namespace != meta.get("namespace"):
        return False
    if name := sel.get("name"):
        return bool(name == meta.get("name"))
    labels_ok = match_labels(sel.get("labelSelector"), meta.get("labels"))
    return labels_ok and match_fields(sel.get("fieldSelector"), obj)


def match_any(selectors: list[dict[str, Any]] | None, obj: Obj) -> bool:
    """Whether any selector matches ``obj``; an empty or missing list matches everything."""
    return not selectors or any(match_resource(sel, obj) for sel in selectors)
