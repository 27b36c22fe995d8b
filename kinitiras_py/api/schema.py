"""A tiny declarative schema layer: declare a model once, get both its parser and its OpenAPI schema.

A model is a frozen, keyword-only dataclass deriving from :class:`Model`, whose fields are declared
with :func:`prop`. The field's Python type gives the JSON type, and ``Annotated`` extras narrow it:

=================================  =====================================================
Python type                        JSON / OpenAPI
=================================  =====================================================
``str``, ``int``, ``bool``         string, integer, boolean
``Annotated[str, OneOf(values)]``  string with ``enum``
``Annotated[..., Pattern(...)]``   ``pattern`` (checked by the parser too)
``Annotated[..., Format(name)]``   ``format`` (the parser checks int32/int64 ranges)
``Annotated[..., Check(fn)]``      nothing (checked by the parser only)
``int | str``                      int-or-string (``x-kubernetes-int-or-string``)
``list[X]``, ``dict[str, X]``      array, object with ``additionalProperties``
``Any``                            any JSON (``x-kubernetes-preserve-unknown-fields``)
a ``Model`` subclass               object with ``properties`` and ``required``
=================================  =====================================================

``X | None`` is the same as ``X``: absence is expressed by the field's default. The JSON name of a
field is its attribute name in camelCase (a trailing ``_`` is dropped, so ``from_`` is ``from``).

From that single declaration, :func:`parse` builds a model from decoded JSON and reports *every*
problem with its field path (``spec.overrideRules[1].overriders.template.type``), and
:func:`.openapi.openapi` emits the structural schema a CustomResourceDefinition needs. Nothing here
knows about policies.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args, get_origin, get_type_hints

from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import JSON, Obj

M = TypeVar("M", bound="Model")
NodeKind = Literal["string", "integer", "boolean", "int-or-string", "array", "map", "object", "any"]

_META_KEY = "kinitiras_py.api.schema"
_UNSET: Any = object()


@dataclass(frozen=True)
class OneOf:
    """``Annotated`` extra: the string must be one of ``values``."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class Pattern:
    """``Annotated`` extra: strings must match ``regex``; ``meaning`` is what the error message says."""

    regex: str
    meaning: str


@dataclass(frozen=True)
class Check:
    """``Annotated`` extra: ``problem(value)`` says why a well-typed value cannot work, or None.
    For what a pattern cannot say (ranges, URLs); the parser applies it, the CRD does not."""

    problem: Callable[[Any], str | None]


@dataclass(frozen=True)
class Format:
    """``Annotated`` extra: the OpenAPI ``format`` (``int64``, ``date-time``); the parser checks the
    range of ``int32`` and ``int64`` (CEL and the API server cannot hold a larger integer)."""

    name: str


@dataclass(frozen=True)
class Prop:
    """What :func:`prop` records about a field, besides its type."""

    description: str
    required: bool
    default: JSON
    min_items: int | None

    @property
    def has_default(self) -> bool:
        """Whether the field declares a schema default (None can be one)."""
        return self.default is not _UNSET


def prop(description: str, *, required: bool = False, default: JSON = _UNSET,
         factory: Callable[[], Any] | None = None, min_items: int | None = None) -> Any:
    """Declare a model field.

    ``default`` is a schema default: it is written into the CRD (the API server applies it) and the
    parser applies it too. ``factory`` is only the Python value of an absent field (``list``,
    ``dict``); without either, an absent optional field is ``None``.
    """
    meta = {_META_KEY: Prop(description, required, default, min_items)}
    if required:
        return field(metadata=meta)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=None if default is _UNSET else default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class Model:
    """Base of every declared model. ``raw`` is the JSON object the model was parsed from, untouched
    (schema defaults are not written into it)."""

    OPEN: ClassVar[bool] = False
    """True for shapes owned by someone else (object metadata): unknown fields are kept, not errors."""

    raw: Obj = field(default_factory=dict, repr=False, compare=False)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Cross-field problems the CRD schema cannot express (Kubernetes 1.20 has no CEL rules), as
        ``(field path relative to this model, reason)``. The parser reports them; the API server
        does not, so the admission webhook must."""
        return iter(())


@dataclass(frozen=True)
class Node:
    """A field's type, resolved from its annotation."""

    kind: NodeKind
    enum: tuple[str, ...] = ()
    pattern: Pattern | None = None
    check: Check | None = None
    format: str | None = None
    item: Node | None = None
    model: type[Model] | None = None


