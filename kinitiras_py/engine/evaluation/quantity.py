"""Kubernetes ``resource.Quantity``: exact parsing, canonical formatting and arithmetic.

Behaviour follows ``k8s.io/apimachinery/pkg/api/resource`` (facts taken from its docs and tests):

* Grammar: ``[+-]? (digits | digits.digits | digits. | .digits)`` then one suffix: binary
  ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m "" k M G T P E``, or ``e``/``E`` + signed integer.
  No whitespace, no other characters.
* The suffix decides the remembered format: binary -> BinarySI, exponent -> DecimalExponent,
  anything else -> DecimalSI.
* Values keep full precision down to nano; a finer non-zero remainder is rounded *away from
  zero* (``0.1n`` -> ``1n``, ``-0.1n`` -> ``-1n``), so asking for "a little" never yields zero.
* Parsing caps a BinarySI magnitude at 2^63-1 (``8Ei`` parses as 9223372036854775807); decimal
  formats are never capped. A parsed BinarySI value with ``0 < |v| < 1`` becomes DecimalSI.
* Canonical form: largest suffix that keeps an integer mantissa. BinarySI values that are not
  integers, or lie in (-1024, 1024), are written as DecimalSI. DecimalSI exponents beyond the
  suffix table (above ``E``) fall back to exponent notation (``1000E`` -> ``1e21``), as current
  apimachinery does.

All arithmetic uses explicit :class:`decimal.Context` objects sized for an exact result, never the
thread's global context (which could round at 28 digits, or trap differently).
"""

from __future__ import annotations

import decimal
import enum
import re
from dataclasses import dataclass
from decimal import Decimal

from kinitiras_py.base.errors import QuantityError

__all__ = ["BINARY_EXPONENTS", "DECIMAL_EXPONENTS", "DECIMAL_SUFFIXES", "Format", "Quantity", "is_quantity",
           "parse_quantity"]


class Format(enum.Enum):
    """How a quantity is written; remembered from the suffix it was parsed with."""

    BINARY_SI = "BinarySI"  # 12Mi = 12 * 2^20
    DECIMAL_SI = "DecimalSI"  # 12M = 12 * 10^6
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


_MIN_PREC = 100
# Integer conversions and scaling refuse magnitudes beyond this many digits: quantities come from
# untrusted objects, and "1e2000000000" is a legal quantity whose integer value cannot be built.
# 4000 also stays under CPython's default 4300-digit int/str conversion limit.
_MAX_DIGITS = 4000
_MAX_INT64 = 2**63 - 1
_NANO = Decimal("1e-9")
_ZERO = Decimal(0)
_ROUNDINGS = frozenset({
    decimal.ROUND_DOWN, decimal.ROUND_UP, decimal.ROUND_CEILING, decimal.ROUND_FLOOR,
    decimal.ROUND_HALF_UP, decimal.ROUND_HALF_DOWN, decimal.ROUND_HALF_EVEN, decimal.ROUND_05UP,
})

BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
DECIMAL_SUFFIXES = {exp: suffix for suffix, exp in DECIMAL_EXPONENTS.items()}
_BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]

# [0-9], not \d: \d also matches non-ASCII digits, which Kubernetes rejects. fullmatch() is used
# because "$" would accept a trailing newline.
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_NUMBER_PREFIX_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _context(prec: int, *, exact: bool) -> decimal.Context:
    """A private context with at least ``prec`` digits and an unbounded exponent range.

    With ``exact`` any rounding raises instead of passing silently: such a result would be a bug in
    the precision estimate, not something to hand back as "exact". The two of :data:`_MIN_PREC`
    digits, which nearly every quantity needs, are made once: an operation only sets a shared
    context's flags, which nothing reads, and traps on what it raised itself.
    """
    if prec <= _MIN_PREC:
        return _EXACT if exact else _INEXACT
    return _new_context(prec, exact=exact)


def _new_context(prec: int, *, exact: bool) -> decimal.Context:
    traps = [decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow]
    if exact:
        traps += [decimal.Inexact, decimal.Rounded]
    return decimal.Context(prec=max(_MIN_PREC, prec), rounding=decimal.ROUND_HALF_EVEN,
                           Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=traps)


_EXACT, _INEXACT = _new_context(_MIN_PREC, exact=True), _new_context(_MIN_PREC, exact=False)


