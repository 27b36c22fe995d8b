"""kinitiras ``cue`` rules compiled to CEL when a policy is admitted (:func:`compile_cue`).

The program is read into tokens (:mod:`.lexer`), parsed (:mod:`.syntax` into :mod:`.tree`),
compiled by :mod:`.compiler` with the expressions of :mod:`.operators` and the library calls of
:mod:`.packages`; :mod:`.errors` reads the failures of the compiled CEL as CUE's.
"""

from kinitiras_py.engine.cue import operators
from kinitiras_py.engine.cue.compiler import Compiler


def compile_cue(text: str, kind: str, template: bool = False) -> str:
    """The CEL of a kinitiras ``cue`` program for ``kind`` (``override`` or ``validate``);
    :class:`.tree.Unsupported` names what is outside the subset and where. ``template`` compiles for
    kinitiras' template contract, where the only input is ``data`` (:data:`.compiler.DATA`) as its
    rendered templates read it; a ``cue`` rule's contract gives ``object`` (and ``oldObject``) instead."""
    return Compiler(text, kind, operators.expr, template).compile()
