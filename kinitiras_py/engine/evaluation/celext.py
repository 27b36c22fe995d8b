"""The CEL function library rules can call, as plain Python plus declarations.

:data:`FUNCTIONS` declares every function; :mod:`.cel` turns the declarations into
cel-expr-python ones (this module never imports cel-expr-python). Kubernetes names and semantics
are kept where Kubernetes has the function (``k8s.io/apiserver/pkg/cel/library``).

Quantities are strings
    cel-expr-python 0.1.3 cannot carry opaque or custom values (an abstract type fails with
    "Unimplemented type", a Python object with "Non-CEL value type") and proto messages would
    need the protobuf package, so ``quantity(s)`` returns the *canonical string* of the quantity
    and the quantity functions are members of ``string``, accepting any quantity text
    (``'1.5Gi'.isGreaterThan('1G')`` works without ``quantity()``). Consequences:

    * ``string(q)`` is ``q``; ``quantity(s)`` is the way to canonicalise ``s``;
    * ``==`` compares text: ``quantity('1k') == quantity('1000')`` holds (same canonical form)
      but ``quantity('1Ki') == quantity('1024')`` does not (BinarySI vs DecimalSI), while
      Kubernetes says both are equal: use ``compareTo(...) == 0``;
    * ``<`` and ``>`` compare text, never quantities: use ``isLessThan``/``isGreaterThan``;
    * ``type(q)`` is ``string``, and any string method applies to a quantity.

Lists
    Kubernetes' ``isSorted``, ``sum``, ``min``, ``max`` on numbers, strings, bools and bytes
    (not durations or timestamps: a Python function cannot return those to cel-expr-python);
    our ``range(n)`` (also ``lists.range(n)`` as in cel-go), ``l.enumerate()`` giving
    ``{'index': i, 'value': v}`` maps, and cel-go's ``l.flatten([depth])`` and ``l.sort()``.

Not provided
    * Kubernetes' ``l.indexOf(x)`` / ``l.lastIndexOf(x)`` on lists: the strings extension already
      declares ``indexOf``/``lastIndexOf`` and cel-expr-python refuses a second declaration of a
      name. ``range(size(l)).filter(i, l[i] == x)`` lists the indexes instead.
    * Kubernetes' quantity ``mul``/``div``/``divInt``: ``q.scale(factor, roundTo)`` covers
      multiplication and division by a constant.

Kinitiras helpers
    The functions of :mod:`.builtins` that rendered templates call: ``workload.podSpecPath``,
    ``tolerations.*``, ``affinity.*`` and ``cond.*`` (``cond.isIn``, as ``in`` is a CEL keyword).
    They take and return small values: every call converts its arguments, so the templates walk
    the object in CEL and never pass it (or a container) to one of them.

KubeMod helpers
    ``kubemod.printed``, ``kubemod.compare``, ``template.text``, ``template.goText``, ``template.goQuote``,
    ``yaml.decode`` and ``regexReplaceAll``, for rules brought from KubeMod (:mod:`.kubemodlib`).

Regular expressions in ``find``/``findAll`` run on RE2 (:mod:`.regex`), as Kubernetes' do and
the built-in ``matches`` does here: linear in the input, without backreferences or look-around.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import builtins, kubemodlib, regex, scaling
from kinitiras_py.engine.evaluation.quantity import Format, Quantity, is_quantity

Kind = Literal["any", "dyn", "bool", "int", "double", "string", "list"]
"""A parameter or result type. ``any`` (parameters only) accepts every value; ``dyn`` (results
only) is checked at runtime; ``list`` holds ``dyn`` elements."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Overload:
    """One typed implementation; ``member`` makes ``params[0]`` the receiver (``x.f(...)``)."""

    id: str
    params: tuple[Kind, ...]
    result: Kind
    impl: Callable[..., Any]
    member: bool = False


@dataclass(frozen=True)
class Function:
    """A CEL function name with its overloads."""

    name: str
    overloads: tuple[Overload, ...]


def _fn(name: str, *overloads: Overload) -> Function:
    return Function(name, overloads)


def _member(id_: str, params: tuple[Kind, ...], result: Kind, impl: Callable[..., Any]) -> Overload:
    return Overload(id_, params, result, impl, member=True)


# -- quantity -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _q(text: str) -> Quantity:
    # Quantities are immutable; rules parse the same few strings over and over.
    return Quantity.parse(text)


def _int_quantity(n: int) -> Quantity:
    # Kubernetes makes the int operand of add/sub a DecimalExponent quantity (resource.NewQuantity).
    return Quantity.from_decimal(n, Format.DECIMAL_EXPONENT)


def quantity(text: str) -> str:
    """``quantity(s)``: the canonical form of quantity ``s``; an error when ``s`` is not one."""
    return _q(text).canonical()


def compare_to(a: str, b: str) -> int:
    """``a.compareTo(b)``: -1, 0 or 1 comparing the quantities' values (formats are ignored)."""
    return _q(a).compare(_q(b))


def _fits_int64(q: Quantity) -> bool:
    return q.is_integer() and _INT64_MIN <= q.value <= _INT64_MAX


