"""Run the override rules that apply to an object, in order, and build the response patch.

Each rule writes copy-on-write to a draft of the working object (:class:`.patchlog.Draft`),
which becomes the working object only when all of the rule's overriders succeed: a failing rule
never leaves the object half-changed, a rule with nothing to do costs no copy, and a rule that
changes one field copies only the containers on that field's way. The received object is never
modified, and the final object shares every part no rule changed with it. The patch is built
from the changes the rules made (:class:`.patchlog.PatchLog`), not by diffing the objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kinitiras_py.base.errors import KinitirasError, RuleError
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine import origin, patchlog
from kinitiras_py.engine.compiled import CompiledPolicy, OverrideRule
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.results import Mutation, PolicyId, RuleFailure, RuleId

RuleKey = tuple[str, int]
"""(policy ref, rule index): how resolved parameters and lookup errors are keyed."""


def _patch_ops(result: JSON, what: str) -> Patch:
    if not isinstance(result, list):
        raise ValueError(f"{what} must return a list of JSON patch operations, got {type(result).__name__}")
    for i, op in enumerate(result):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise ValueError(f"{what} returned an invalid operation at index {i}: {op!r} (needs op and path)")
    return result


def apply_rule(working: Obj, rule: OverrideRule, policy: CompiledPolicy, variables: dict[str, Any],
               bound: Bindings | None = None) -> patchlog.Draft:
    """Apply one rule's overriders: rendered, cel, plaintext, origin. ``working`` is not modified.

    Each overrider sees the result of the previous one (kinitiras skipped plaintext when origin
    was present; we run all that are set). Returns the draft holding the result and where the
    rule changed it. ``bound``, when given, holds ``variables`` with ``working`` as the object,
    already converted for CEL.
    """
    draft = patchlog.Draft(working)
    for program, what in ((rule.rendered, "the rendered template"), (rule.cel, "the cel rule")):
        if program is not None:
            inputs: Bindings | dict[str, Any]
            if bound is None:
                inputs = {**variables, "object": draft.doc}
            else:
                inputs = bound if draft.doc is working else bound.changed("object", draft.doc, draft.touched)
            draft.apply(_patch_ops(program.evaluate(inputs), what))
    if rule.plaintext:
        draft.apply(rule.plaintext)
    if rule.origin:
        origin.apply_origin(draft.doc, rule.origin, policy.ref, rule.index, draft.apply)
    return draft


def mutate(matches: Iterable[tuple[CompiledPolicy, OverrideRule]], obj: Obj, variables: dict[str, Any],
           params: Mapping[RuleKey, Obj] | None = None,
           lookup_errors: Mapping[RuleKey, str] | None = None) -> Mutation:
    """Apply every matching rule to ``obj``; return the final object and the patch.

    ``obj`` is not modified; the final object shares the parts no rule changed with it, so
    neither may be modified afterwards. ``variables`` carries ``oldObject`` and ``request`` for
    CEL; ``params`` the resolved value references per rule; ``lookup_errors`` the references
    that could not be resolved.
    """
    params = params or {}
    lookup_errors = lookup_errors or {}
    working: Obj = obj
    log = patchlog.PatchLog()
    mutation = Mutation(object=working)
    # The working object converted for CEL, shared by rules without parameters; a change keeps
    # the conversions of the parts it did not touch (Bindings.changed).
    bound: Bindings | None = None
    for policy, rule in matches:
        started = time.perf_counter()
        key = (policy.ref, rule.index)
        reason = lookup_errors.get(key)
        trial: patchlog.Draft | None = None
        if reason is None:
            own = params.get(key)
            if not own and bound is None:
                bound = Bindings({**variables, "object": working, "params": {}})
            try:
                trial = apply_rule(working, rule, policy, {**variables, "params": own or {}}, None if own else bound)
            except RuleError as e:
                reason = e.reason
            except (KinitirasError, ValueError, TypeError, KeyError, IndexError) as e:
                reason = str(e)
        pid = PolicyId.of(policy)
        mutation.timings[pid] = mutation.timings.get(pid, 0.0) + time.perf_counter() - started
        if reason is not None:
            failure = RuleFailure(pid, rule.index, reason, ignored=rule.failure_policy == "Ignore")
            if failure.ignored:
                mutation.warnings.append(f"{failure} (failurePolicy Ignore: rule skipped)")
                mutation.ignored.append(failure)
                continue
            return Mutation(object=obj, failure=failure, warnings=mutation.warnings, ignored=mutation.ignored,
                            timings=mutation.timings)
        if trial is not None and trial.changed:  # the rule's operations hold: they all succeeded
            # Python's != is quick but takes 1, 1.0 and true for equal; same() tells them apart.
            if trial.doc != working or not patchlog.same(trial.doc, working):
                mutation.applied.append(RuleId(pid, rule.index))
            if bound is not None:
                bound = bound.changed("object", trial.doc, trial.touched)
            working = trial.doc
            log.record(trial)
    mutation.object = working
    mutation.patch = log.patch(obj, working)
    return mutation
