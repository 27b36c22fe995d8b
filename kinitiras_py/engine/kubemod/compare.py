"""KubeMod's comparison operators rendered to CEL, with the meaning gval gives them in KubeMod.

KubeMod's select language is gval's arithmetic, text and logic languages composed; its
operators try their operands' types in a fixed order (:func:`.kubemodlib.gval_compare`):

* ``==`` and ``!=``: two numbers compare as numbers; so do a number and a string Go's
  ``strconv.ParseFloat`` reads as one, or two such strings (``length(...) == '2'`` holds for
  a length of 2, ``'1.0' == '1'`` holds); anything else is compared as a whole (deep equality);
* ``<``, ``<=``, ``>``, ``>=``: two numbers as numbers, two strings by their bytes
  (``'10' < '9'``), else both as numbers when both read as one, else both printed as Go
  prints them and compared as text (``true > 'false'``); ``null`` on either side is an error
  in KubeMod, false here, like every comparison with an undefined operand.

The common cases run in CEL (two numbers; a string with a string literal; equality with a
literal that is no number); the rest calls ``kubemod.compare``. A literal operand is folded
when the select is compiled, and the CEL stays shallow: a comparison sits at the bottom of a
select's nested loops, under CEL's limit of 32 levels of nesting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kinitiras_py.engine.evaluation.kubemodlib import gval_compare, gval_number
from kinitiras_py.engine.rendering.environment import cel_literal, cel_string

NUMBER_TYPES = "[int, uint, double]"
ORDERINGS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Operand:
    """A compared value: its CEL, and its constant value when it is a literal."""

    expr: str
    constant: str | int | float | bool | None = None
    known: bool = False


def compare(op: str, a: Operand, b: Operand) -> str:
    """CEL bool for ``a op b`` with KubeMod's meaning."""
    if a.known and b.known:
        return "true" if gval_compare(op, a.constant, b.constant) else "false"
    call = f"kubemod.compare({cel_string(op)}, {_dyn(a)}, {_dyn(b)})"
    if not (a.known or b.known):
        return (f"(type({a.expr}) in {NUMBER_TYPES} && type({b.expr}) in {NUMBER_TYPES} "
                f"? double({a.expr}) {op} double({b.expr}) : {call})")
    known, other = (a, b) if a.known else (b, a)
    number = gval_number(known.constant)

    def against(value: str, constant: str) -> str:
        """The other side's ``value`` compared with the literal's ``constant``, in the operands' order."""
        return f"{value} {op} {constant}" if b.known else f"{constant} {op} {value}"

    if op not in ORDERINGS and number is None:  # no number on the literal's side: equality as a whole
        return f"({a.expr} {op} {b.expr})"
    if isinstance(known.constant, str) and op in ORDERINGS:  # two strings: by their bytes
        return f"(type({other.expr}) == string ? {against(other.expr, known.expr)} : {call})"
    if number is not None and math.isfinite(number):
        return (f"(type({other.expr}) in {NUMBER_TYPES} ? {against(f'double({other.expr})', cel_literal(number))} "
                f": {call})")
    return call


def _dyn(side: Operand) -> str:
    return side.expr if not side.known else f"dyn({side.expr})"
