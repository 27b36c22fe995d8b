"""The class of a compiled CUE program's failure, named in the rule error as CUE would class it.

CUE reports three kinds of failure a kinitiras user sees: an incomplete value or undefined field
(missing data: a field that is not there, an index out of bounds, a value left open), conflicting
values (a unification that fails) and everything else (kinds that do not fit an operator or a
function, an explicit ``_|_``, a bad regular expression). A compiled program fails either through
``cue: <kind>:`` text of its own or through CEL's own error (a missing key, an index out of
range), and both are classed here; ``unsupported`` marks where CUE would have computed a value.
"""

from __future__ import annotations

from collections.abc import Mapping

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.evaluation.celbindings import Bindings

_OWN = {"cue: incomplete:": "incomplete", "cue: conflict:": "conflict", "cue: invalid:": "other",
        "cue: unsupported:": "unsupported"}
_CEL_MISSING = ("no such key:", "Index error")


def error_class(message: str) -> str:
    """``incomplete``, ``conflict``, ``other`` or ``unsupported`` for a compiled program's error text."""
    for marker, kind in _OWN.items():
        if marker in message:
            return kind
    if "overflow" in message:
        return "unsupported"  # CUE's integers are unbounded
    return "incomplete" if message.startswith(_CEL_MISSING) else "other"


def evaluate(program: Program, variables: Mapping[str, JSON] | Bindings) -> JSON:
    """Run a compiled ``cue`` program; a failure names its class: ``cue error (incomplete): ...``."""
    try:
        return program.evaluate(variables)
    except CelEvalError as e:
        raise CelEvalError(f"cue error ({error_class(str(e))}): {e}") from None
