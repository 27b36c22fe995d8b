"""Mutation and validation of one admission request against indexed policies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kinitiras_py.admission import managedfields, mutationmemo, sidecars
from kinitiras_py.admission.readrecord import ReadRecord
from kinitiras_py.base.ids import PolicyId, RuleId
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.engine.evaluation.cel import Program, runs_long
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.evaluation.conversionrecord import ConversionRecord
from kinitiras_py.engine.matching import conditions, selection
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import (
    CompiledOverrideRule,
    CompiledRule,
    CompiledValidateRule,
    Match,
    OverrideMatch,
    ValidateMatch,
)
from kinitiras_py.engine.policies.results import Mutation, RuleCheck, Verdict
from kinitiras_py.engine.rules import jsrules
from kinitiras_py.engine.running import overriding, validating
from kinitiras_py.refs import resolver
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.store import Store

RuleT = TypeVar("RuleT", bound=CompiledRule)


@dataclass
class Request:
    """What the engine needs from an AdmissionReview request."""

    operation: str
    object: Obj
    old_object: Obj | None = None
    namespace: str = ""
    user_info: Obj = field(default_factory=dict)
    dry_run: bool = False
    size: int | None = None
    """Bytes of the review that carried the request, when known (what decides whether a dear rule
    is evaluated off the event loop, without serialising the object again)."""
    sizes: Mapping[str, int] = field(default_factory=dict)
    """At most how many bytes ``object`` and ``oldObject`` serialize to, where known (the review's
    decoding measured them): rules' size bounds are checked without serialising them again."""
    fingerprint: bytes | None = None
    """Bytes that differ whenever anything differs that selection and rules can see of the request
    (its operation, namespace, userInfo, dryRun and objects as received), when the review's
    decoding wrote them; None otherwise. Mutations are remembered by it (:mod:`.mutationmemo`)."""

    @property
    def measured(self) -> dict[str, tuple[Obj | None, int]]:
        """:attr:`sizes` with the value each was measured on, as :class:`Bindings` takes them (a
        size holds for that very value only: a later tier's object is another)."""
        values = {"object": self.object, "oldObject": self.old_object}
        return {name: (values[name], size) for name, size in self.sizes.items()}

    def cel_request(self) -> Obj:
        """The ``request`` variable rules see."""
        return {"operation": self.operation, "namespace": self.namespace,
                "userInfo": self.user_info, "dryRun": self.dry_run}


def with_namespace(obj: object, namespace: str) -> object:
    """``obj`` with ``metadata.namespace`` set to ``namespace`` when it has none (a copy; ``obj``
    itself when it has one or is no object), as the API server fills it from the request."""
    if not isinstance(obj, dict):
        return obj
    meta = obj.get("metadata")
    if isinstance(meta, dict) and not meta.get("namespace"):
        return {**obj, "metadata": {**meta, "namespace": namespace}}
    return obj


@dataclass
class Decision:
    """Mutation followed by validation: what an AdmissionReview response carries."""

    allowed: bool
    message: str
    patch: Patch
    object: Obj
    warnings: list[str]
    audit: list[str]
    mutation: Mutation | None = None
    """What the override policies did (which rules changed the object, which failed)."""
    checks: list[RuleCheck] = field(default_factory=list)
    """Every validate rule evaluated, in order (:attr:`.Verdict.checks`)."""