def _exponent(d: Decimal) -> int:
    exp = d.as_tuple().exponent
    assert isinstance(exp, int), "finite Decimal expected"
    return exp


def _digits(d: Decimal) -> int:
    return len(d.as_tuple().digits)


def _check_bounded(*values: Decimal) -> list[int]:
    """Raise unless every value's magnitude and precision are within :data:`_MAX_DIGITS`; the
    values' numbers of digits (read together with their exponents: ``as_tuple`` is slow)."""
    counts = []
    for d in values:
        _, digits, exp = d.as_tuple()
        assert isinstance(exp, int), "finite Decimal expected"
        if not d.is_zero() and (abs(d.adjusted()) > _MAX_DIGITS or abs(exp) > _MAX_DIGITS):
            raise QuantityError(f"quantity magnitude {d} is too large or too fine to convert exactly")
        counts.append(len(digits))
    return counts


def _round_nano(v: Decimal) -> Decimal:
    """Round ``v`` to a multiple of 1n, away from zero (apimachinery rounds with inf.RoundUp)."""
    if v.is_zero():
        return _ZERO  # also drops "-0" and spurious exponents such as 0E-3
    if _exponent(v) >= -9:
        return v
    if v.adjusted() < -9:
        # |v| < 1n: the answer is ±1n; skip quantize, which would need 10^-exponent digits.
        return _NANO.copy_sign(v)
    return v.quantize(_NANO, rounding=decimal.ROUND_UP, context=_context(v.adjusted() + 12, exact=False))


def _round_ratio(num: int, den: int, rounding: str) -> int:
    """``num/den`` (den > 0) rounded to an integer with a :mod:`decimal` rounding mode, exactly.

    The remainder is reduced to below / exactly / above one half, so Decimal's own rounding rules
    decide every mode (including ROUND_05UP, which looks at the truncated digit).
    """
    whole, rem = divmod(abs(num), den)
    if rem:
        half = "0.4" if 2 * rem < den else "0.5" if 2 * rem == den else "0.6"
        ctx = _context(len(Decimal(whole).as_tuple().digits) + 2, exact=True)
        mag = ctx.add(Decimal(whole), Decimal(half))
        signed = mag if num >= 0 else mag.copy_negate()
        return int(signed.to_integral_value(rounding=rounding, context=ctx))
    return whole if num >= 0 else -whole


def _as_decimal(x: Decimal | int, what: str) -> Decimal:
    if isinstance(x, Decimal):
        d = x
    elif isinstance(x, int):
        d = Decimal(x)
    else:
        raise TypeError(f"{what} must be a Decimal or an int, not {type(x).__name__}")
    if not d.is_finite():
        raise QuantityError(f"{what} must be finite, got {d}")
    return d


