"""The ``cue`` kind: a CUE program compiled to CEL when the policy is admitted, run after the
rendered template and before ``cel``, with CUE's own error messages."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.base.errors import CelCompileError, PolicyError
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.cue import errors as cue_errors
from kinitiras_py.engine.cue.tree import Unsupported
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kinds.base import Inputs, OverrideStep, failed, patch_ops


@dataclass(frozen=True, slots=True)
class CueOverrider:
    """An override rule's ``cue``: its CEL returns JSON patch operations."""

    program: cel.Program

    def step(self, run: OverrideStep) -> None:
        """Apply the operations the program returns."""
        run.apply(patch_ops(cue_errors.evaluate(self.program, run.inputs()), "the cue rule"))


@dataclass(frozen=True, slots=True)
class CueCheck:
    """A validate rule's ``cue``: its CEL returns a bool or ``{valid, reason}``."""

    program: cel.Program

    def step(self, variables: Inputs, fallback: str) -> str | None:
        """Why the object fails the program, if it does."""
        return failed(cue_errors.evaluate(self.program, variables), "the cue rule", fallback)


def cue_rule(checker: Checker, errors: list[PolicyError], text: object, kind: str, path: str,
             pointer: str) -> cel.Program | None:
    """A ``cue`` program compiled to CEL (``kind``: override or validate) and checked like any CEL,
    its cost included; the CEL is written back at ``pointer``. None when absent or refused."""
    if not text:
        return None
    if not isinstance(text, str):
        errors.append(PolicyError(path, "must be a string holding a CUE program"))
        return None
    try:
        source = compile_cue(text, kind)
    except Unsupported as e:
        errors.append(PolicyError(path, f"CUE outside the supported subset at {e}; see docs/cue.md for "
                                        "what is supported, or write the rule in `cel`"))
        return None
    try:
        program = cel.compile_program(source)
    except CelCompileError as e:
        # The compiled program is ours, not the user's: say what in the CUE text to change.
        reason = f"the CEL compiled from it is refused: {e}"
        if "recursion" in str(e):
            reason = ("CUE nested too deeply to compile: its CEL would be nested deeper than CEL's parser accepts "
                      "(32 levels); nest fewer calls and operators inside one another")
        errors.append(PolicyError(path, reason))
        return None
    checker.rendered_fields.append((pointer, source))
    return program


def compile_override(checker: Checker, errors: list[PolicyError], text: object, index: int,
                     path: str) -> CueOverrider | None:
    """An override rule's ``cue`` at ``path`` compiled; None when absent or refused."""
    program = cue_rule(checker, errors, text, "override", path, f"/spec/overrideRules/{index}/overriders/cueCel")
    return None if program is None else CueOverrider(program)


def compile_check(checker: Checker, errors: list[PolicyError], text: object, index: int,
                  path: str) -> CueCheck | None:
    """A validate rule's ``cue`` at ``path`` compiled; None when absent or refused."""
    program = cue_rule(checker, errors, text, "validate", path, f"/spec/validateRules/{index}/cueCel")
    return None if program is None else CueCheck(program)