def as_integer(text: str) -> int:
    """``q.asInteger()``: the value as an int64; an error if it has a fraction or overflows."""
    q = _q(text)
    if not _fits_int64(q):
        raise ValueError(f"cannot convert quantity {text} to integer")
    return q.int_value()


@functools.lru_cache(maxsize=4096)
def scale(text: str, factor: str, round_to: str) -> str:
    """``q.scale(factor, roundTo)``: q * factor rounded down to a multiple of roundTo.

    ``quantity('4Gi').scale('0.2', '1') == '858993459'``,
    ``quantity('1500m').scale('0.5', '0.001') == '750m'``.
    """
    common = scaling.scale_common(text, factor, round_to)  # the forms limits are written in, in int arithmetic
    if common is not None:
        return common
    quantity = _q(text)  # first: an invalid quantity is reported before an invalid factor
    multiplier = scaling.read_decimal(factor, "factor")
    return quantity.scaled(multiplier, scaling.read_decimal(round_to, "roundTo")).canonical()


_QUANTITY = (
    _fn("quantity", Overload("string_to_quantity", ("string",), "string", quantity)),
    _fn("isQuantity", Overload("is_quantity_string", ("string",), "bool", is_quantity)),
    _fn("sign",
        _member("quantity_sign", ("string",), "int", lambda a: _q(a).sign()),
        # Kubernetes declares sign as a global overload, so keep sign(q) working too.
        Overload("quantity_sign_global", ("string",), "int", lambda a: _q(a).sign())),
    _fn("isGreaterThan", _member("quantity_is_greater_than", ("string", "string"), "bool",
                                 lambda a, b: compare_to(a, b) > 0)),
    _fn("isLessThan", _member("quantity_is_less_than", ("string", "string"), "bool",
                              lambda a, b: compare_to(a, b) < 0)),
    _fn("compareTo", _member("quantity_compare_to", ("string", "string"), "int", compare_to)),
    _fn("add",
        _member("quantity_add", ("string", "string"), "string", lambda a, b: _q(a).add(_q(b)).canonical()),
        _member("quantity_add_int", ("string", "int"), "string",
                lambda a, n: _q(a).add(_int_quantity(n)).canonical())),
    _fn("sub",
        _member("quantity_sub", ("string", "string"), "string", lambda a, b: _q(a).sub(_q(b)).canonical()),
        _member("quantity_sub_int", ("string", "int"), "string",
                lambda a, n: _q(a).sub(_int_quantity(n)).canonical())),
    _fn("asInteger", _member("quantity_get_int", ("string",), "int", as_integer)),
    _fn("isInteger", _member("quantity_is_integer", ("string",), "bool", lambda a: _fits_int64(_q(a)))),
    _fn("asApproximateFloat",
        _member("quantity_get_float", ("string",), "double", lambda a: _q(a).as_approximate_float())),
    _fn("scale", _member("quantity_scale", ("string", "string", "string"), "string", scale)),
    _fn("canonical", _member("quantity_canonical", ("string",), "string", quantity)),
)


# -- strings, regex, jsonpatch --------------------------------------------------------------------


def find(text: str, pattern: str) -> str:
    """``s.find(re)``: the first match of ``re`` in ``s``, or ``''``."""
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """``s.findAll(re[, n])``: successive non-overlapping matches, at most ``n`` when ``n >= 0``."""
    found = regex.go_matches(_regex(pattern), text)
    return [match.group(0) for match in (found if limit < 0 else itertools.islice(found, limit))]


def _regex(pattern: str) -> Any:
    try:
        return regex.compiled(pattern)
    except ValueError as e:
        raise ValueError(f"Illegal regex {pattern!r}: {e}") from None


