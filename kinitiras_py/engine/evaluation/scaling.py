"""``q.scale(factor, roundTo)`` for the forms limits are written in, with integer arithmetic.

:meth:`.Quantity.scaled` is exact for every quantity but works in :mod:`decimal` (parse, multiply,
an exact ratio, canonical form: about 13 µs). The forms limits are written in ("500m", "2", "1.5",
"128Mi", "1Gi", "100M") need no more than int arithmetic, which gives the same answer in a fraction
of the time. :func:`scale_common` answers those and None for the rest, which :mod:`.celext` then
hands to :meth:`.Quantity.scaled`: exponents, signs, a leading or trailing dot, more than 15
integer or 3 fraction digits, the suffixes ``u`` and ``n``, and values beyond what the constants
below were worked out for.

A quantity ``I[.F]S`` is ``m * 10^(e10-3) * 2^e2`` with ``m = I*1000 + F`` (F padded to three
digits) and suffix ``S`` multiplying by ``10^e10 * 2^e2``. The number of roundTo steps in its
scaled value is ``floor(m * num / den)`` for the reduced fraction ``num/den`` of
``10^(e10-3) * 2^e2 * factor / roundTo``; the result is that many steps of roundTo, ``step``
units of ``1/unit``. roundTo is at least a nano, so nothing rounds further. Results stay below
2^63 (and binary values below the parse cap), so the suffix tables always have an answer.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from kinitiras_py.engine.evaluation.quantity import BINARY_EXPONENTS, DECIMAL_EXPONENTS, DECIMAL_SUFFIXES

__all__ = ["ScalePlan", "read_decimal", "scale_common", "scale_plan"]

_MAX_INT64 = 2**63 - 1
_FRACTION_DIGITS = 3
_MAX_PLACES = 100
"""Factors and roundTo values with more digits or places than this go to the exact path (which
refuses those beyond 4,000)."""
_SUFFIXES = {**{s: (e, 0) for s, e in DECIMAL_EXPONENTS.items() if e >= -3},
             **{s: (0, e) for s, e in BINARY_EXPONENTS.items()}}
"""The suffixes read here with their powers of ten and two; ``u`` and ``n`` are left out (finer
than a thousandth of a milli, where a fraction would round to a nano)."""
# [0-9], not \d: \d also matches non-ASCII digits.
_COMMON = re.compile(r"([0-9]{1,15})(?:\.([0-9]{1,3}))?([KMGTPE]i|[mkMGTPE])?")  # 3: _FRACTION_DIGITS
_BINARY = ((2**60, "Ei"), (2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


@dataclass(frozen=True)
class ScalePlan:
    """What a ``scale(factor, roundTo)`` needs, worked out once per factor and roundTo."""

    suffixes: dict[str, tuple[int, int, int]]
    """(num, den, the largest m the int64 bounds allow) for each suffix read."""
    step: int
    unit: int
    decimal: tuple[tuple[int, str], ...]
    """(10^(3g), suffix) for g = 6..1: the suffix of a result the power divides (largest first)."""
    last: str
    """The suffix of a result not divisible by 1000."""


def _places(value: Decimal) -> tuple[int, int]:
    """``value`` (positive, finite) as ``(n, d)`` with ``value == n / 10^d`` and ``d >= 0`` least."""
    _, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    n = int("".join(map(str, digits)))
    return (n * 10**exponent, 0) if exponent >= 0 else (n, -exponent)


def _exponent(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int), "finite Decimal expected"
    return exponent


def read_decimal(text: str, what: str) -> Decimal:
    """``scale``'s factor or roundTo (``what``) as a finite Decimal; ValueError saying why not."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"scale: {what} {text!r} is not a decimal number") from None
    if not value.is_finite():
        raise ValueError(f"scale: {what} {text!r} is not a finite number")
    return value


@functools.lru_cache(maxsize=256)
def scale_plan(factor: str, round_to: str) -> ScalePlan | None:
    """The constants of ``scale(factor, round_to)``; None when every quantity goes to the exact
    path: an invalid or non-positive factor or roundTo, or roundTo's decimal places not a
    multiple of three up to nine."""
    try:
        f, r = read_decimal(factor, "factor"), read_decimal(round_to, "roundTo")
    except ValueError:
        return None
    if f <= 0 or r <= 0 or any(max(abs(d.adjusted()), abs(_exponent(d))) > _MAX_PLACES for d in (f, r)):
        return None  # refused by Quantity.scaled, or far beyond any factor a limit is scaled by
    step, places = _places(r)
    if places % 3 or places > 9:
        return None
    suffixes = {}
    for text, (e10, e2) in _SUFFIXES.items():
        ratio = Fraction(10) ** (e10 - _FRACTION_DIGITS) * 2**e2 * Fraction(f) / Fraction(r)
        num, den = ratio.numerator, ratio.denominator
        if num * step > _MAX_INT64:
            continue  # not even 0.001 of this suffix stays in range
        limit = _MAX_INT64 // (num * step)
        if e2:  # parsing caps a BinarySI magnitude at 2^63-1: stay below the cap
            limit = min(limit, _MAX_INT64 * 10**_FRACTION_DIGITS // 2**e2)
        suffixes[text] = (num, den, limit)
    decimal = tuple((10 ** (3 * g), DECIMAL_SUFFIXES[3 * g - places]) for g in range(6, 0, -1))
    return ScalePlan(suffixes, step, 10**places, decimal, DECIMAL_SUFFIXES[-places])


def scale_common(text: str, factor: str, round_to: str) -> str | None:
    """``Quantity.parse(text).scaled(factor, round_to).canonical()`` for a quantity of a common
    form (see module doc), rounded down as ``scale`` does; None for any other quantity."""
    plan = scale_plan(factor, round_to)
    found = _COMMON.fullmatch(text)
    if plan is None or found is None:
        return None
    whole, fraction, suffix = found.groups()
    constants = plan.suffixes.get(suffix or "")
    if constants is None:
        return None
    num, den, limit = constants
    m = int(whole) * 1000 + (int(fraction.ljust(_FRACTION_DIGITS, "0")) if fraction else 0)
    if m > limit:
        return None
    value = m * num // den * plan.step  # in units of 1/unit
    if value == 0:
        return "0"
    if suffix and suffix.endswith("i") and value >= 1024 * plan.unit and value % plan.unit == 0:
        whole_value = value // plan.unit  # BinarySI: an integer of at least 1024
        return next((f"{whole_value // power}{name}" for power, name in _BINARY if whole_value % power == 0),
                    str(whole_value))
    return next((f"{value // power}{name}" for power, name in plan.decimal if value % power == 0),
                f"{value}{plan.last}")