@dataclass(frozen=True)
class FieldSpec:
    """One declared field: attribute name, JSON name, type and declaration."""

    attr: str
    json: str
    node: Node
    prop: Prop


def _camel(attr: str) -> str:
    head, *rest = attr.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_SCALARS: dict[Any, NodeKind] = {str: "string", int: "integer", bool: "boolean", Any: "any"}


def _node(tp: Any) -> Node:
    extras: tuple[Any, ...] = ()
    if get_origin(tp) is Annotated:
        tp, *rest = get_args(tp)
        extras = tuple(rest)
    node = _bare_node(tp)
    for extra in extras:
        if isinstance(extra, OneOf):
            node = dataclasses.replace(node, enum=extra.values)
        elif isinstance(extra, Pattern):
            node = dataclasses.replace(node, pattern=extra)
        elif isinstance(extra, Check):
            node = dataclasses.replace(node, check=extra)
        elif isinstance(extra, Format):
            node = dataclasses.replace(node, format=extra.name)
    return node


def _bare_node(tp: Any) -> Node:
    origin = get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = [arg for arg in get_args(tp) if arg is not type(None)]
        if set(args) == {int, str}:
            return Node("int-or-string")
        if len(args) == 1:
            return _node(args[0])
    elif origin is list:
        return Node("array", item=_node(get_args(tp)[0]))
    elif origin is dict:
        return Node("map", item=_node(get_args(tp)[1]))
    elif tp in _SCALARS:
        return Node(_SCALARS[tp])
    elif isinstance(tp, type) and issubclass(tp, Model):
        return Node("object", model=tp)
    raise TypeError(f"no schema for the annotation {tp!r}")


_FIELDS: dict[type[Model], tuple[FieldSpec, ...]] = {}