@dataclass
class Pipeline:
    """Runs override then validate policies; references resolved through ``store``/``http``."""

    overrides: PolicyIndex[CompiledOverrideRule]
    validations: PolicyIndex[CompiledValidateRule]
    store: Store
    http: resolver.HttpClient | None = None
    lookup_timeout: float = 2.5
    egress: Egress = field(default_factory=Egress)
    """The operator's setting for http references, which ``http`` enforces on every request; policies
    are checked against it when they are admitted."""
    mutations: mutationmemo.Mutations = field(default_factory=mutationmemo.Mutations)
    """The memory of mutations (its owner's: :class:`~.engine.Engine`)."""

    async def _params(self, matches: Sequence[Match[CompiledRule]], obj: Obj
                      ) -> tuple[dict[RuleId, dict[str, JSON]], dict[RuleId, str]]:
        params: dict[RuleId, dict[str, JSON]] = {}
        errors: dict[RuleId, str] = {}
        for policy, rule in matches:
            if not rule.refs:
                continue
            key = RuleId(policy.identity, rule.index)
            try:
                values = await resolver.resolve_rule(rule.refs, obj, self.store, self.http, self.lookup_timeout,
                                                     policy.namespace, namespaced=not policy.cluster_scoped)
                # An unresolved (null) reference is left out: rules see it as absent.
                params[key] = {name: value for name, value in values.items() if value is not None}
            except resolver.LookupFailure as e:
                errors[key] = str(e)
        return params, errors

    async def _variables(self, request: Request, obj: Obj, features: int) -> dict[str, Any]:
        """What CEL rules see; the Namespace is looked up only when a matched rule may read it."""
        namespace = await self._namespace_object(request) if features & selection.NAMESPACE else None
        return {"object": obj, "oldObject": request.old_object, "request": request.cel_request(),
                "namespaceObject": namespace}

    async def _namespace_object(self, request: Request) -> Obj | None:
        # Rules may look at the object's Namespace (its labels, typically); a failed lookup is null.
        if not request.namespace:
            return None
        try:
            async with asyncio.timeout(self.lookup_timeout):  # no task of its own, unlike wait_for
                return await self.store.get("v1", "Namespace", None, request.namespace)
        except (LookupError, TimeoutError):
            return None

    async def _policy_params(self, matches: Sequence[Match[CompiledRule]], obj: Obj
                             ) -> tuple[dict[PolicyId, dict[str, JSON]], dict[PolicyId, str]]:
        """Each matched policy's ``valueRefs`` resolved (by policy), and those that failed."""
        params: dict[PolicyId, dict[str, JSON]] = {}
        errors: dict[PolicyId, str] = {}
        for policy in {id(p): p for p, _ in matches if p.refs}.values():
            try:
                values = await resolver.resolve_rule(policy.refs, obj, self.store, self.http, self.lookup_timeout,
                                                     policy.namespace, namespaced=not policy.cluster_scoped)
                params[policy.identity] = {name: value for name, value in values.items() if value is not None}
            except resolver.LookupFailure as e:
                errors[policy.identity] = f"valueRefs: {e}"
        return params, errors

    async def _conditioned(self, matches: list[Match[RuleT]], variables: dict[str, Any]
                           ) -> tuple[list[Match[RuleT]], dict[RuleId, str],
                                      dict[PolicyId, dict[str, JSON]]]:
        """The matches whose policies' matchConditions hold, the rules that failed (conditions or
        valueRefs), and the policies' resolved valueRefs."""
        shared, failed = await self._policy_params(matches, variables["object"])
        if not conditions.needed(matches):
            return matches, {RuleId(p.identity, r.index): failed[p.identity] for p, r in matches
                             if p.identity in failed}, shared
        kept, errors = conditions.apply(matches, variables, shared, failed)
        return kept, errors, shared

    @staticmethod
    def _merged(params: dict[RuleId, dict[str, JSON]], shared: dict[PolicyId, dict[str, JSON]],
                matches: Sequence[Match[CompiledRule]]) -> dict[RuleId, dict[str, JSON]]:
        """Rule parameters with their policy's valueRefs under them."""
        if not shared:
            return params
        for policy, rule in matches:
            if policy.identity in shared:
                key = RuleId(policy.identity, rule.index)
                params[key] = {**shared[policy.identity], **params.get(key, {})}
        return params

    async def mutate(self, request: Request) -> Mutation:
        """Apply the override policies, tier by tier (``executionTier``): each tier is matched and
        applied against the object the tiers before it produced. DELETE and CONNECT change nothing
        (there is no object to keep)."""
        if request.operation in ("DELETE", "CONNECT"):
            return Mutation(object=request.object, stamp=self.overrides.generation)
        until = time.monotonic() + self.lookup_timeout
        tiers = self.overrides.tiers()
        if len(tiers) <= 1:
            return await self._mutate_tier(request, request.object, None, until)
        total = Mutation(object=request.object, stamp=self.overrides.generation)
        for tier in tiers:
            one = await self._mutate_tier(request, total.object, tier, until)
            total.warnings += one.warnings
            total.ignored += one.ignored
            for pid, seconds in one.timings.items():
                total.timings[pid] = total.timings.get(pid, 0.0) + seconds
            if one.failure is not None:
                return Mutation(object=request.object, failure=one.failure, warnings=total.warnings,
                                ignored=total.ignored, timings=total.timings)
            # Each tier's patch applies to the previous tier's result: in sequence, they are one patch.
            total.object, total.patch, total.applied = one.object, total.patch + one.patch, total.applied + one.applied
            if one.stamp != total.stamp:  # a tier read more, or the index changed in between
                total.stamp = None
        return total

    async def _mutate_tier(self, request: Request, obj: Obj, tier: int | None, until: float) -> Mutation:
        """The override policies of ``tier`` (None: every tier) applied to ``obj``; ``until`` is when
        the request's time runs out."""
        generation = self.overrides.generation  # of the index that finds the matches, with no await between
        # A later tier's object was changed: the request's fingerprint and size are not its own.
        received = obj is request.object
        fingerprint = request.fingerprint if received else None
        found = self.mutations.matches(
            generation, fingerprint, lambda: list(self.overrides.matching(obj, request.operation, request.namespace)))
        matches = found if tier is None else [m for m in found if m[0].tier == tier]
        if not matches:
            return Mutation(object=obj, stamp=generation)
        features = self.overrides.features(matches)
        variables = await self._variables(request, obj, features)
        failed: dict[RuleId, str] = {}
        shared: dict[PolicyId, dict[str, JSON]] = {}
        if features & selection.CONDITIONS:
            matches, failed, shared = await self._conditioned(matches, variables)
            if not matches:
                record = ReadRecord(generation, features, variables["namespaceObject"], policy_references=shared,
                                    failures=failed)
                return Mutation(object=obj, stamp=generation if record.alone else None)
        params, errors = await self._params(matches, obj)
        if shared:
            params = self._merged(params, shared, matches)
        errors.update(failed)
        programs: dict[RuleId, Program] = {}
        if features & selection.SIDECARS:
            programs, missing = await sidecars.programs(matches, obj, self.store, self.lookup_timeout)
            errors.update(missing)
        started = time.perf_counter()
        record = ReadRecord(generation, features, variables["namespaceObject"], params, shared, programs, errors,
                            javascript=bool(features & selection.JAVASCRIPT))
        memo = record.key(fingerprint, matches) if self.mutations.enabled else None
        unmanaged = None
        if memo is not None:
            # Without the object's managedFields where no matched rule reads them (their times change).
            unmanaged = managedfields.key(fingerprint, obj, matches)
            if unmanaged is not None:
                memo = (memo[0], unmanaged)
            recalled = self.mutations.recall(memo, obj, time.perf_counter() - started)
            if recalled is not None:
                recalled.stamp = generation if record.alone else None
                return recalled
        if record.cacheable:
            mutation = await self._run_rules(matches, obj, variables, params, errors, programs, features,
                                             request, received, until, record.conversions)
        else:
            with celmemo.using(None):  # fail closed: an input the record cannot describe
                mutation = await self._run_rules(matches, obj, variables, params, errors, programs, features,
                                                 request, received, until, record.conversions)
        # Remembered when the rules met nothing the record cannot describe, and without managedFields
        # only when no rule's operations reached them (wrote or read on the way to them, at them or below).
        if memo is not None and record.cacheable and not (
                unmanaged is not None and managedfields.reached(record.conversions.reached)):
            self.mutations.remember(memo, mutation)
        if record.alone and mutation.complete:
            mutation.stamp = generation
        return mutation

    @staticmethod
    async def _run_rules(matches: list[OverrideMatch], obj: Obj, variables: dict[str, Any],
                         params: dict[RuleId, dict[str, JSON]], errors: dict[RuleId, str],
                         programs: dict[RuleId, Program], features: int, request: Request,
                         received: bool, until: float, conversions: ConversionRecord) -> Mutation:
        """The matched override rules applied to ``obj``, off the event loop when they may run long;
        ``conversions`` (the read record's) decides which conversions a rule's change keeps."""
        every = [p for _, rule in matches for p in (rule.rendered, rule.cue, rule.cel)]
        every += programs.values()
        size = request.size if received else None
        if not features & selection.JAVASCRIPT:
            if runs_long(every, obj, size):
                # Off the event loop: it serves probes and keeps the deadline whenever our functions run.
                return await asyncio.to_thread(overriding.mutate, matches, obj, variables, params, errors, programs,
                                               features, request.measured, conversions)
            return overriding.mutate(matches, obj, variables, params, errors, programs, features, request.measured,
                                     conversions)
        with jsrules.request_deadline(until - time.monotonic()):  # JavaScript rules share what is left
            if any(rule.javascript for _, rule in matches) or runs_long(every, obj, size):
                # Off the event loop: it serves probes and keeps the deadline whenever our functions or
                # scripts run.
                return await asyncio.to_thread(overriding.mutate, matches, obj, variables, params, errors, programs,
                                               features, request.measured, conversions)
            return overriding.mutate(matches, obj, variables, params, errors, programs, features, request.measured,
                                     conversions)

    async def validate(self, request: Request, obj: Obj | None = None) -> Verdict:
        """Apply the validate policies to ``obj`` (default: the request's object)."""
        obj = request.object if obj is None else obj
        until = time.monotonic() + self.lookup_timeout
        matches = sorted(self.validations.matching(obj, request.operation, request.namespace),
                         key=lambda m: (m[0].sort_key(), m[1].index))
        if not matches:
            return Verdict()
        features = self.validations.features(matches)
        variables = await self._variables(request, obj, features)
        failed: dict[RuleId, str] = {}
        policy_params: dict[PolicyId, dict[str, JSON]] = {}
        if features & selection.CONDITIONS:
            matches, failed, policy_params = await self._conditioned(matches, variables)
        shared = Bindings({**variables, "params": {}}, request.measured)
        verdict = Verdict()
        if not features & selection.JAVASCRIPT:
            return await self._validate_each(matches, obj, variables, shared, verdict, failed, policy_params)
        with jsrules.request_deadline(until - time.monotonic()):  # JavaScript rules share what is left
            return await self._validate_each(matches, obj, variables, shared, verdict, failed, policy_params)

    async def _validate_each(self, matches: list[ValidateMatch], obj: Obj, variables: dict[str, Any],
                             shared: Bindings, verdict: Verdict, failed: dict[RuleId, str],
                             policy_params: dict[PolicyId, dict[str, JSON]]) -> Verdict:
        # Rule by rule, so the references of rules after a denial are never fetched (no needless
        # HTTP calls or lookups for a request that is refused anyway).
        for match in matches:
            params, errors = await self._params([match], obj)
            if policy_params:
                params = self._merged(params, policy_params, [match])
            if failed and (key := RuleId(match[0].identity, match[1].index)) in failed:
                errors[key] = failed[key]
            if match[1].javascript is not None or runs_long((match[1].rendered, match[1].cue, match[1].cel), obj):
                one = await asyncio.to_thread(validating.validate, [match], variables, params, errors, shared)
            else:
                one = validating.validate([match], variables, params, errors, shared)
            verdict.warnings += one.warnings
            verdict.audit += one.audit
            verdict.checks += one.checks
            verdict.flagged |= one.flagged
            verdict.ignored += one.ignored
            for ref, seconds in one.timings.items():
                verdict.timings[ref] = verdict.timings.get(ref, 0.0) + seconds
            if not one.allowed:
                verdict.allowed, verdict.message, verdict.policy, verdict.failure = (
                    False, one.message, one.policy, one.failure)
                return verdict
        return verdict

    async def admit(self, request: Request) -> Decision:
        """Mutation then validation of the mutated object, as the API server would run them."""
        mutation = await self.mutate(request)
        if mutation.failure is not None:
            return Decision(False, str(mutation.failure), [], request.object, mutation.warnings, [], mutation)
        verdict = await self.validate(request, mutation.object)
        return Decision(verdict.allowed, verdict.message, mutation.patch if verdict.allowed else [],
                        mutation.object, mutation.warnings + verdict.warnings, verdict.audit, mutation,
                        verdict.checks)
