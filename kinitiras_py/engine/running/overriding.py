"""Run the override rules that apply to an object, in order, and build the response patch.

Each rule writes copy-on-write to a draft of the working object (:class:`..objects.patchlog.Draft`),
which becomes the working object only when all of the rule's overriders succeed: a failing rule
never leaves the object half-changed, a rule with nothing to do costs no copy, and a rule that
changes one field copies only the containers on that field's way. The received object is never
modified, and the final object shares every part no rule changed with it. The patch is built
from the changes the rules made (:class:`..objects.patchlog.PatchLog`), not by diffing the objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kinitiras_py.base.errors import KinitirasError, RuleDenied, RuleError
from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.evaluation.conversionrecord import ConversionRecord
from kinitiras_py.engine.kinds.base import OverrideStep
from kinitiras_py.engine.matching import selection
from kinitiras_py.engine.objects import lastapplied, patchlog
from kinitiras_py.engine.policies.compiled import CompiledOverridePolicy, CompiledOverrideRule, OverrideMatch
from kinitiras_py.engine.policies.results import Mutation, PolicyId, RuleFailure, RuleId
from kinitiras_py.engine.rules import jsrules
from kinitiras_py.engine.running import injection, sidecargroups


def apply_rule(working: Obj, rule: CompiledOverrideRule, policy: CompiledOverridePolicy, variables: dict[str, Any],
               bound: Bindings | None = None, rendered: Program | None = None,
               marks: jsrules.Marks | None = None) -> patchlog.Draft:
    """Apply one rule's overriders in order (rendered, cue, cel, javascript, plaintext, origin), each
    by its kind's step. ``working`` is not modified.

    With ``patchLastApplied`` the operations made are applied to the last-applied-configuration
    annotation too (:mod:`..objects.lastapplied`).

    Each overrider sees the result of the previous one (kinitiras skipped plaintext when origin
    was present; we run all that are set). Returns the draft holding the result and where the
    rule changed it. ``bound``, when given, holds ``variables`` with ``working`` as the object,
    already converted for CEL. ``rendered`` stands in for a sidecar template's program (one read
    from a ConfigMap). ``marks`` holds the names js-admissions' marker annotations hold so far
    in this request (a javascript rule with a ``marker`` adds its own when it returns a Result).
    """
    draft = patchlog.Draft(working)
    applied: Patch = []
    apply = draft.apply
    if rule.last_applied:
        def apply(ops: Patch) -> Any:
            applied.extend(ops)
            return draft.apply(ops)
    run = OverrideStep(working, draft, variables, bound, apply, RuleId(policy.identity, rule.index), rendered, marks)
    for overrider in rule.overriders:
        overrider.step(run)
    if applied:
        lastapplied.follow(draft, applied)
    return draft


def mutate(matches: Iterable[OverrideMatch], obj: Obj, variables: dict[str, Any],
           params: Mapping[RuleId, Obj] | None = None,
           lookup_errors: Mapping[RuleId, str] | None = None,
           programs: Mapping[RuleId, Program] | None = None, features: int | None = None,
           measured: Mapping[str, tuple[Any, int]] | None = None,
           conversions: ConversionRecord | None = None) -> Mutation:
    """Apply every matching rule to ``obj``; return the final object and the patch.

    ``obj`` is not modified; the final object shares the parts no rule changed with it, so
    neither may be modified afterwards. ``variables`` carries ``oldObject`` and ``request`` for
    CEL; ``params`` the resolved value references per rule; ``lookup_errors`` the references
    that could not be resolved; ``programs`` the CEL of sidecar templates read from ConfigMaps.
    A rule that denies (a sidecar's checks, two sidecars of one group) denies whatever its
    failurePolicy. ``features``, when given, holds the :func:`..matching.selection.policy_features` bits
    of the matched policies: sidecar and inject rules are looked for only when they are set.
    ``measured``, when given, holds variables' serialized sizes with the values they were measured
    on (:class:`.celbindings.Bindings`). ``conversions``, when given, is the request's record of
    the conversions kept across the rules, which decides what a rule's change keeps.
    """
    params = params or {}
    lookup_errors = lookup_errors or {}
    programs = programs or {}
    matches = list(matches)
    working: Obj = obj
    log = patchlog.PatchLog()
    mutation = Mutation(object=working)
    if features is None or features & selection.SIDECARS:
        conflict = sidecargroups.group_conflict(matches, obj)
        if conflict is not None:
            return Mutation(object=obj, failure=conflict)
    # The working object converted for CEL, shared by rules without parameters; a change keeps
    # the conversions the record says it did not touch (Bindings.changed).
    conversions = ConversionRecord() if conversions is None else conversions
    bound: Bindings | None = None
    # A rule whose conditions or references failed is decided by its failurePolicy, below, like any other.
    injecting = features is None or bool(features & selection.INJECTS)
    injects = [(policy, rule) for policy, rule in matches
               if rule.inject is not None and RuleId(policy.identity, rule.index) not in lookup_errors
               ] if injecting else []
    plain = {**variables, "params": {}}  # for rules without parameters of their own; never changed
    marks = jsrules.Marks()
    last = len(matches) - 1
    for i, (policy, rule) in enumerate(matches):
        if injecting and rule.inject is not None and RuleId(policy.identity, rule.index) not in lookup_errors:
            if injects:  # every inject rule runs at the place of the first one, together
                if bound is None:
                    bound = _bindings(variables, working, measured, conversions)
                refused, injected = _inject(injects, working, bound, mutation, log, conversions)
                if refused is not None:
                    return Mutation(object=obj, failure=refused, warnings=mutation.warnings,
                                    ignored=mutation.ignored, timings=mutation.timings)
                if injected is not working:
                    working, bound = injected, None
                injects = []
            continue
        started = time.perf_counter()
        key = RuleId(policy.identity, rule.index)
        reason = lookup_errors.get(key)
        trial: patchlog.Draft | None = None
        denied = False
        if reason is None:
            own = params.get(key)
            if not own and bound is None:
                bound = _bindings(variables, working, measured, conversions)
            try:
                trial = apply_rule(working, rule, policy, {**variables, "params": own} if own else plain,
                                   None if own else bound, programs.get(key), marks)
            except RuleDenied as e:
                reason, denied = e.reason, True
            except RuleError as e:
                reason = e.reason
            except (KinitirasError, ValueError, TypeError, KeyError, IndexError) as e:
                reason = str(e)
        pid = PolicyId.of(policy)
        mutation.timings[pid] = mutation.timings.get(pid, 0.0) + time.perf_counter() - started
        marks.settle(reason is None)
        if reason is not None:
            # A denial (a sidecar check, jsa_mutate) is a decision, not an error: the failurePolicy does not apply.
            failure = RuleFailure(key, reason, ignored=rule.failure_policy == "Ignore" and not denied)
            if failure.ignored:
                mutation.warnings.append(f"{failure} (failurePolicy Ignore: rule skipped)")
                mutation.ignored.append(failure)
                continue
            return Mutation(object=obj, failure=failure, warnings=mutation.warnings, ignored=mutation.ignored,
                            timings=mutation.timings)
        # The rule's operations hold (they all succeeded). When they leave the object as it was (a
        # rule reinvoked on its own output, an unchanged UPDATE), the object is kept, and with it
        # every conversion and projection later rules would otherwise make again.
        # Python's == is quick but takes 1, 1.0 and true for equal; same() tells them apart. Where
        # its operations reached is noted either way: another object may not have held what it wrote.
        if trial is not None and trial.changed:
            conversions.reach(trial.touched + trial.sources)
        if trial is not None and trial.changed and (trial.doc != working or not patchlog.same(trial.doc, working)):
            mutation.applied.append(RuleId(pid, rule.index))
            if bound is not None and i < last:  # the last rule's result is not evaluated against
                bound = bound.changed("object", trial.doc, trial.touched)
            working = trial.doc
            log.record(trial)
    mutation.object = working
    mutation.patch = log.patch(obj, working)
    return mutation


def _bindings(variables: dict[str, Any], working: Obj, measured: Mapping[str, tuple[Any, int]] | None,
              conversions: ConversionRecord) -> Bindings:
    """The variables with ``working`` as the object, for rules without parameters of their own."""
    return Bindings({**variables, "object": working, "params": {}}, measured, conversions)


def _inject(rules: list[OverrideMatch], working: Obj, bound: Bindings, mutation: Mutation,
            log: patchlog.PatchLog, conversions: ConversionRecord) -> tuple[RuleFailure | None, Obj]:
    """Run the inject rules together (:mod:`.injection`), recording warnings, timings and applied
    rules in ``mutation`` and the changes in ``log`` and ``conversions``. Returns the failure that
    denies the request, if any, and the object with the injections."""
    started = time.perf_counter()
    try:
        outcome = injection.combine(rules, working, bound)
    except (KinitirasError, ValueError, TypeError, KeyError, IndexError) as e:  # the ops did not apply
        policy, rule = rules[0]
        outcome = injection.Injection(draft=patchlog.Draft(working), errors=[(policy, rule, str(e))])
    share = (time.perf_counter() - started) / len(rules)
    for policy, _ in rules:
        pid = PolicyId.of(policy)
        mutation.timings[pid] = mutation.timings.get(pid, 0.0) + share
    for policy, rule, reason in outcome.errors:
        failure = RuleFailure(RuleId(PolicyId.of(policy), rule.index), reason, ignored=rule.failure_policy == "Ignore")
        if not failure.ignored:
            return failure, working
        mutation.warnings.append(f"{failure} (failurePolicy Ignore: rule skipped)")
        mutation.ignored.append(failure)
    mutation.warnings += outcome.warnings
    conversions.reach(outcome.draft.touched + outcome.draft.sources)
    if outcome.denial is not None:
        policy, rule, reason = outcome.denial
        return RuleFailure(RuleId(PolicyId.of(policy), rule.index), reason, ignored=False), working
    if not outcome.draft.changed or patchlog.same(outcome.draft.doc, working):
        return None, working
    mutation.applied += [RuleId(PolicyId.of(policy), rule.index) for policy, rule in outcome.applied]
    log.record(outcome.draft)
    return None, outcome.draft.doc
