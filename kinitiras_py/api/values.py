"""Value shapes shared by override and validate rules: constant values, decimal strings, and the
enums every rule carries (target operations, failure policy)."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.core import Int64
from kinitiras_py.api.schema import Check, Model, OneOf, Pattern, prop
from kinitiras_py.base.typedefs import JSON

TARGET_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
"""``*`` means every operation (kinitiras matched it literally, so it matched nothing)."""
FAILURE_POLICIES = ("Fail", "Ignore")

DECIMAL_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def _finite_problem(text: str) -> str | None:
    # The pattern admits "1e400"; CEL, JSON and the API server hold 64-bit floats, which it overflows.
    return None if math.isfinite(float(text)) else f"{text} is beyond the range of a 64-bit float"


Decimal = Annotated[str, Pattern(DECIMAL_PATTERN, 'a decimal number written as a string, e.g. "0.5"'),
                    Check(_finite_problem)]
"""A float kept as a string, as kinitiras does (``"1.2"``), so it round-trips exactly."""

TargetOperation = Annotated[str, OneOf(TARGET_OPERATIONS)]
FailurePolicy = Annotated[str, OneOf(FAILURE_POLICIES)]


@dataclass(frozen=True, kw_only=True)
class ConstantValue(Model):
    """A constant; set one field. The first one set, in this order, is the value (slices and maps
    count only when non-empty)."""

    string: str | None = prop("A string.")
    integer: Int64 | None = prop("A 64-bit integer.")
    float: Decimal | None = prop('A decimal number written as a string, e.g. "1.2".')
    boolean: bool | None = prop("true or false.")
    string_slice: list[str] = prop("A list of strings.", factory=list)
    integer_slice: list[Int64] = prop("A list of integers.", factory=list)
    float_slice: list[Decimal] = prop('A list of decimal numbers written as strings, e.g. ["1.2"].',
                                      factory=list)
    string_map: dict[str, str] = prop("String keys and values; for annotations and labels each pair "
                                      "is set, and path is ignored.", factory=dict)

    def value(self) -> JSON:
        """The value this constant stands for, or None when no field is set."""
        for scalar in (self.string, self.integer, self.float, self.boolean):
            if scalar is not None:
                return scalar
        for many in (self.string_slice, self.integer_slice, self.float_slice, self.string_map):
            if many:
                return many
        return None

    def written(self) -> bool:
        """Whether any field is written at all, even null or empty: ``value: {}`` is not, and a
        written constant wins over a ``valueRef`` (``{string: null}`` then fails as empty)."""
        return bool(self.raw)