def escape_key(key: str) -> str:
    """``jsonpatch.escapeKey(k)``: ``k`` as one RFC 6901 JSON pointer token (``~``→``~0``, ``/``→``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


_STRINGS = (
    _fn("find", _member("string_find_string", ("string", "string"), "string", find)),
    _fn("findAll",
        _member("string_find_all_string", ("string", "string"), "list", find_all),
        _member("string_find_all_string_int", ("string", "string", "int"), "list", find_all)),
    _fn("jsonpatch.escapeKey", Overload("jsonpatch_escape_key", ("string",), "string", escape_key)),
)


# -- lists ----------------------------------------------------------------------------------------


def _order_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"  # CEL orders int, uint and double against each other
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    return None


def _comparable(items: list[Any], op: str) -> list[Any]:
    kinds = {_order_kind(item) for item in items}
    if None in kinds or len(kinds) > 1:
        raise ValueError(f"{op}: the elements are not mutually comparable")
    return items


def is_sorted(items: list[Any]) -> bool:
    """``l.isSorted()``: whether each element is ≤ the next."""
    _comparable(items, "isSorted")
    return all(a <= b for a, b in itertools.pairwise(items))


def list_sum(items: list[Any]) -> Any:
    """``l.sum()``: the sum of all-int or all-double elements; ``0`` when empty."""
    if not items:
        return 0
    if all(type(i) is int for i in items):
        total = sum(items)
        if not _INT64_MIN <= total <= _INT64_MAX:
            raise ValueError("sum: int64 overflow")
        return total
    if all(type(i) is float for i in items):
        return sum(items)
    raise ValueError("sum: the elements must be all int or all double")


def list_min(items: list[Any]) -> Any:
    """``l.min()``: the least element; an error on an empty list."""
    if not items:
        raise ValueError("min called on empty list")
    return min(_comparable(items, "min"))


def list_max(items: list[Any]) -> Any:
    """``l.max()``: the greatest element; an error on an empty list."""
    if not items:
        raise ValueError("max called on empty list")
    return max(_comparable(items, "max"))


def sort_list(items: list[Any]) -> list[Any]:
    """``l.sort()``: the elements in ascending order, all of one comparable kind (cel-go's ext lists)."""
    return sorted(_comparable(items, "sort"))


def int_range(n: int) -> list[int]:
    """``range(n)`` / ``lists.range(n)``: ``[0, 1, ..., n-1]``."""
    if n < 0:
        raise ValueError(f"range: {n} is negative")
    return list(range(n))


def enumerate_list(items: list[Any]) -> list[dict[str, Any]]:
    """``l.enumerate()``: ``[{'index': 0, 'value': l[0]}, ...]``, for patch paths with indexes."""
    return [{"index": i, "value": v} for i, v in enumerate(items)]


def flatten(items: list[Any], depth: int = 1) -> list[Any]:
    """``l.flatten([depth])``: nested lists spliced in, ``depth`` levels deep (cel-go semantics)."""
    if depth < 0:
        raise ValueError("flatten: the depth must not be negative")
    out: list[Any] = []
    for item in items:
        if isinstance(item, list) and depth > 0:
            out.extend(flatten(item, depth - 1))
        else:
            out.append(item)
    return out


_LISTS = (
    _fn("isSorted", _member("list_is_sorted", ("list",), "bool", is_sorted)),
    _fn("sum", _member("list_sum", ("list",), "dyn", list_sum)),
    _fn("min", _member("list_min", ("list",), "dyn", list_min)),
    _fn("max", _member("list_max", ("list",), "dyn", list_max)),
    _fn("sort", _member("list_sort", ("list",), "list", sort_list)),
    _fn("range", Overload("range_int", ("int",), "list", int_range)),
    _fn("lists.range", Overload("lists_range_int", ("int",), "list", int_range)),
    _fn("enumerate", _member("list_enumerate", ("list",), "list", enumerate_list)),
    _fn("flatten",
        _member("list_flatten", ("list",), "list", flatten),
        _member("list_flatten_int", ("list", "int"), "list", flatten)),
)


# -- kinitiras helpers (engine.evaluation.builtins) -----------------------------------------------


def _helper(name: str, impl: Callable[..., JSON], params: tuple[Kind, ...], result: Kind = "dyn") -> Function:
    return _fn(name, Overload(name.replace(".", "_"), params, result, impl))


_HELPERS = (
    _helper("workload.podSpecPath", builtins.pod_spec_path, ("string", "string"), "string"),
    _helper("tolerations.add", builtins.tolerations_add, ("any", "any"), "list"),
    _helper("tolerations.replace", builtins.tolerations_replace, ("any", "any"), "list"),
    _helper("tolerations.remove", builtins.tolerations_remove, ("any", "any"), "list"),
    _helper("affinity.add", builtins.affinity_add, ("any", "any")),
    _helper("affinity.replace", builtins.affinity_replace, ("any", "any")),
    _helper("affinity.remove", builtins.affinity_remove, ("any", "any")),
    _helper("cond.equal", builtins.loose_equal, ("any", "any"), "bool"),
    # `in` is a CEL keyword, so `cond.in(...)` cannot parse: the membership helper is cond.isIn.
    _helper("cond.isIn", builtins.loose_in, ("any", "any"), "bool"),
    _helper("cond.compare", builtins.loose_compare, ("any", "any"), "int"),
    _helper("cond.process", builtins.arithmetic, ("any", "string", "string")),
)

_KUBEMOD = (
    _fn("kubemod.printed", *(Overload(f"kubemod_printed_{kind}", (kind,), "string", kubemodlib.go_printed)
                              for kind in ("int", "double", "bool"))),
    _helper("kubemod.compare", kubemodlib.gval_compare, ("string", "any", "any"), "bool"),
    _helper("template.text", kubemodlib.template_text, ("any",), "string"),
    _helper("template.goText", kubemodlib.go_text, ("any",), "string"),
    _helper("template.goQuote", kubemodlib.go_quote, ("any",), "string"),
    _helper("yaml.decode", kubemodlib.yaml_decode, ("string",)),
    _helper("regexReplaceAll", kubemodlib.regex_replace_all, ("string", "string", "string"), "string"),
)

FUNCTIONS: tuple[Function, ...] = _QUANTITY + _STRINGS + _LISTS + _HELPERS + _KUBEMOD
"""Every function of the library, registered by :mod:`.cel`."""
