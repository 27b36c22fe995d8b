"""The parts of a policy's spec that apply to the policy as a whole, checked and compiled:
``valueRefs`` (references resolved once per request) and ``matchConditions`` (rendered into one
CEL bool, stored as ``renderedMatchConditions``).

CEL is compiled by :mod:`..checking.checker`, which owns its caching and the checks every user expression gets.
"""

from __future__ import annotations

import re
import sys

from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import REF_SOURCES_WITH_PARAMS, Checker, compile_cel, user_cel
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import criteria

CONDITION_RESULTS = ("BOOL", "DYN")
RENDERED_POINTER = "/spec/renderedMatchConditions"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYNTHETIC = re.compile(r"syntheticRefs\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['\"]([^'\"]*)['\"])")


def value_refs(refs: dict[str, ResourceRefer]) -> dict[str, Obj]:
    """``spec.valueRefs``: identifiers naming references that are fetched (k8s, owner, http).
    The references as written are what requests resolve (the resolver reads their JSON)."""
    errors = []
    for name, ref in refs.items():
        path = f"spec.valueRefs.{name}"
        if ref is None:  # not an object: its model error says so
            continue
        if not _NAME.fullmatch(name):
            errors.append(PolicyError(path, "a name must be an identifier (it is read as params.<name>)"))
        if name == "namespace":
            errors.append(PolicyError(path, "namespace is the request's Namespace already (namespaceObject)"))
        if ref.from_ not in REF_SOURCES_WITH_PARAMS:
            errors.append(PolicyError(f"{path}.from", "only k8s, owner and http are fetched; rules read the "
                                                      "current and old object as object and oldObject"))
    if errors:
        raise PolicyErrors(errors)
    return {name: ref.raw for name, ref in refs.items() if ref is not None}


def match_conditions(checker: Checker, conditions: list[MatchCondition], refs: dict[str, Obj]) -> cel.Program | None:
    """``spec.matchConditions`` as one program (None without any); its source is recorded as
    ``renderedMatchConditions``. Raises PolicyErrors naming each bad condition's field."""
    path = "spec.matchConditions"
    errors: list[PolicyError] = []
    for i, condition in enumerate(conditions):
        if condition is not None and condition.expression is not None:
            where = f"{path}[{i}].expression"
            program = checker.collect(errors, user_cel, condition.expression, where, CONDITION_RESULTS,
                                      "a match condition must return a bool")
            checker.check_cel(errors, program, where, ())  # conditions see the policy's valueRefs only
        elif condition is not None and condition.select is not None:
            for m in _SYNTHETIC.finditer(condition.select):
                name = m.group(1) or m.group(2)
                if name != "namespace" and name not in refs:
                    errors.append(PolicyError(f"{path}[{i}].select", f"$.syntheticRefs.{name} is neither the "
                                              "namespace nor one of the policy's valueRefs"))
            # Alone first, so that a select whose CEL costs too much is refused at its own field.
            source = checker.collect(errors, criteria.criterion, condition, f"{path}[{i}]")
            if source is not None:
                program = checker.collect(errors, compile_cel, source, f"{path}[{i}].select")
                checker.check_cel(errors, program, f"{path}[{i}].select", ())
    if errors:
        raise PolicyErrors(errors)
    source, problems = criteria.render([c for c in conditions if c is not None], path)
    if problems:
        raise PolicyErrors(problems)
    if source is None:
        return None
    program = compile_cel(source, path)
    checker.rendered_fields.append((RENDERED_POINTER, sys.intern(source)))
    return program
