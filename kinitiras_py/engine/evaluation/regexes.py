"""Regular expressions checked by the engine that runs them.

CEL's ``matches`` runs RE2 (inside cel-expr-python), whose syntax differs from Python's ``re``:
no look-around or backreferences, repetition counts up to 1000, ``\\z`` but no ``\\Z``, Unicode
classes such as ``\\pL``. A pattern is therefore checked by running ``matches`` with it once.
"""

from __future__ import annotations

import functools

from kinitiras_py.base.errors import CelEvalError
from kinitiras_py.engine.evaluation import cel

_PROBE = "''.matches(params)"


@functools.lru_cache(maxsize=256)
def regex_problem(pattern: str) -> str | None:
    """Why RE2 refuses ``pattern`` (its own words), or None when CEL's ``matches`` accepts it."""
    try:
        cel.compile_program(_PROBE).evaluate({"params": pattern})
    except CelEvalError as e:
        return str(e)
    return None
