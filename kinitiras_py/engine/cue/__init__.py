"""kinitiras ``cue`` rules compiled to CEL when a policy is admitted (:func:`compile_cue`).

The program is parsed (:mod:`.syntax` into :mod:`.tree`), compiled by :mod:`.compiler` with the
expressions of :mod:`.operators` and the library calls of :mod:`.packages`; :mod:`.errors` reads
the failures of the compiled CEL as CUE's.
"""

from kinitiras_py.engine.cue import operators
from kinitiras_py.engine.cue.compiler import Compiler


def compile_cue(text: str, kind: str) -> str:
    """The CEL of a kinitiras ``cue`` program for ``kind`` (``override`` or ``validate``);
    :class:`.tree.Unsupported` names what is outside the subset and where."""
    return Compiler(text, kind, operators.expr).compile()