def fields_of(cls: type[Model]) -> tuple[FieldSpec, ...]:
    """The declared fields of a model, in declaration order (``raw`` is not one)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = get_type_hints(cls, include_extras=True)
        found = _FIELDS[cls] = tuple(
            FieldSpec(f.name, _camel(f.name), _node(hints[f.name]), f.metadata[_META_KEY])
            for f in dataclasses.fields(cls) if _META_KEY in f.metadata
        )
    return found


# ---------------------------------------------------------------------------------------------
# Parsing


def parse(cls: type[M], data: JSON, path: str = "") -> M:
    """Build ``cls`` from decoded JSON; raise ``PolicyErrors`` listing every problem found."""
    errors: list[PolicyError] = []
    model = parse_into(cls, data, path, errors)
    if model is None or errors:
        raise PolicyErrors(errors)
    return model


def parse_into(cls: type[M], data: JSON, path: str, errors: list[PolicyError], partial: bool = False) -> M | None:
    """Like :func:`parse`, but append problems to ``errors``; None when ``data`` has any problem.

    ``partial`` builds what it can instead: a field whose value fails is reported and left at its
    default (None without one; a required field too), a list or map keeps its items' places (an
    item that is not even an object is None), and a model is None only when ``data`` is not an
    object. ``problems()`` runs only on a model with no problem inside, as it does when not partial.
    """
    model = _parse(Node("object", model=cls), data, path, errors, partial)
    return typing.cast("M | None", model)


def unsupported(value: JSON, allowed: tuple[str, ...]) -> str:
    """The reason given for a value outside an enum."""
    return f"unsupported value {_show(value)}: must be one of {', '.join(allowed)}"


def json_type(value: JSON) -> str:
    """The JSON type name of a decoded value, as error messages say it."""
    if value is None:
        return "null"
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                       (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _show(value: JSON) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _at_least(count: int) -> str:
    return f"must have at least {count} item{'' if count == 1 else 's'}"


def _join(path: str, key: str) -> str:
    if not key:  # a model's problems() about the model as a whole
        return path
    return f"{path}.{key}" if path else key


def _parse(node: Node, value: JSON, path: str, errors: list[PolicyError], partial: bool) -> Any:
    kind = node.kind
    if kind == "any":
        return value
    if kind == "object":
        assert node.model is not None
        return _parse_object(node.model, value, path, errors, partial)
    if kind == "array":
        assert node.item is not None
        if not isinstance(value, list):
            errors.append(PolicyError(path, f"must be of type array, got {json_type(value)}"))
            return None
        return [_parse(node.item, item, f"{path}[{i}]", errors, partial) for i, item in enumerate(value)]
    if kind == "map":
        assert node.item is not None
        if not isinstance(value, dict):
            errors.append(PolicyError(path, f"must be of type object, got {json_type(value)}"))
            return None
        return {str(k): _parse(node.item, v, f"{path}[{k}]", errors, partial) for k, v in value.items()}
    return _parse_scalar(node, value, path, errors)


_INT_BITS = {"int32": 32, "int64": 64}


def _parse_scalar(node: Node, value: JSON, path: str, errors: list[PolicyError]) -> Any:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    ok = {
        "string": isinstance(value, str),
        "integer": is_int,
        "boolean": isinstance(value, bool),
        "int-or-string": is_int or isinstance(value, str),
    }[node.kind]
    if not ok:
        wanted = "an integer or a string" if node.kind == "int-or-string" else f"of type {node.kind}"
        errors.append(PolicyError(path, f"must be {wanted}, got {json_type(value)}"))
        return None
    bits = _INT_BITS.get(node.format or "")
    if is_int and bits and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        errors.append(PolicyError(path, f"{value} is out of the range of a {bits}-bit integer"))
        return None
    if node.enum and value not in node.enum:
        errors.append(PolicyError(path, unsupported(value, node.enum)))
        return None
    # OpenAPI patterns are unanchored; ours carry their own anchors, so search() is faithful.
    if node.pattern and isinstance(value, str) and not re.search(node.pattern.regex, value):
        errors.append(PolicyError(path, f"{_show(value)} is not {node.pattern.meaning}"))
        return None
    problem = node.check.problem(value) if node.check else None
    if problem is not None:
        errors.append(PolicyError(path, problem))
        return None
    return value


_ABSENT: dict[NodeKind, Callable[[], Any]] = {"array": list, "map": dict}
"""A required field that failed, in a partial model: an empty list or map, else None."""


def _parse_object(cls: type[Model], value: JSON, path: str, errors: list[PolicyError], partial: bool
                  ) -> Model | None:
    if not isinstance(value, dict):
        errors.append(PolicyError(path, f"must be of type object, got {json_type(value)}"))
        return None
    before = len(errors)
    by_json = {f.json: f for f in fields_of(cls)}
    kwargs: dict[str, Any] = {}
    given: set[str] = set()
    for key, item in value.items():
        spec = by_json.get(key)
        if spec is None:
            if not cls.OPEN:
                # The API server would prune it silently and the user would lose that config.
                errors.append(PolicyError(_join(path, str(key)), "unknown field"))
            continue
        if item is None:  # the API server prunes nulls: same as absent
            continue
        sub = _join(path, key)
        given.add(spec.attr)
        parsed = _parse(spec.node, item, sub, errors, partial)
        if parsed is not None:  # a value that failed outright is absent: its default applies
            kwargs[spec.attr] = parsed
        if spec.prop.min_items is not None and isinstance(item, list) and len(item) < spec.prop.min_items:
            errors.append(PolicyError(sub, _at_least(spec.prop.min_items)))
    for spec in by_json.values():
        if spec.attr in kwargs:
            continue
        if spec.prop.required and spec.attr not in given:
            errors.append(PolicyError(_join(path, spec.json), "required field is missing"))
        if spec.prop.has_default:
            kwargs[spec.attr] = copy.deepcopy(spec.prop.default)
        elif spec.prop.required and partial:
            kwargs[spec.attr] = _ABSENT.get(spec.node.kind, lambda: None)()
    if len(errors) > before:
        return cls(raw=value, **kwargs) if partial else None
    model = cls(raw=value, **kwargs)
    errors.extend(PolicyError(_join(path, rel), reason) for rel, reason in model.problems())
    return model
