"""The int fast path of ``q.scale(factor, roundTo)`` (:mod:`.scaling`) gives exactly what the
Decimal quantity module gives, for every quantity it answers, and answers the common forms."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinitiras_py.base.errors import CelEvalError, QuantityError
from kinitiras_py.engine.evaluation import celext
from kinitiras_py.engine.evaluation.cel import compile_program
from kinitiras_py.engine.evaluation.quantity import Quantity
from kinitiras_py.engine.evaluation.scaling import scale_common, scale_plan

SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "u", "n", "e3", "E-2", "e0"]
# The oversell template's roundTo values, and others the plan handles (or refuses) differently.
ROUNDINGS = ["0.001", "1", "0.000001", "0.000000001", "1000", "5", "0.005", "0.01", "1E+3", "0.0000000001"]

digits = st.text("0123456789", min_size=0, max_size=17)
quantities = st.builds(lambda sign, whole, dot, fraction, suffix: f"{sign}{whole}{dot}{fraction}{suffix}",
                       st.sampled_from(["", "", "", "+", "-"]), digits, st.sampled_from(["", "", "."]),
                       st.text("0123456789", max_size=4), st.sampled_from(SUFFIXES))
factors = st.one_of(
    st.decimals(min_value=Decimal("0.000001"), max_value=1, places=6).map(str),
    st.sampled_from(["0.5", "0.2", "0.1", "1", "0.333", "1E-7", "0.123456789012345678901", "1E-20", " 0.5 ", "2",
                     "-0.5", "x", "0"]))


def _exact(text: str, factor: str, round_to: str) -> str:
    return Quantity.parse(text).scaled(Decimal(factor.strip()), Decimal(round_to)).canonical()


@settings(max_examples=3000, deadline=None)
@given(text=quantities, factor=factors, round_to=st.sampled_from(ROUNDINGS))
@example(text="1000Ei", factor="1E-20", round_to="1")  # beyond the BinarySI parse cap: capped, then scaled
@example(text="999999999999999.999Ei", factor="0.000001", round_to="1000")
@example(text="7Ei", factor="1", round_to="1")
@example(text="1", factor="0.5" + "0" * 5000, round_to="1")  # refused by the exact path: too many places
@example(text="1", factor="1E-5000", round_to="1")
@example(text="1023Ki", factor="1", round_to="1")  # BinarySI, written in decimal below 1024Ki
@example(text="1.5Gi", factor="0.5", round_to="1")
@example(text="0.001Ki", factor="0.5", round_to="0.001")
@example(text="9E", factor="1", round_to="0.001")
def test_the_fast_path_gives_what_the_quantity_module_gives(text: str, factor: str, round_to: str) -> None:
    fast = scale_common(text, factor, round_to)
    if fast is not None:
        assert fast == _exact(text, factor, round_to), (text, factor, round_to[:20])


COMMON = ["500m", "1", "2", "128Mi", "1Gi", "1.5", "100M", "0", "250m", "64Mi", "1.5Gi", "0.1", "4", "2Gi", "100k",
          "1Ki", "1T", "1.25"]


@pytest.mark.parametrize("factor,round_to", [("0.5", "0.001"), ("0.2", "1"), ("0.1", "1"), ("1", "1")])
@pytest.mark.parametrize("text", COMMON)
def test_the_common_forms_take_the_fast_path(text: str, factor: str, round_to: str) -> None:
    assert scale_common(text, factor, round_to) == _exact(text, factor, round_to)


@pytest.mark.parametrize("text", ["1e3", "+1", "-1", "1.", ".5", "1.2345", "100u", "3n", "1234567890123456",
                                  "12345678901234567890", "8Ei", "1 ", "", "x", "٣"])
def test_the_rare_forms_are_left_to_the_quantity_module(text: str) -> None:
    assert scale_common(text, "0.5", "0.001") is None


@pytest.mark.parametrize("factor,round_to", [("x", "1"), ("0", "1"), ("-0.5", "1"), ("NaN", "1"), ("0.5", "0"),
                                             ("0.5", "0.01"), ("0.5", "0.0000000001"), ("0.5", "Infinity")])
def test_no_plan_where_scale_refuses_or_rounds_otherwise(factor: str, round_to: str) -> None:
    assert scale_plan(factor, round_to) is None


@settings(max_examples=300, deadline=None)
@given(text=quantities, factor=st.sampled_from(["0.5", "0.2", "1"]), round_to=st.sampled_from(["0.001", "1"]))
@example(text="1.5Gi", factor="0.5", round_to="1")
@example(text="1e3", factor="0.5", round_to="0.001")
def test_cel_scale_answers_as_the_quantity_module(text: str, factor: str, round_to: str) -> None:
    """What a stored program calls: the same answer or the same refusal as the Decimal path."""
    celext.scale.cache_clear()
    program = compile_program(f"object.q.scale({factor!r}, {round_to!r})".replace("'", '"'))
    try:
        want: str = _exact(text, factor, round_to)
    except QuantityError as e:
        with pytest.raises(CelEvalError) as raised:
            program.evaluate({"object": {"q": text}}, remember=False)
        assert str(e) in str(raised.value)
    else:
        assert program.evaluate({"object": {"q": text}}, remember=False) == want
