"""The kinitiras functions CEL rules call, as plain Python (registered by ``celext``).

Rendered templates walk the object and write their patch operations in CEL; these functions
take and return small values only (a kind, a field's value, two values to compare), so that no
call converts the whole object. They hold what is awkward in CEL: the table of pod-bearing
kinds, de-duplicating tolerations and affinity terms, comparing loosely typed values. All
functions are pure and never mutate their arguments.
"""

from __future__ import annotations

import copy
import math
from decimal import Decimal, InvalidOperation

from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.objects import patching, workloads

# -- workload -------------------------------------------------------------------------------------


def pod_spec_path(api_version: str, kind: str) -> str:
    """JSON pointer of the pod spec of objects of this apiVersion and kind, or "" for other kinds."""
    keys = workloads.kind_pod_spec_path(api_version, kind)
    return "" if keys is None else patching.pointer(*keys)


# -- tolerations ----------------------------------------------------------------------------------


def _field(t: Obj, name: str) -> str:
    value = t.get(name)
    return "" if value is None else str(value)  # null and absent are the same in Kubernetes


def _toleration_id(t: Obj) -> tuple[str, str, str, str]:
    # An empty operator means Equal in Kubernetes; tolerationSeconds is not part of identity.
    return (_field(t, "key"), _field(t, "operator") or "Equal", _field(t, "value"), _field(t, "effect"))


def _tolerations(current: JSON) -> list[Obj]:
    """The current tolerations as a list of objects (null means none); anything else is an error."""
    if current is None:
        return []
    if not isinstance(current, list) or not all(isinstance(t, dict) for t in current):
        raise ValueError("the pod spec's tolerations must be a list of objects")
    return current


def tolerations_add(current: list[Obj] | None, wanted: list[Obj]) -> list[Obj]:
    """Current tolerations plus each wanted one not already present (by key/operator/value/effect)."""
    result = [copy.deepcopy(t) for t in _tolerations(current)]
    ids = {_toleration_id(t) for t in result}
    for t in wanted:
        if _toleration_id(t) not in ids:
            result.append(copy.deepcopy(t))
            ids.add(_toleration_id(t))
    return result


def tolerations_replace(current: list[Obj] | None, wanted: list[Obj]) -> list[Obj]:
    """Wanted tolerations replace the current ones with the same key and effect; others are added.

    Replacements take the place of the first toleration of their slot (as kinitiras' in-place
    replace did); other tolerations of that slot go; wanted ones replacing nothing are appended.
    """
    def slot(t: Obj) -> tuple[str, str]:
        return (_field(t, "key"), _field(t, "effect"))

    by_slot: dict[tuple[str, str], list[Obj]] = {}
    for t in tolerations_add([], wanted):
        by_slot.setdefault(slot(t), []).append(t)
    result: list[Obj] = []
    placed: set[tuple[str, str]] = set()
    for t in _tolerations(current):
        key = slot(t)
        if key not in by_slot:
            result.append(copy.deepcopy(t))
        elif key not in placed:
            result += [copy.deepcopy(w) for w in by_slot[key]]
            placed.add(key)
    return result + [copy.deepcopy(w) for key, ws in by_slot.items() if key not in placed for w in ws]


def tolerations_remove(current: list[Obj] | None, unwanted: list[Obj]) -> list[Obj]:
    """Current tolerations without those matching an unwanted one (key/operator/value/effect)."""
    ids = {_toleration_id(t) for t in unwanted}
    return [copy.deepcopy(t) for t in _tolerations(current) if _toleration_id(t) not in ids]


# -- affinity -------------------------------------------------------------------------------------

_SUB_AFFINITIES = ("nodeAffinity", "podAffinity", "podAntiAffinity")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _terms(sub: str, field: str, node: Obj) -> tuple[list[Obj], Obj | None]:
    """The list of terms of one sub-affinity field, and the wrapper dict holding it if any."""
    value = node.get(field)
    if sub == "nodeAffinity" and field == _REQUIRED:
        # Node affinity's required field is a NodeSelector wrapping the term list.
        wrapper = value if isinstance(value, dict) else {}
        terms = wrapper.get("nodeSelectorTerms")
        return (list(terms) if isinstance(terms, list) else []), wrapper
    # Anything but a list (null, or a malformed value) holds no terms; it is overwritten.
    return (list(value) if isinstance(value, list) else []), None


