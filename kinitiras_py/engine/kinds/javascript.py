"""The ``javascript`` kind: a js-admissions-controller script (:mod:`..rules.jsrules`), whose
``jsa_mutate`` runs after ``cel`` and before ``plaintext``, and whose ``jsa_validate`` runs after
``cel``."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.api.overrides import Overriders
from kinitiras_py.api.validations import ValidateRule
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.kinds.base import Inputs, OverrideStep
from kinitiras_py.engine.rules import jsrules


@dataclass(frozen=True, slots=True)
class JavascriptOverrider:
    """An override rule's ``javascript``: ``jsa_mutate``, and its marker annotation when set."""

    program: jsrules.JsProgram

    def step(self, run: OverrideStep) -> None:
        """Apply what ``jsa_mutate`` returned; mark the object when the script has a marker."""
        ops = jsrules.mutate_ops(self.program, run.draft.doc, run.variables)
        run.apply(ops or [])
        if ops is not None and self.program.marker is not None:
            run.apply((run.marks or jsrules.Marks()).ops(self.program.marker, run.draft.doc))


@dataclass(frozen=True, slots=True)
class JavascriptCheck:
    """A validate rule's ``javascript``: ``jsa_validate``."""

    program: jsrules.JsProgram

    def step(self, variables: Inputs, fallback: str) -> str | None:
        """Why ``jsa_validate`` refuses the object, if it does (the script's own reason, never ``fallback``)."""
        given = variables.variables if isinstance(variables, Bindings) else variables
        obj = given.get("object")
        valid, reason = jsrules.validate_result(self.program, obj if isinstance(obj, dict) else {}, given)
        return None if valid else reason


def written(holder: Overriders | ValidateRule) -> bool:
    """Whether ``holder`` (overriders or a validate rule) has a ``javascript``; one written as null
    counts, and is refused for its missing source."""
    return holder.javascript is not None or "javascript" in holder.raw


def _load(checker: Checker, errors: list[PolicyError], holder: Overriders | ValidateRule, function: str,
          path: str) -> jsrules.JsProgram | None:
    """The ``javascript`` of ``holder`` loaded for ``function``; None when absent or refused."""
    if not written(holder):
        return None
    where = f"{path}.javascript"
    # A limit or marker the model refused is absent from it: the script is checked, not loaded
    # (it would run under a limit, or without the marker, not written).
    load = not any(checker.model_dropped(f"{where}.{name}") for name in (*jsrules.LIMITS, "marker"))
    program: jsrules.JsProgram | None = checker.collect(errors, jsrules.compile_javascript, holder.javascript,
                                                        function, where, checker.ref, load)
    return program


def compile_override(checker: Checker, errors: list[PolicyError], overriders: Overriders,
                     path: str) -> JavascriptOverrider | None:
    """The ``javascript`` of the ``overriders`` at ``path`` loaded for ``jsa_mutate``; None when absent or refused."""
    program = _load(checker, errors, overriders, jsrules.MUTATE, path)
    return None if program is None else JavascriptOverrider(program)


def compile_check(checker: Checker, errors: list[PolicyError], rule: ValidateRule,
                  path: str) -> JavascriptCheck | None:
    """The ``javascript`` of the validate ``rule`` at ``path`` loaded for ``jsa_validate``; None when absent
    or refused."""
    program = _load(checker, errors, rule, jsrules.VALIDATE, path)
    return None if program is None else JavascriptCheck(program)
