"""A policy dict → a CompiledPolicy: model checks, semantic checks, rendering, CEL compilation.

This is also the policy check the webhook runs when a policy is admitted: every problem is
reported with its field path, all at once. The model (schema) problems and the semantic ones
(selectors, templates, CEL, plaintext, origin) are gathered together; a semantic problem at a
path the model already reported on (the same field, a field inside it, or one enclosing it) is
left out, so each mistake is reported once. Compilation happens once per policy version.
Each rule is assembled from its kinds (:mod:`..kinds`) by :mod:`.overriderules` or :mod:`.validaterules`.

Problems that do not stop a policy from working (credentials written inline, a selector that
can never match, an ignored setting) are returned as ``CompiledPolicy.warnings``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kinitiras_py.api import policies as models
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking import shapes
from kinitiras_py.engine.checking.checker import Checker, check_reference, dict_of, list_of
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.kinds.base import EMPTY
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.policies import policylevel
from kinitiras_py.engine.policies.compiled import (
    CLUSTER_KINDS,
    VALIDATE_KINDS,
    CompiledOverrideRule,
    CompiledPolicy,
    CompiledRule,
    CompiledValidateRule,
    EitherPolicy,
)
from kinitiras_py.engine.policies.overriderules import override_rule
from kinitiras_py.engine.policies.validaterules import validate_rule
from kinitiras_py.engine.rendering import injecting


def compile_policy(obj: Obj) -> EitherPolicy:
    """Check and compile a policy; raise PolicyErrors listing every problem with its field path."""
    ref = models.policy_ref(obj) if isinstance(obj, dict) else None
    model_errors: list[PolicyError] = []
    try:
        models.parse_policy(obj)
    except PolicyErrors as e:
        model_errors = list(e.errors)
    if not isinstance(obj, dict) or any(e.path in ("", "apiVersion", "kind") for e in model_errors):
        raise PolicyErrors(model_errors, ref)  # not one of our kinds: nothing more to check
    kind = str(obj["kind"])
    checker = Checker(ref or kind, tolerant=bool(model_errors))
    spec = dict_of(obj.get("spec"))
    meta = dict_of(obj.get("metadata"))
    namespace = None if kind in CLUSTER_KINDS else meta.get("namespace")
    checker.name, checker.namespace = str(meta.get("name", "")), namespace
    sels = list_of(spec.get("resourceSelectors"))
    checker.kinds = shapes.Kinds.of(sels)
    checker.params = frozenset(str(name) for name in dict_of(spec.get("valueRefs")))
    checker.run(_check_selectors, sels)
    _selector_warnings(checker, sels, namespace)
    validating = kind in ("ClusterValidatePolicy", "ValidatePolicy")
    rendered: dict[int, str] = {}
    validate_rules: list[CompiledValidateRule] = []
    override_rules: list[CompiledOverrideRule] = []
    if validating:
        validate_rules = _rules(checker, list_of(spec.get("validateRules")), "validateRules", validate_rule, rendered)
    else:
        override_rules = _rules(checker, list_of(spec.get("overrideRules")), "overrideRules", override_rule, rendered)
    rules: Sequence[CompiledRule] = validate_rules or override_rules
    refs = checker.run(policylevel.value_refs, dict_of(spec.get("valueRefs"))) or {}
    for name, value_ref in refs.items():  # not ``ref``: that names the policy in its errors
        check_reference(checker, value_ref, f"spec.valueRefs.{name}")
    conditions = checker.run(policylevel.match_conditions, checker, list_of(spec.get("matchConditions")), refs)
    # Only our own marker is named after the policy; a rule's own marker key is checked with the rule.
    if any(isinstance(rule, CompiledOverrideRule) and rule.inject is not None and rule.inject.marker is None
           for rule in rules):
        checker.run(injecting.check_marker, kind, str(meta.get("name", "")))
    if any(rule.javascript is not None and rule.javascript.hooks is not None and rule.javascript.hooks.watches
           for rule in rules):
        checker.run(_check_watched, sels)
    errors = model_errors + _not_overlapping(checker.errors, model_errors)
    if errors:
        raise PolicyErrors(errors, ref)
    if validating:
        return _assembled(tuple(validate_rules), kind, namespace, meta, spec, rendered, checker, conditions, refs)
    return _assembled(tuple(override_rules), kind, namespace, meta, spec, rendered, checker, conditions, refs)


RuleT = TypeVar("RuleT", bound=CompiledRule)


def _rules(checker: Checker, written: list[Any], field: str,
           build: Callable[[Checker, Obj, int, str], tuple[RuleT, str | None]], rendered: dict[int, str]
           ) -> list[RuleT]:
    """The rules ``written`` at ``spec.<field>`` checked and compiled by ``build`` (those that
    fail are left out, their errors in ``checker``); the source each template rendered goes
    into ``rendered`` by rule index."""
    rules: list[RuleT] = []
    for i, rule in enumerate(written):
        built = checker.run(build, checker, dict_of(rule), i, f"spec.{field}[{i}]")
        if built is not None:
            rules.append(built[0])
            if built[1] is not None:
                # One string per distinct rendered text: many policies render the same template alike.
                rendered[i] = sys.intern(built[1])
    return rules


def _assembled(rules: tuple[RuleT, ...], kind: str, namespace: str | None, meta: Obj, spec: Obj,
               rendered: dict[int, str], checker: Checker, conditions: Program | None, refs: dict[str, Obj]
               ) -> CompiledPolicy[RuleT]:
    """The compiled policy of ``rules`` (all checked) and what was found beside them."""
    tier = spec.get("executionTier") if kind not in VALIDATE_KINDS else 0
    return CompiledPolicy(
        kind=kind, name=str(meta.get("name", "")), namespace=namespace,
        uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
        selectors=list(spec.get("resourceSelectors") or []), rules=rules, rendered=rendered,
        warnings=tuple(checker.warnings), javascript_only=bool(rules) and all(_javascript_only(r) for r in rules),
        conditions=conditions,
        tier=tier if isinstance(tier, int) and not isinstance(tier, bool) else 0,
        rendered_fields=tuple(checker.rendered_fields), refs=refs or EMPTY, http_refs=tuple(checker.http_refs),
    )


def _javascript_only(rule: CompiledOverrideRule | CompiledValidateRule) -> bool:
    """Whether the rule's only part is ``javascript`` (for js-admissions' order)."""
    others = (rule.rendered, rule.cel,
              *((rule.plaintext, rule.origin) if isinstance(rule, CompiledOverrideRule) else ()))
    return rule.javascript is not None and not any(others)


def _check_watched(sels: list[Any]) -> None:
    """Watch hooks follow the objects of the kinds the policy selects: each selector names one."""
    if not sels:
        raise PolicyError("spec.resourceSelectors", "a javascript rule with watch hooks (jsa_created, jsa_updated, "
                          "jsa_deleted) needs selectors naming the apiVersion and kind of the objects it follows")
    errors = [PolicyError(f"spec.resourceSelectors[{i}]", "a javascript rule with watch hooks follows the objects "
                          "of one apiVersion and kind per selector: name both, without *")
              for i, sel in enumerate(sels) if not isinstance(sel, dict)
              or any(not isinstance(sel.get(key), str) or not sel[key] or "*" in sel[key]
                     for key in ("apiVersion", "kind"))]
    if errors:
        raise PolicyErrors(errors)


def _enclosing(path: str) -> list[str]:
    """``path`` and every path it lies inside (cut before each ``.`` or ``[``)."""
    return [path[:i] for i, ch in enumerate(path) if ch in ".["] + [path]


def _not_overlapping(errors: list[PolicyError], reported: list[PolicyError]) -> list[PolicyError]:
    """The ``errors`` whose path is not one of ``reported``'s, nor inside one, nor around one.

    Set lookups keep this linear in the paths' length: a policy with thousands of bad entries
    is refused in milliseconds, not minutes (pairwise comparison was quadratic).
    """
    exact = {e.path for e in reported}
    around = {p for e in reported for p in _enclosing(e.path)}
    return [e for e in errors if e.path not in around and not any(p in exact for p in _enclosing(e.path))]


def _check_selectors(sels: list[Any]) -> None:
    errors: list[PolicyError] = []
    for i, sel in enumerate(sels):
        if not isinstance(sel, dict):
            continue
        base = f"spec.resourceSelectors[{i}]"
        if isinstance(sel.get("labelSelector"), dict):
            errors += selectors.validate_label_selector(sel["labelSelector"], f"{base}.labelSelector")
        if isinstance(sel.get("fieldSelector"), dict):
            errors += selectors.validate_field_selector(sel["fieldSelector"], f"{base}.fieldSelector")
    if errors:
        raise PolicyErrors(errors)


def _selector_warnings(checker: Checker, sels: list[Any], namespace: str | None) -> None:
    for i, sel in enumerate(sels):
        if not isinstance(sel, dict):
            continue
        base = f"spec.resourceSelectors[{i}]"
        if sel.get("name") and (sel.get("labelSelector") or sel.get("fieldSelector")):
            checker.warn(base, "labelSelector and fieldSelector are ignored when name is set")
        if namespace and sel.get("namespace") and sel["namespace"] != namespace:
            checker.warn(f"{base}.namespace", f"this policy only applies in its own namespace {namespace!r}, "
                         f"so a selector for namespace {sel['namespace']!r} never matches")