def _with_terms(sub: str, field: str, terms: list[Obj], wrapper: Obj | None) -> JSON:
    if sub == "nodeAffinity" and field == _REQUIRED:
        return {**(wrapper or {}), "nodeSelectorTerms": terms}
    return terms


def _combine(current: Obj | None, policy: Obj, mode: str) -> Obj:
    result: Obj = copy.deepcopy(current) if isinstance(current, dict) else {}
    for sub in _SUB_AFFINITIES:
        wanted = policy.get(sub)
        if not isinstance(wanted, dict):
            continue
        node = result.get(sub)
        if not isinstance(node, dict):  # absent or null: nothing set yet
            node = result[sub] = {}
        for field in (_REQUIRED, _PREFERRED):
            if field not in wanted:
                continue
            have, wrapper = _terms(sub, field, node)
            want, _ = _terms(sub, field, wanted)
            if mode == "add":
                terms = list(have)
                for term in want:  # the policy's own list may repeat a term too
                    if term not in terms:
                        terms.append(copy.deepcopy(term))
            elif mode == "replace":
                terms = copy.deepcopy(want)
            else:
                terms = [t for t in have if t not in want]
            if terms:
                node[field] = _with_terms(sub, field, terms, wrapper)
            else:
                node.pop(field, None)
        if not node:
            result.pop(sub)
    return result


def affinity_add(current: Obj | None, policy: Obj) -> Obj:
    """Current affinity plus the policy's terms, per sub-affinity, without duplicates."""
    return _combine(current, policy, "add")


def affinity_replace(current: Obj | None, policy: Obj) -> Obj:
    """Current affinity with each field the policy sets replaced by the policy's terms."""
    return _combine(current, policy, "replace")


def affinity_remove(current: Obj | None, policy: Obj) -> Obj:
    """Current affinity without the policy's terms; empty fields and sub-affinities disappear."""
    return _combine(current, policy, "remove")


# -- conditions -----------------------------------------------------------------------------------


def _number(value: JSON) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


def loose_equal(a: JSON, b: JSON) -> bool:
    """Equality where a numeric string equals the same number (annotations are strings)."""
    if a == b and type(a) is type(b):
        return True
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return na == nb
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).lower() == str(b).lower()
    return False


def loose_compare(a: JSON, b: JSON) -> int:
    """-1, 0 or 1 comparing numbers (numeric strings included), else two strings; error otherwise."""
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None:
        return (na > nb) - (na < nb)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    raise ValueError(f"cannot order {a!r} and {b!r}: compare numbers or two strings")


def loose_in(value: JSON, items: JSON) -> bool:
    """Membership using :func:`loose_equal`; a single value on the right is a one-item list."""
    candidates = items if isinstance(items, list) else [items]
    return any(loose_equal(value, item) for item in candidates)


def arithmetic(value: JSON, operation: str, operand: JSON) -> JSON:
    """``valueProcess``: value (+ - * /) operand; operand may be a number or a percentage string."""
    left = _number(value)
    if left is None:
        raise ValueError(f"valueProcess needs a number, got {value!r}")
    text = str(operand).strip()
    percent = text.endswith("%")
    right = _number(text[:-1] if percent else text)
    if right is None:
        raise ValueError(f"valueProcess operationWith must be a number or a percentage, got {operand!r}")
    if percent:
        right /= 100
    if operation == "/" and right == 0:
        raise ValueError("valueProcess divides by zero")
    if operation == "+":
        result = left + right
    elif operation == "-":
        result = left - right
    elif operation == "*":
        result = left * right
    else:
        result = left / right
    if result == result.to_integral_value() and _INT64[0] <= result <= _INT64[1]:
        return int(result)
    number = float(result)  # beyond int64 as well: a double, as the API server reads such JSON numbers
    if not math.isfinite(number):
        raise ValueError(f"valueProcess: {value} {operation} {operand} is beyond the range of a double")
    return number


_INT64 = (-(2**63), 2**63 - 1)


def representable(text: str) -> bool:
    """Whether the decimal ``text`` is a number a double holds: finite, and not a non-zero value
    that rounds to zero."""
    number = Decimal(text)
    converted = float(number)
    return math.isfinite(converted) and (converted != 0 or number == 0)
