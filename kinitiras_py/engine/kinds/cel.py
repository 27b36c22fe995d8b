"""The ``cel`` kind: a user's CEL expression, returning JSON patch operations (override, run after
``cue`` and before ``javascript``) or a bool or ``{valid, reason}`` (validate)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kinitiras_py.base.errors import CelEvalError, PolicyError
from kinitiras_py.engine.checking.checker import Checker, user_cel
from kinitiras_py.engine.evaluation import cel, celenv
from kinitiras_py.engine.kinds.base import Inputs, OverrideStep, failed, patch_ops
from kinitiras_py.engine.objects import patching

# The static result types a `cel` override or check may have (cel-expr-python type names).
_OVERRIDE_RESULTS = ("LIST", "DYN")
_VALIDATE_RESULTS = ("BOOL", "MAP", "DYN")


@dataclass(frozen=True, slots=True)
class CelOverrider:
    """An override rule's ``cel``."""

    program: cel.Program

    def step(self, run: OverrideStep) -> None:
        """Apply the operations the expression returns."""
        run.apply(patch_ops(self.program.evaluate(run.inputs()), "the cel rule"))


@dataclass(frozen=True, slots=True)
class CelCheck:
    """A validate rule's ``cel``."""

    program: cel.Program

    def step(self, variables: Inputs, fallback: str) -> str | None:
        """Why the object fails the expression, if it does."""
        return failed(self.program.evaluate(variables), "the cel rule", fallback)


def compile_override(checker: Checker, errors: list[PolicyError], source: object, path: str,
                     refs: Iterable[str]) -> CelOverrider | None:
    """The ``cel`` overrider at ``path`` compiled and checked; None when absent or refused.
    ``refs`` names the rule's own references."""
    if not source:
        return None
    custom = checker.collect(errors, user_cel, source, path, _OVERRIDE_RESULTS,
                             "an override must return a list of JSON patch operations")
    if custom is None:
        return None
    constant = _constant_override(custom, path)
    errors += constant
    if not constant:  # a program reading no input was evaluated whole: nothing more to find
        checker.check_cel(errors, custom, path, refs)
    return CelOverrider(custom)


def compile_check(checker: Checker, errors: list[PolicyError], source: object, path: str,
                  refs: Iterable[str]) -> CelCheck | None:
    """The ``cel`` check at ``path`` compiled and checked; None when absent or refused."""
    if not source:
        return None
    custom = checker.collect(errors, user_cel, source, path, _VALIDATE_RESULTS,
                             "a validate rule must return a bool or a map {valid, reason}")
    checker.check_cel(errors, custom, path, refs)
    return None if custom is None else CelCheck(custom)


_INPUTS = re.compile(r"\b(?:" + "|".join(celenv.VARIABLES) + r")\b")
_POINTER = re.compile(r"(/([^~/]|~[01])*)*")
_PATCH_OPS = {"add": "value", "replace": "value", "test": "value", "remove": None, "move": "from", "copy": "from"}


def _constant_override(program: cel.Program, path: str) -> list[PolicyError]:
    """A `cel` overrider that names no input returns the same operations on every request:
    check them once, now, instead of failing every request."""
    if _INPUTS.search(program.source):
        return []
    try:
        ops = program.evaluate({}, remember=False)
    except CelEvalError as e:
        return [PolicyError(path, f"the expression reads no input and fails on every request: {e}")]
    problems = []
    for i, op in enumerate(ops if isinstance(ops, list) else [ops]):
        name = op.get("op") if isinstance(op, dict) else None
        if name not in _PATCH_OPS:
            problems.append(f"[{i}] has no op among {', '.join(_PATCH_OPS)}")
        elif not isinstance(op.get("path"), str) or not _POINTER.fullmatch(op["path"]):
            problems.append(f"[{i}] ({name}) has no path that is a JSON pointer")
        elif _PATCH_OPS[name] and _PATCH_OPS[name] not in op:
            problems.append(f"[{i}] ({name}) has no {_PATCH_OPS[name]}")
        elif deep := patching.too_deep(op["path"].count("/"), op.get("value")):
            problems.append(f"[{i}] ({name}): {deep}")
    if not problems:
        return []
    return [PolicyError(path, "the expression reads no input and always returns invalid JSON patch operations: "
                              + "; ".join(problems))]
