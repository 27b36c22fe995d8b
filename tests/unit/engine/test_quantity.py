"""Tests for kinitiras_py.engine.evaluation.quantity.

Expected values come from k8s.io/apimachinery/pkg/api/resource/quantity_test.go (TestQuantityParse,
TestQuantityString, TestQuantityParseEmit, TestParseQuantity, TestAdd/TestSub, TestQuantityCmp,
TestStringQuantityAsApproximateFloat64) restated as data, plus hand-computed cases marked "derived".
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinitiras_py.base.errors import QuantityError
from kinitiras_py.engine.evaluation.quantity import Format, Quantity, is_quantity, parse_quantity

B, D, E = Format.BINARY_SI, Format.DECIMAL_SI, Format.DECIMAL_EXPONENT
MAX_INT64 = 2**63 - 1

# --- TestQuantityParse: input -> exact value and remembered format -------------------------------

PARSE_VALUES: list[tuple[str, Decimal, Format]] = [
    ("0", Decimal(0), D), ("0n", Decimal(0), D), ("0u", Decimal(0), D), ("0m", Decimal(0), D),
    ("0Ki", Decimal(0), B), ("0k", Decimal(0), D), ("0Mi", Decimal(0), B), ("0M", Decimal(0), D),
    ("0Gi", Decimal(0), B), ("0G", Decimal(0), D), ("0Ti", Decimal(0), B), ("0T", Decimal(0), D),
    ("1", Decimal(1), D),
    # binary suffixes
    ("1Ki", Decimal(1024), B), ("8Ki", Decimal(8 * 1024), B), ("7Mi", Decimal(7 * 2**20), B),
    ("6Gi", Decimal(6 * 2**30), B), ("5Ti", Decimal(5 * 2**40), B), ("4Pi", Decimal(4 * 2**50), B),
    ("3Ei", Decimal(3 * 2**60), B), ("10Ti", Decimal(10 * 2**40), B), ("100Ti", Decimal(100 * 2**40), B),
    # decimal suffixes
    ("5n", Decimal("5e-9"), D), ("4u", Decimal("4e-6"), D), ("3m", Decimal("3e-3"), D),
    ("9", Decimal(9), D), ("8k", Decimal("8e3"), D), ("50k", Decimal("5e4"), D), ("7M", Decimal("7e6"), D),
    ("6G", Decimal("6e9"), D), ("5T", Decimal("5e12"), D), ("40T", Decimal("4e13"), D),
    ("300T", Decimal("3e14"), D), ("2P", Decimal("2e15"), D), ("1E", Decimal("1e18"), D),
    # decimal exponents
    ("1E-3", Decimal("1e-3"), E), ("1e3", Decimal("1e3"), E), ("1E6", Decimal("1e6"), E),
    ("1e9", Decimal("1e9"), E), ("1E12", Decimal("1e12"), E), ("1e15", Decimal("1e15"), E),
    ("1E18", Decimal("1e18"), E), ("1e14", Decimal("1e14"), E), ("1e13", Decimal("1e13"), E),
    ("100.035k", Decimal(100035), D),
    # things that look like floating point
    ("0.001", Decimal("1e-3"), D), ("0.0005k", Decimal("0.5"), D), ("0.005", Decimal("5e-3"), D),
    ("0.05", Decimal("5e-2"), D), ("0.5", Decimal("0.5"), D), ("0.00050k", Decimal("0.5"), D),
    ("0.00500", Decimal("5e-3"), D), ("0.05000", Decimal("5e-2"), D), ("0.50000", Decimal("0.5"), D),
    ("0.5e0", Decimal("0.5"), E), ("0.5e-1", Decimal("5e-2"), E), ("0.5e-2", Decimal("5e-3"), E),
    ("10.035M", Decimal("10035e3"), D),
    ("1.2e3", Decimal("12e2"), E), ("1.3E+6", Decimal("13e5"), E), ("1.40e9", Decimal("14e8"), E),
    ("1.53E12", Decimal("153e10"), E), ("1.6e15", Decimal("16e14"), E), ("1.7E18", Decimal("17e17"), E),
    ("9.01", Decimal("9.01"), D), ("8.1k", Decimal(8100), D), ("7.123456M", Decimal(7123456), D),
    ("6.987654321G", Decimal(6987654321), D), ("5.444T", Decimal("5444e9"), D),
    ("40.1T", Decimal("401e11"), D), ("300.2T", Decimal("3002e11"), D), ("2.5P", Decimal("25e14"), D),
    ("1.01E", Decimal("101e16"), D),
    # things that saturate or round (up, at nano)
    ("3.001n", Decimal("4e-9"), D), ("1.1E-9", Decimal("2e-9"), E), ("0.0000000001", Decimal("1e-9"), D),
    ("0.0000000005", Decimal("1e-9"), D), ("0.00000000050", Decimal("1e-9"), D),
    ("0.5e-9", Decimal("1e-9"), E), ("0.9n", Decimal("1e-9"), D),
    ("0.00000012345", Decimal("124e-9"), D), ("0.00000012354", Decimal("124e-9"), D),
    ("9Ei", Decimal(MAX_INT64), B), ("9223372036854775807Ki", Decimal(MAX_INT64), B),
    ("12E", Decimal("12e18"), D),
    # fractional binary
    ("100.035Ki", Decimal("102435.84"), B), ("0.5Mi", Decimal(524288), B),
    ("0.05Gi", Decimal("53687091.2"), B), ("0.025Ti", Decimal("27487790694.4"), B),
    # "things written by trolls"
    ("0.000000000001Ki", Decimal("2e-9"), D), (".001", Decimal("1e-3"), D), (".0001k", Decimal("0.1"), D),
    ("1.", Decimal(1), D), ("1.G", Decimal("1e9"), D),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_VALUES)
def test_parse_value_and_format(text: str, value: Decimal, fmt: Format) -> None:
    q = Quantity.parse(text)
    assert q.value == value
    assert q.format is fmt


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_VALUES)
def test_parse_signed_variants(text: str, value: Decimal, fmt: Format) -> None:
    # apimachinery's table is re-run with "-" and "+" prefixes: same format, negated / same value.
    assert Quantity.parse("-" + text).value == -value
    assert Quantity.parse("-" + text).format is fmt
    assert Quantity.parse("+" + text).value == value
    assert Quantity.parse("+" + text).format is fmt


# --- input -> canonical string -------------------------------------------------------------------

CANONICAL: list[tuple[str, str]] = [
    # TestQuantityString (expected form parses to itself; the alternate spelling canonicalises to it)
    ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("300Mi", "300Mi"), ("307200Ki", "300Mi"), ("6Ki", "6Ki"),
    ("1001Gi", "1001Gi"), ("1025024Mi", "1001Gi"), ("1Ti", "1Ti"), ("1024Gi", "1Ti"), ("5", "5"),
    ("5000m", "5"), ("500m", "500m"), ("0.5", "500m"), ("1G", "1G"), ("1000M", "1G"), ("0.001T", "1G"),
    ("1m", "1m"), ("1000u", "1m"), ("80m", "80m"), ("1080m", "1080m"), ("1.08", "1080m"),
    ("1080000000n", "1080m"), ("300M", "300M"), ("1T", "1T"), ("1E", "1E"),
    ("1e21", "1e21"), ("1000E", "1e21"), ("5e21", "5e21"), ("5000E", "5e21"), ("1e24", "1e24"),
    ("1000000E", "1e24"), ("1234567M", "1234567M"), ("1234567m", "1234567m"), ("3k", "3k"),
    ("1025", "1025"), ("0", "0"), ("00", "0"), ("1e9", "1e9"), (".001e12", "1e9"), ("1e-3", "1e-3"),
    ("0.001e0", "1e-3"), ("1e-9", "1e-9"), ("1000e-12", "1e-9"), ("80e-3", "80e-3"), ("300e6", "300e6"),
    ("1e12", "1e12"), ("1e3", "1e3"), ("3e3", "3e3"), ("1n", "1n"), ("80n", "80n"), ("1080n", "1080n"),
    ("1u", "1u"), ("80u", "80u"), ("1080u", "1080u"),
    # TestQuantityParseEmit
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), (".001Ki", "1024m"), (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
    # TestParseQuantity (big values keep every digit; BinarySI is not involved, so nothing caps)
    ("999999999999999999", "999999999999999999"), ("-999999999999999999.0", "-999999999999999999"),
    ("999999999999999999.1", "999999999999999999100m"), ("9999999999999999999", "9999999999999999999"),
    ("-1E", "-1E"), ("1000000000000000000", "1E"), ("-1000000000000000000.0", "-1E"), ("1.0E", "1E"),
    ("9999999999999999999000m", "9999999999999999999"), ("9999999999999999999.1", "9999999999999999999100m"),
    ("-1.0000000000000000001E", "-1000000000000000000100m"),
    ("1000000000000000000.1", "1000000000000000000100m"), ("1.000000000000000001E", "1000000000000000001"),
    ("10E", "10E"), ("-10000000000000000000", "-10E"), ("10.0E", "10E"), ("10000000000000000000000m", "10E"),
    ("10.0000000000000000001E", "10000000000000000000100m"),
    ("10.000000000000000001E", "10000000000000000001"),
    ("-9223372036854775809", "-9223372036854775809"), ("9223372036854775806000m", "9223372036854775806"),
    ("9223372036854775807", "9223372036854775807"), ("-9223372036854775808000m", "-9223372036854775808"),
    ("9223372036854775808", "9223372036854775808"), ("9223372036854775808.1", "9223372036854775808100m"),
    # examples from the design brief
    ("1.5", "1500m"), ("1.5Gi", "1536Mi"), ("2048Ki", "2Mi"), ("1000", "1k"), ("0.5Gi", "512Mi"),
    ("100m", "100m"), ("1E3", "1e3"), ("12e6", "12e6"),
    # derived by hand from the rules (value first, then the format rule)
    ("9Ei", "9223372036854775807"),  # capped to 2^63-1, odd, so no binary suffix
    ("8Ei", "9223372036854775807"),  # 2^63 is one past the cap
    ("100.035Ki", "102435840m"),  # 102435.84: fractional BinarySI is written as DecimalSI
    ("1.1Ki", "1126400m"), ("1023Ki", "1023Ki"), ("1048575Ki", "1048575Ki"), ("1536", "1536"),
    ("0.5e0", "500e-3"), ("1.5e1", "15"), ("1.5e2", "150"), ("15e2", "1500"), ("1e4", "10e3"),
    ("1e-1", "100e-3"), ("0.1n", "1n"), ("1e-10", "1e-9"), ("12.5k", "12500"),
    ("1e2000000000", "100e1999999998"),
    ("1e-2000000000", "1e-9"), ("1e0003", "1e3"), ("+0.0Gi", "0"), ("-0", "0"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical(text: str, canonical: str) -> None:
    q = Quantity.parse(text)
    assert q.canonical() == canonical
    assert str(q) == canonical


@pytest.mark.parametrize(("text", "canonical"), [c for c in CANONICAL if c[1] != "0" and c[0][0] not in "+-"])
def test_canonical_negated(text: str, canonical: str) -> None:
    assert str(Quantity.parse("-" + text)) == "-" + canonical


def test_canonical_table_is_large() -> None:
    assert len(CANONICAL) >= 60


# --- rejections --------------------------------------------------------------------------------

REJECTED = [
    # TestQuantityParse invalid list, and the empty string
    "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", "",
    # other spellings Kubernetes refuses
    "1K", "1e3Mi", "1 Gi", "1_000", "NaN", "nan", "Infinity", "inf", "-inf", "1ki", "1mi", "1KiB", "1Gb",
    "1e", "1E+", "1e-", "1e3.5", "1ee3", "1EE", "1Ei3", "1Mie3", "--1", "++1", "+-1", "1.5.5", "0x10",
    "1,5", "1e+-3", "\t1", "1\n", "1Gi ", "\u0661", "1e\u0663", "\uff11", "1\u00b5", "1 000",
    "1e99999999999999999999",
]


@pytest.mark.parametrize("text", REJECTED)
def test_rejected(text: str) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(text)
    assert not is_quantity(text)


@pytest.mark.parametrize("text", [".", "-", "+", "-.", "Ki", "m", "E", "e3", ".Gi"])
def test_digitless_mantissa_rejected(text: str) -> None:
    # apimachinery's scanner reads these as 0; its documented grammar (which we follow) does not.
    with pytest.raises(QuantityError):
        Quantity.parse(text)


@pytest.mark.parametrize("text", ["1e2147483648", "1e-2147483649", "1e" + "9" * 5000])
def test_exponent_outside_int32_rejected(text: str) -> None:
    # apimachinery wraps such exponents to int32 silently; refusing is the safe reading.
    with pytest.raises(QuantityError, match="exponent"):
        Quantity.parse(text)


def test_extreme_int32_exponents_accepted() -> None:
    assert str(Quantity.parse("1e2147483647")) == "10e2147483646"
    assert str(Quantity.parse("1e-2147483648")) == "1e-9"


def test_error_message_names_input() -> None:
    with pytest.raises(QuantityError, match=r"'12Kb'.*suffix 'Kb'"):
        Quantity.parse("12Kb")
    with pytest.raises(QuantityError, match="empty"):
        Quantity.parse("")
    with pytest.raises(QuantityError, match="whitespace"):
        Quantity.parse(" 1")
    with pytest.raises(QuantityError, match="string"):
        Quantity.parse(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 1, 1.5, b"1", ["1"], {"a": 1}])
def test_is_quantity_non_strings(value: object) -> None:
    assert is_quantity(value) is False


def test_is_quantity_and_alias() -> None:
    assert is_quantity("1Gi") and is_quantity("-.5e-3") and is_quantity("1.")
    assert parse_quantity("1Gi") == Quantity.parse("1Gi")


def test_long_inputs_stay_exact() -> None:
    digits = "123456789" * 700  # 6300 digits: more than int()'s default string limit
    q = Quantity.parse(digits + "." + digits)
    assert q.value == Decimal(digits + ".123456790")  # ...789|123... rounded up at nano
    assert Quantity.parse("1e" + "0" * 6000 + "3").value == Decimal(1000)


# --- rounding and caps -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("0.1n", "1e-9"), ("-0.1n", "-1e-9"), ("1.000000001n", "2e-9"), ("-1.000000001n", "-2e-9"),
    ("0.0000000015", "2e-9"), ("-0.0000000015", "-2e-9"), ("1.0000000000001", "1.000000001"),
])
def test_nano_rounding_is_away_from_zero(text: str, value: str) -> None:
    assert Quantity.parse(text).value == Decimal(value)


def test_binary_cap_is_symmetric_and_only_for_binary() -> None:
    assert Quantity.parse("-9Ei").value == -MAX_INT64
    assert Quantity.parse("16Ei").value == MAX_INT64
    assert Quantity.parse("9223372036854775808").value == 2**63  # decimal: no cap
    assert Quantity.parse("20E").value == Decimal("2e19")


def test_small_binary_becomes_decimal_si() -> None:
    assert Quantity.parse("0.0001Ki").format is D
    assert Quantity.parse("-0.0001Ki").format is D
    assert Quantity.parse("0.001Ki").format is B  # 1.024 is not below one


def test_binary_format_rules() -> None:
    assert str(Quantity.from_decimal(858993459, B)) == "858993459"
    assert str(Quantity.from_decimal(1023, B)) == "1023"
    assert str(Quantity.from_decimal(-1024, B)) == "-1Ki"
    assert str(Quantity.from_decimal(Decimal("2048.5"), B)) == "2048500m"
    assert str(Quantity.from_decimal(2**63, B)) == "8Ei"  # as apimachinery prints 2^63 BinarySI
    assert str(Quantity.from_decimal(2**70, B)) == "1024Ei"  # Ei is the largest binary suffix


def test_decimal_exponent_format() -> None:
    assert str(Quantity.from_decimal(1500, E)) == "1500"
    assert str(Quantity.from_decimal(Decimal("0.25"), E)) == "250e-3"
    assert str(Quantity.from_decimal(-12000000, E)) == "-12e6"


# --- construction --------------------------------------------------------------------------------

def test_from_decimal() -> None:
    q = Quantity.from_decimal(Decimal("0.0000000001"))
    assert q.value == Decimal("1e-9") and q.format is D
    assert Quantity.from_decimal(7).value == 7
    assert Quantity.from_decimal(Decimal("-0")).value.is_signed() is False
    for bad in (Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")):
        with pytest.raises(QuantityError):
            Quantity.from_decimal(bad)
    with pytest.raises(TypeError):
        Quantity.from_decimal(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Quantity(Decimal(1), "DecimalSI")  # type: ignore[arg-type]


def test_frozen_and_repr() -> None:
    q = Quantity.parse("1Gi")
    with pytest.raises(AttributeError):
        q.value = Decimal(2)  # type: ignore[misc]
    assert repr(q) == "Quantity('1Gi', BinarySI)"


def test_global_context_is_not_used() -> None:
    with decimal.localcontext() as ctx:
        ctx.prec = 3
        ctx.traps[decimal.Inexact] = True
        ctx.Emax = 10
        q = Quantity.parse("123456789012345678901.123456789Gi")
        assert q.value == MAX_INT64
        big = Quantity.parse("123456789012345678901.123456789")
        total = big.add(Quantity.parse("1n"))
        assert str(total) == "123456789012345678901123456790n"
        assert big.milli_value() == 123456789012345678901124
        assert str(big.scaled(Decimal("0.5"))) == "61728394506172839450561m"
        assert Quantity.parse("1e30").compare(Quantity.parse("1e29")) == 1


# --- arithmetic ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "total", "fmt"), [
    # TestAdd
    ("10", "1e1", "20", D), ("10", "1Ki", "1034", D), ("1Ki", "10", "1034", B), ("0", "50", "50", D),
    ("50", "0", "50", D), ("0", "0", "0", D),
    # derived
    ("1Gi", "512Mi", "1536Mi", B), ("100m", "900m", "1", D), ("1.5", "-1.5", "0", D),
    ("4Ei", "4Ei", "8Ei", B), ("1n", "999999999n", "1", D), ("1e3", "1", "1001", E),
])
def test_add(a: str, b: str, total: str, fmt: Format) -> None:
    result = Quantity.parse(a).add(Quantity.parse(b))
    assert str(result) == total
    assert result.format is fmt


@pytest.mark.parametrize(("a", "b", "diff", "fmt"), [
    # TestSub
    ("10", "1e1", "0", D), ("10", "1", "9", D), ("0", "50", "-50", D), ("50", "0", "50", D),
    # derived
    ("1Gi", "512Mi", "512Mi", B), ("1", "1m", "999m", D), ("100m", "1", "-900m", D),
    ("9223372036854775807", "-1", "9223372036854775808", D),
])
def test_sub(a: str, b: str, diff: str, fmt: Format) -> None:
    result = Quantity.parse(a).sub(Quantity.parse(b))
    assert str(result) == diff
    assert result.format is fmt


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_zero_takes_the_other_operands_format(text: str) -> None:
    # TestQuantityAddZeroPreservesSuffix / TestQuantitySubZeroPreservesSuffix
    zero, value = Quantity.parse("0"), Quantity.parse(text)
    assert str(value.add(zero)) == text
    assert str(zero.add(value)) == text
    assert str(value.sub(zero)) == text
    assert str(zero.sub(value)) == "-" + text


@pytest.mark.parametrize(("base", "factor", "round_to", "rounding", "value", "canonical"), [
    ("4Gi", "0.2", "1", decimal.ROUND_DOWN, "858993459", "858993459"),
    ("2", "0.5", "0.001", decimal.ROUND_DOWN, "1", "1"),
    ("1500m", "0.5", "0.001", decimal.ROUND_DOWN, "0.75", "750m"),
    ("1", "0.333", "0.001", decimal.ROUND_DOWN, "0.333", "333m"),
    ("10Gi", "0.1", "0.001", decimal.ROUND_DOWN, "1073741824", "1Gi"),  # exactly 2^30
    ("1", "0.3335", "0.001", decimal.ROUND_DOWN, "0.333", "333m"),
    ("1", "0.3335", "0.001", decimal.ROUND_UP, "0.334", "334m"),
    ("1", "0.3335", "0.001", decimal.ROUND_HALF_EVEN, "0.334", "334m"),
    ("1", "0.3345", "0.001", decimal.ROUND_HALF_EVEN, "0.334", "334m"),
    ("1", "0.3345", "0.001", decimal.ROUND_HALF_UP, "0.335", "335m"),
    ("1", "0.3345", "0.001", decimal.ROUND_HALF_DOWN, "0.334", "334m"),
    ("-1", "0.3335", "0.001", decimal.ROUND_DOWN, "-0.333", "-333m"),
    ("-1", "0.3335", "0.001", decimal.ROUND_FLOOR, "-0.334", "-334m"),
    ("-1", "0.3335", "0.001", decimal.ROUND_CEILING, "-0.333", "-333m"),
    ("1", "0.3331", "0.001", decimal.ROUND_05UP, "0.333", "333m"),
    ("1", "0.3351", "0.001", decimal.ROUND_05UP, "0.336", "336m"),
    ("3Gi", "1", "1048576", decimal.ROUND_DOWN, "3221225472", "3Gi"),
    ("1000", "1", "3", decimal.ROUND_DOWN, "999", "999"),  # round_to need not be a power of ten
    ("1000", "1", "3", decimal.ROUND_HALF_UP, "999", "999"),
    ("1001", "1", "3", decimal.ROUND_HALF_UP, "1002", "1002"),
    ("1", "0.0000000004", "0.000000000001", decimal.ROUND_DOWN, "1e-9", "1n"),  # finer than nano
    ("1k", "2", "1", decimal.ROUND_DOWN, "2000", "2k"),
])
def test_scaled(base: str, factor: str, round_to: str, rounding: str, value: str, canonical: str) -> None:
    original = Quantity.parse(base)
    result = original.scaled(Decimal(factor), Decimal(round_to), rounding)
    assert result.value == Decimal(value)
    assert str(result) == canonical
    assert result.format is original.format


def test_scaled_defaults_and_ints() -> None:
    assert Quantity.parse("1").scaled(Decimal("0.3339")).value == Decimal("0.333")
    assert Quantity.parse("5").scaled(3, 2).value == 14


@pytest.mark.parametrize(("round_to", "rounding", "exc"), [
    (Decimal(0), decimal.ROUND_DOWN, ValueError), (Decimal(-1), decimal.ROUND_DOWN, ValueError),
    (Decimal("1"), "ROUND_SIDEWAYS", ValueError), (Decimal("NaN"), decimal.ROUND_DOWN, QuantityError),
])
def test_scaled_bad_arguments(round_to: Decimal, rounding: str, exc: type[Exception]) -> None:
    with pytest.raises(exc):
        Quantity.parse("1").scaled(Decimal(2), round_to, rounding)


def test_scaled_refuses_unbounded_magnitudes() -> None:
    with pytest.raises(QuantityError):
        Quantity.parse("1e2000000000").scaled(Decimal("0.5"))
    with pytest.raises(QuantityError):
        Quantity.parse("1").scaled(Decimal("1e-99999"))


# --- conversions ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value", "milli"), [
    ("1", 1, 1000), ("1n", 1, 1), ("1u", 1, 1), ("1m", 1, 1), ("100m", 1, 100), ("1.5", 2, 1500),
    ("-1.5", -2, -1500), ("-1n", -1, -1), ("1Ki", 1024, 1024000), ("1Mi", 1048576, 1048576000),
    ("0", 0, 0), ("1.0001m", 1, 2), ("9223372036854775808", 2**63, 2**63 * 1000),
    ("12E", 12 * 10**18, 12 * 10**21),
])
def test_int_and_milli_value(text: str, value: int, milli: int) -> None:
    q = Quantity.parse(text)
    assert q.int_value() == value
    assert q.milli_value() == milli


def test_int_value_refuses_absurd_magnitudes() -> None:
    with pytest.raises(QuantityError):
        Quantity.parse("1e2000000000").int_value()


@pytest.mark.parametrize(("text", "expected"), [
    ("2Ki", 2048.0), ("1.1Ki", 1126.4), ("1Mi", 1.048576e06), ("2Gi", 2.147483648e09), ("12E", 1.2e19),
    ("9Ei", 9.223372036854775807e18), ("0", 0.0), ("12e500", math.inf), ("-12e500", -math.inf),
])
def test_as_approximate_float(text: str, expected: float) -> None:
    assert Quantity.parse(text).as_approximate_float() == expected


def test_sign_and_is_integer() -> None:
    assert [Quantity.parse(s).sign() for s in ("-1n", "0", "-0", "5Gi")] == [-1, 0, 0, 1]
    assert Quantity.parse("1k").is_integer() and Quantity.parse("1000m").is_integer()
    assert not Quantity.parse("1001m").is_integer() and not Quantity.parse("1.1Ki").is_integer()
    assert Quantity.parse("1e2000000000").is_integer()


# --- comparison ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "expected"), [
    ("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1),  # TestQuantityCmp
    ("1Gi", "1073741824", 0), ("1Ki", "1k", 1), ("-1", "1n", -1), ("1e3", "1k", 0),
])
def test_compare(a: str, b: str, expected: int) -> None:
    x, y = Quantity.parse(a), Quantity.parse(b)
    assert x.compare(y) == expected
    assert y.compare(x) == -expected
    assert (x == y) is (expected == 0)
    assert (x < y) is (expected < 0)
    assert (x <= y) is (expected <= 0)
    assert (x > y) is (expected > 0)
    assert (x >= y) is (expected >= 0)


def test_equality_ignores_format_and_hashes_by_value() -> None:
    spellings = ["1Gi", "1024Mi", "1073741824", "1.073741824G", "1073741824e0"]
    assert len({Quantity.parse(s) for s in spellings}) == 1
    assert Quantity.parse("1") == Quantity.parse("1000m")
    assert Quantity.parse("1") != "1"
    assert sorted([Quantity.parse("1Ki"), Quantity.parse("1k"), Quantity.parse("1")]) == [
        Quantity.parse("1"), Quantity.parse("1k"), Quantity.parse("1Ki")]
    with pytest.raises(TypeError):
        _ = Quantity.parse("1") < 2  # type: ignore[operator]


# --- properties ----------------------------------------------------------------------------------

def _quantities() -> st.SearchStrategy[Quantity]:
    decimal_q = st.builds(
        lambda m, e, f: Quantity.from_decimal(Decimal(f"{m}E{e}"), f),
        st.integers(-(10**25), 10**25), st.integers(-12, 30), st.sampled_from([D, E]))
    binary_int = st.builds(lambda n: Quantity.from_decimal(n, B), st.integers(-MAX_INT64, MAX_INT64))
    binary_pow = st.builds(lambda k, p: Quantity.from_decimal(k * 1024**p, B),
                           st.integers(-2048, 2048), st.integers(0, 5))
    binary_frac = st.builds(lambda m, e: Quantity.from_decimal(Decimal(f"{m}E{e}"), B),
                            st.integers(-(10**15), 10**15), st.integers(-12, 3))
    return st.one_of(decimal_q, binary_int, binary_pow, binary_frac)


def _suffixless_binary(q: Quantity, text: str) -> bool:
    # A BinarySI value written without a binary suffix ("2000") re-parses as DecimalSI ("2k").
    return q.format is B and not text.endswith("i")


def test_suffixless_binary_reparses_as_decimal_si() -> None:
    q = Quantity.from_decimal(2000, B)
    assert str(q) == "2000"
    assert Quantity.parse("2000").format is D
    assert str(Quantity.parse(str(q))) == "2k"


@given(_quantities())
def test_round_trip(q: Quantity) -> None:
    text = str(q)
    again = Quantity.parse(text)
    assert again == q
    if not _suffixless_binary(q, text):
        assert str(again) == text
    # Always idempotent from the second pass on.
    assert str(Quantity.parse(str(again))) == str(again)


QUANTITY_TEXT = st.from_regex(
    r"\A[+-]?([0-9]{1,25}|[0-9]{1,12}\.[0-9]{0,12}|\.[0-9]{1,12})"
    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?\Z")


def _oracle(text: str) -> Fraction:
    """The exact value by independent reasoning: Fraction arithmetic, ceil-away-from-zero at nano."""
    body = text.lstrip("+-")
    negative = text.startswith("-")
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
             "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "k": 10**3,
             "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
    number, factor = body, Fraction(1)
    for suffix in sorted(units, key=len, reverse=True):
        if body.endswith(suffix):
            number, factor = body[: -len(suffix)], Fraction(units[suffix])
            break
    else:
        for marker in "eE":
            if marker in body:
                number, exp = body.split(marker)
                factor = Fraction(10) ** int(exp)
    magnitude = Fraction(number if number not in ("", ".") else "0") * factor
    nanos = math.ceil(magnitude * 10**9)
    magnitude = Fraction(nanos, 10**9)
    if body.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
        magnitude = min(magnitude, Fraction(MAX_INT64))
    return -magnitude if negative else magnitude


@given(QUANTITY_TEXT)
def test_parse_matches_oracle_and_canonical_is_stable(text: str) -> None:
    q = Quantity.parse(text)
    assert Fraction(q.value) == _oracle(text)
    canonical = str(q)
    assert Quantity.parse(canonical) == q
    if not _suffixless_binary(q, canonical):
        assert str(Quantity.parse(canonical)) == canonical
    assert canonical.lstrip("-")[0] != "0" or canonical == "0"  # no leading zeros, no fraction
    assert "." not in canonical


@given(_quantities(), _quantities())
def test_arithmetic_properties(a: Quantity, b: Quantity) -> None:
    assert a.add(b).sub(b) == a
    assert a.add(b) == b.add(a)
    assert Fraction(a.add(b).value) == Fraction(a.value) + Fraction(b.value)
    assert a.compare(b) == (Fraction(a.value) > Fraction(b.value)) - (Fraction(a.value) < Fraction(b.value))


@given(_quantities(), st.decimals(min_value=-1000, max_value=1000, places=4, allow_nan=False),
       st.sampled_from([Decimal("0.001"), Decimal(1), Decimal(1024), Decimal("0.5")]))
def test_scaled_down_is_a_truncated_multiple(q: Quantity, factor: Decimal, step: Decimal) -> None:
    result = q.scaled(factor, step, decimal.ROUND_DOWN)
    exact = Fraction(q.value) * Fraction(factor)
    got = Fraction(result.value)
    assert (got / Fraction(step)).denominator == 1
    assert abs(got) <= abs(exact) < abs(got) + Fraction(step)
    assert result.format is q.format


def test_the_shared_exact_context_traps_every_inexact_operation_and_no_exact_one() -> None:
    # Contexts of the usual precision are made once and shared: an operation sets their flags,
    # which must never make a later exact operation fail, nor let a later inexact one pass.
    from kinitiras_py.engine.evaluation import quantity

    exact = quantity._context(10, exact=True)
    assert exact is quantity._context(50, exact=True)
    for _ in range(2):
        with pytest.raises(decimal.Inexact):
            exact.divide(Decimal(1), Decimal(3))
        assert exact.multiply(Decimal("1.5"), Decimal(4)) == 6
        assert parse_quantity("1536Mi").scaled(Decimal("0.5"), Decimal(1)).canonical() == "768Mi"
    third = quantity._context(10, exact=False).divide(Decimal(1), Decimal(3))  # rounded, not refused
    assert third.as_tuple().digits == (3,) * 100