@dataclass(frozen=True, eq=False)
class Quantity:
    """An exact Kubernetes quantity: ``value`` (rounded to nano) and the remembered ``format``.

    Equality, hashing and ordering use the value only: ``1Gi == 1024Mi == 1073741824``.
    """

    value: Decimal
    format: Format = Format.DECIMAL_SI

    def __post_init__(self) -> None:
        # Enforce the invariant for every construction path, not only parse().
        value = _as_decimal(self.value, "quantity value")
        if not isinstance(self.format, Format):
            raise TypeError(f"format must be a Format, not {type(self.format).__name__}")
        object.__setattr__(self, "value", _round_nano(value))

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def parse(cls, s: str) -> Quantity:
        """Parse a quantity string exactly as Kubernetes does; raise :class:`QuantityError` if invalid."""
        if not isinstance(s, str):
            raise QuantityError(f"quantity must be a string, got {type(s).__name__} {s!r}")
        m = _QUANTITY_RE.fullmatch(s)
        if m is None or not (m["int"] or m["frac"]):
            raise QuantityError(f"invalid quantity {s!r}: {_diagnose(s)}")
        suffix = m["suffix"] or ""
        if suffix in BINARY_EXPONENTS:
            fmt, exp10, exp2 = Format.BINARY_SI, 0, BINARY_EXPONENTS[suffix]
        elif suffix in DECIMAL_EXPONENTS:
            fmt, exp10, exp2 = Format.DECIMAL_SI, DECIMAL_EXPONENTS[suffix], 0
        else:
            fmt, exp10, exp2 = Format.DECIMAL_EXPONENT, _parse_exponent(s, suffix[1:]), 0
        # Building the Decimal from text is exact and needs no context.
        number = f"{m['sign']}{m['int'] or '0'}" + (f".{m['frac']}" if m["frac"] else "")
        value = Decimal(f"{number}E{exp10}")
        if exp2:
            value = _context(_digits(value) + 20, exact=True).multiply(value, Decimal(2**exp2))
        value = _round_nano(value)
        if fmt is Format.BINARY_SI:
            if value.copy_abs() > _MAX_INT64:
                # apimachinery's silent cap ("a simple cap"), applied to the magnitude.
                value = Decimal(_MAX_INT64).copy_sign(value)
            elif not value.is_zero() and value.copy_abs() < 1:
                fmt = Format.DECIMAL_SI  # no binary suffix can express it; avoids rounding
        return cls(value, fmt)

    @classmethod
    def from_decimal(cls, d: Decimal | int, format: Format = Format.DECIMAL_SI) -> Quantity:
        """A quantity of exact value ``d`` (rounded to nano, away from zero) in ``format``.

        Like apimachinery's NewDecimalQuantity: no BinarySI cap is applied.
        """
        return cls(_as_decimal(d, "quantity value"), format)

    # -- formatting -------------------------------------------------------------------------

    def canonical(self) -> str:
        """The canonical string, identical to apimachinery's ``Quantity.String()``."""
        v = self.value
        if v.is_zero():
            return "0"
        fmt = self.format
        if fmt is Format.BINARY_SI:
            # Small or fractional binary values would need rounding: show them as DecimalSI.
            # Absurdly large ones too: their integer could not be converted to text.
            if -1024 < v < 1024 or not self.is_integer() or v.adjusted() > _MAX_DIGITS:
                fmt = Format.DECIMAL_SI
            else:
                return _format_binary(int(v))
        return _format_decimal(v, fmt)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r}, {self.format.value})"

    # -- arithmetic -------------------------------------------------------------------------

    def add(self, other: Quantity) -> Quantity:
        """``self + other`` exactly, in ``self.format`` (or ``other.format`` if ``self`` is zero)."""
        return self._combine(other, other.value)

    def sub(self, other: Quantity) -> Quantity:
        """``self - other`` exactly, in ``self.format`` (or ``other.format`` if ``self`` is zero)."""
        return self._combine(other, other.value.copy_negate())

    def _combine(self, other: Quantity, addend: Decimal) -> Quantity:
        a = self.value
        # Exact sum: the span from the highest digit (+1 for a carry) down to the lowest exponent.
        top = max(a.adjusted(), addend.adjusted()) + 1
        bottom = min(_exponent(a), _exponent(addend))
        if top - bottom > 10 * _MAX_DIGITS:
            raise QuantityError(f"cannot add {self} and {other} exactly: magnitudes too far apart")
        total = _context(top - bottom + 1, exact=True).add(a, addend)
        # apimachinery's Add/Sub: a zero receiver takes the other operand's format.
        return Quantity(total, other.format if a.is_zero() else self.format)

    def scaled(self, factor: Decimal | int, round_to: Decimal | int = Decimal("0.001"),
               rounding: str = decimal.ROUND_DOWN) -> Quantity:
        """``self * factor`` rounded to a multiple of ``round_to`` with ``rounding``; keeps the format.

        The product and the rounding are exact (rational arithmetic), e.g. ``4Gi`` scaled by 0.2 to
        a multiple of 1 is 858993459. Results finer than nano are then rounded like parse() does.
        """
        f = _as_decimal(factor, "factor")
        step = _as_decimal(round_to, "round_to")
        if step <= 0:
            raise ValueError(f"round_to must be positive, got {step}")
        if rounding not in _ROUNDINGS:
            raise ValueError(f"unknown rounding mode {rounding!r}")
        value_digits, factor_digits, step_digits = _check_bounded(self.value, f, step)
        product = _context(value_digits + factor_digits + 1, exact=True).multiply(self.value, f)
        pn, pd = product.as_integer_ratio()
        sn, sd = step.as_integer_ratio()
        multiples = _round_ratio(pn * sd, pd * sn, rounding)
        q = Decimal(multiples)
        result = _context(_digits(q) + step_digits + 1, exact=True).multiply(q, step)
        return Quantity(result, self.format)

    # -- conversions ------------------------------------------------------------------------

    def int_value(self) -> int:
        """The value rounded to an integer away from zero (apimachinery ``Value()``), unbounded."""
        return self._rounded_int(self.value)

    def milli_value(self) -> int:
        """``value * 1000`` rounded to an integer away from zero (apimachinery ``MilliValue()``)."""
        return self._rounded_int(self.value.scaleb(3, context=_context(_digits(self.value), exact=True)))

    @staticmethod
    def _rounded_int(d: Decimal) -> int:
        _check_bounded(d)
        return int(d.to_integral_value(rounding=decimal.ROUND_UP, context=_context(0, exact=False)))

    def as_approximate_float(self) -> float:
        """The nearest float (±inf beyond float range); for display and heuristics only."""
        return float(self.value)

    def sign(self) -> int:
        """-1, 0 or 1."""
        return 0 if self.value.is_zero() else (-1 if self.value.is_signed() else 1)

    def is_integer(self) -> bool:
        """Whether the value has no fractional part."""
        return _exponent(self.value) >= 0 or self.value == self.value.to_integral_value(
            context=_context(0, exact=False))

    # -- comparison (value only; format ignored, as apimachinery's Cmp/Equal) ---------------

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1 as ``self`` is less than, equal to or greater than ``other``."""
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value <= other.value

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value > other.value

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value >= other.value


def _parse_exponent(s: str, text: str) -> int:
    # apimachinery reads the exponent as an int64 and then truncates it to int32, silently
    # wrapping; we refuse anything outside int32 instead of inventing a different value.
    # Leading zeros are legal ("1e003"); stripping them keeps int() clear of its digit limit.
    negative = text.startswith("-")
    digits = text.lstrip("+-").lstrip("0") or "0"
    magnitude = int(digits) if len(digits) <= 10 else 2**32
    exp = -magnitude if negative else magnitude
    if not -(2**31) <= exp < 2**31:
        raise QuantityError(f"invalid quantity {s!r}: exponent {text!r} out of range")
    return exp


def _diagnose(s: str) -> str:
    """A human reason for a rejected string."""
    if s == "":
        return "empty string"
    if s != s.strip():
        return "leading or trailing whitespace"
    prefix = _NUMBER_PREFIX_RE.match(s)
    if prefix is None:
        return "expected a number ([+-]digits[.digits]) at the start"
    rest = s[prefix.end():]
    return (f"unknown suffix {rest!r} (expected one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, "
            "or e/E followed by an integer)")


def _format_decimal(v: Decimal, fmt: Format) -> str:
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    mantissa = list(digits)
    while len(mantissa) > 1 and mantissa[-1] == 0:  # move factors of ten into the exponent
        mantissa.pop()
        exp += 1
    while exp % 3:  # then lower the exponent to a multiple of three (1e4 -> 10e3 -> "10k")
        mantissa.append(0)
        exp -= 1
    text = ("-" if sign else "") + "".join(map(str, mantissa))
    if fmt is Format.DECIMAL_SI and exp in DECIMAL_SUFFIXES:
        return text + DECIMAL_SUFFIXES[exp]
    # DecimalExponent, or a DecimalSI exponent without a suffix (beyond "E"): "e" notation.
    return text if exp == 0 else f"{text}e{exp}"


def _format_binary(n: int) -> str:
    mag, power = abs(n), 0
    # Stop at Ei: apimachinery has no larger suffix (it would drop the exponent; we write 1024Ei).
    while power < len(_BINARY_SUFFIXES) - 1 and mag % 1024 == 0:
        mag //= 1024
        power += 1
    return f"{'-' if n < 0 else ''}{mag}{_BINARY_SUFFIXES[power]}"


def parse_quantity(s: str) -> Quantity:
    """Alias of :meth:`Quantity.parse`."""
    return Quantity.parse(s)


def is_quantity(s: object) -> bool:
    """Whether ``s`` is a string Kubernetes accepts as a quantity."""
    if not isinstance(s, str):
        return False
    try:
        Quantity.parse(s)
    except QuantityError:
        return False
    return True
