"""A policy dict → a CompiledPolicy: model checks, semantic checks, rendering, CEL compilation.

The compiler reads the policy's typed model (:func:`..api.policies.parse_policy_partial`), never
the raw dicts: when the model has problems, the fields that failed are absent from it (their
default, or None), and the semantic checks still run on the rest.

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
from typing import TypeVar

from kinitiras_py.api import policies as models
from kinitiras_py.api.overrides import OverridePolicySpec, OverrideRule
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.api.validations import ValidatePolicySpec, ValidateRule
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking import shapes
from kinitiras_py.engine.checking.checker import Checker, check_reference
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.kinds.base import EMPTY
from kinitiras_py.engine.objects import selectors
from kinitiras_py.engine.policies import policylevel
from kinitiras_py.engine.policies.compiled import (
    CLUSTER_KINDS,
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
    model, model_errors = models.parse_policy_partial(obj)
    if model is None or any(e.path in ("", "apiVersion", "kind") for e in model_errors):
        raise PolicyErrors(model_errors, ref)  # not one of our kinds: nothing more to check
    kind = model.INFO.kind
    checker = Checker(ref or kind, tolerant=bool(model_errors), failed=frozenset(e.path for e in model_errors))
    meta = model.metadata or models.ObjectMeta()
    namespace = None if kind in CLUSTER_KINDS else meta.namespace
    checker.name, checker.namespace = meta.name, namespace
    spec = model.spec
    sels = spec.resource_selectors if spec is not None else []
    written_refs = spec.value_refs if spec is not None else {}
    checker.kinds = shapes.Kinds.of(sels)
    checker.params = frozenset(written_refs)
    checker.run(_check_selectors, sels)
    _selector_warnings(checker, sels, namespace)
    rendered: dict[int, str] = {}
    validate_rules: list[CompiledValidateRule] = []
    override_rules: list[CompiledOverrideRule] = []
    if isinstance(spec, ValidatePolicySpec):
        validate_rules = _rules(checker, spec.validate_rules, "validateRules", validate_rule, rendered)
    elif isinstance(spec, OverridePolicySpec):
        override_rules = _rules(checker, spec.override_rules, "overrideRules", override_rule, rendered)
    rules: Sequence[CompiledRule] = validate_rules or override_rules
    refs = checker.run(policylevel.value_refs, written_refs) or {}
    for name in refs:
        check_reference(checker, written_refs[name], f"spec.valueRefs.{name}")
    conditions = checker.run(policylevel.match_conditions, checker,
                             spec.match_conditions if spec is not None else [], refs)
    # Only our own marker is named after the policy; a rule's own marker key is checked with the rule.
    if any(isinstance(rule, CompiledOverrideRule) and rule.inject is not None and rule.inject.marker is None
           for rule in rules):
        checker.run(injecting.check_marker, kind, meta.name)
    if any(rule.javascript is not None and rule.javascript.hooks is not None and rule.javascript.hooks.watches
           for rule in rules):
        checker.run(_check_watched, sels)
    errors = model_errors + _not_overlapping(checker.errors, model_errors)
    if errors:
        raise PolicyErrors(errors, ref)
    assert spec is not None  # a policy without one has a model error
    if isinstance(spec, ValidatePolicySpec):
        return _assembled(tuple(validate_rules), kind, namespace, meta, spec, rendered, checker, conditions, refs)
    return _assembled(tuple(override_rules), kind, namespace, meta, spec, rendered, checker, conditions, refs)


RuleT = TypeVar("RuleT", bound=CompiledRule)
RuleModelT = TypeVar("RuleModelT", OverrideRule, ValidateRule)


def _rules(checker: Checker, written: list[RuleModelT], field: str,
           build: Callable[[Checker, RuleModelT, int, str], tuple[RuleT, str | None]], rendered: dict[int, str]
           ) -> list[RuleT]:
    """The rules ``written`` at ``spec.<field>`` checked and compiled by ``build`` (those that
    fail are left out, their errors in ``checker``); the source each template rendered goes
    into ``rendered`` by rule index. A rule that is not even an object (None in a partial
    model) is left out: its model error says why."""
    rules: list[RuleT] = []
    for i, rule in enumerate(written):
        built = None if rule is None else checker.run(build, checker, rule, i, f"spec.{field}[{i}]")
        if built is not None:
            rules.append(built[0])
            if built[1] is not None:
                # One string per distinct rendered text: many policies render the same template alike.
                rendered[i] = sys.intern(built[1])
    return rules


def _assembled(rules: tuple[RuleT, ...], kind: str, namespace: str | None, meta: models.ObjectMeta,
               spec: OverridePolicySpec | ValidatePolicySpec, rendered: dict[int, str], checker: Checker,
               conditions: Program | None, refs: dict[str, Obj]) -> CompiledPolicy[RuleT]:
    """The compiled policy of ``rules`` (all checked) and what was found beside them."""
    return CompiledPolicy(
        kind=kind, name=meta.name, namespace=namespace, uid=meta.uid, generation=meta.generation,
        resource_version=meta.resource_version,
        selectors=[sel.raw for sel in spec.resource_selectors], rules=rules, rendered=rendered,
        warnings=tuple(checker.warnings), javascript_only=bool(rules) and all(_javascript_only(r) for r in rules),
        conditions=conditions, tier=spec.execution_tier if isinstance(spec, OverridePolicySpec) else 0,
        rendered_fields=tuple(checker.rendered_fields), refs=refs or EMPTY, http_refs=tuple(checker.http_refs),
    )


def _javascript_only(rule: CompiledOverrideRule | CompiledValidateRule) -> bool:
    """Whether the rule's only part is ``javascript`` (for js-admissions' order)."""
    others = (rule.rendered, rule.cel,
              *((rule.plaintext, rule.origin) if isinstance(rule, CompiledOverrideRule) else ()))
    return rule.javascript is not None and not any(others)


def _check_watched(sels: list[ResourceSelector]) -> None:
    """Watch hooks follow the objects of the kinds the policy selects: each selector names one."""
    if not sels:
        raise PolicyError("spec.resourceSelectors", "a javascript rule with watch hooks (jsa_created, jsa_updated, "
                          "jsa_deleted) needs selectors naming the apiVersion and kind of the objects it follows")
    errors = [PolicyError(f"spec.resourceSelectors[{i}]", "a javascript rule with watch hooks follows the objects "
                          "of one apiVersion and kind per selector: name both, without *")
              for i, sel in enumerate(sels)
              if sel is None or any(not name or "*" in name for name in (sel.api_version, sel.kind))]
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


def _check_selectors(sels: list[ResourceSelector]) -> None:
    errors: list[PolicyError] = []
    for i, sel in enumerate(sels):
        if sel is None:
            continue
        base = f"spec.resourceSelectors[{i}]"
        if sel.label_selector is not None:
            errors += selectors.selector_problems(sel.label_selector, f"{base}.labelSelector")
        if sel.field_selector is not None:
            errors += selectors.selector_problems(sel.field_selector, f"{base}.fieldSelector")
    if errors:
        raise PolicyErrors(errors)


def _selector_warnings(checker: Checker, sels: list[ResourceSelector], namespace: str | None) -> None:
    for i, sel in enumerate(sels):
        if sel is None:
            continue
        base = f"spec.resourceSelectors[{i}]"
        if sel.name and any(part is not None and part.raw for part in (sel.label_selector, sel.field_selector)):
            checker.warn(base, "labelSelector and fieldSelector are ignored when name is set")
        if namespace and sel.namespace and sel.namespace != namespace:
            checker.warn(f"{base}.namespace", f"this policy only applies in its own namespace {namespace!r}, "
                         f"so a selector for namespace {sel.namespace!r} never matches")
