"""Mutation and validation of one admission request against indexed policies."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine import overriding, validating
from kinitiras_py.engine.compiled import CompiledPolicy
from kinitiras_py.engine.evaluation.cel import runs_long
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.results import Mutation, Verdict
from kinitiras_py.engine.selection import PolicyIndex
from kinitiras_py.refs import resolver


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

    def cel_request(self) -> Obj:
        """The ``request`` variable rules see."""
        return {"operation": self.operation, "namespace": self.namespace,
                "userInfo": self.user_info, "dryRun": self.dry_run}


@dataclass
class Decision:
    """Mutation followed by validation: what an AdmissionReview response carries."""

    allowed: bool
    message: str
    patch: Patch
    object: Obj
    warnings: list[str]
    audit: list[str]


@dataclass
class Pipeline:
    """Runs override then validate policies; references resolved through ``store``/``http``."""

    overrides: PolicyIndex
    validations: PolicyIndex
    store: resolver.Store
    http: resolver.HttpClient | None = None
    lookup_timeout: float = 2.5

    async def _params(self, matches: list[tuple[CompiledPolicy, Any]], obj: Obj
                      ) -> tuple[dict[tuple[str, int], dict[str, JSON]], dict[tuple[str, int], str]]:
        params: dict[tuple[str, int], dict[str, JSON]] = {}
        errors: dict[tuple[str, int], str] = {}
        for policy, rule in matches:
            if not rule.refs:
                continue
            key = (policy.ref, rule.index)
            try:
                values = await resolver.resolve_rule(rule.refs, obj, self.store, self.http, self.lookup_timeout,
                                                     policy.namespace)
                # An unresolved (null) reference is left out: rules see it as absent.
                params[key] = {name: value for name, value in values.items() if value is not None}
            except resolver.LookupFailure as e:
                errors[key] = str(e)
        return params, errors

    async def _variables(self, request: Request, obj: Obj) -> dict[str, Any]:
        return {"object": obj, "oldObject": request.old_object, "request": request.cel_request(),
                "namespaceObject": await self._namespace_object(request)}

    async def _namespace_object(self, request: Request) -> Obj | None:
        # Rules may look at the object's Namespace (its labels, typically); a failed lookup is null.
        if not request.namespace:
            return None
        try:
            async with asyncio.timeout(self.lookup_timeout):  # no task of its own, unlike wait_for
                return await self.store.get("v1", "Namespace", None, request.namespace)
        except (LookupError, TimeoutError):
            return None

    async def mutate(self, request: Request) -> Mutation:
        """Apply the override policies. DELETE and CONNECT change nothing (there is no object to keep)."""
        if request.operation in ("DELETE", "CONNECT"):
            return Mutation(object=request.object)
        matches = list(self.overrides.matching(request.object, request.operation, request.namespace))
        params, errors = await self._params(matches, request.object)
        if not matches:
            return Mutation(object=request.object)
        variables = await self._variables(request, request.object)
        if runs_long((p for _, rule in matches for p in (rule.rendered, rule.cel)), request.object, request.size):
            # Off the event loop: it serves probes and keeps the deadline whenever our functions run.
            return await asyncio.to_thread(overriding.mutate, matches, request.object, variables, params, errors)
        return overriding.mutate(matches, request.object, variables, params, errors)

    async def validate(self, request: Request, obj: Obj | None = None) -> Verdict:
        """Apply the validate policies to ``obj`` (default: the request's object)."""
        obj = request.object if obj is None else obj
        matches = sorted(self.validations.matching(obj, request.operation, request.namespace),
                         key=lambda m: (m[0].sort_key(), m[1].index))
        if not matches:
            return Verdict()
        variables = await self._variables(request, obj)
        shared = Bindings({**variables, "params": {}})
        verdict = Verdict()
        # Rule by rule, so the references of rules after a denial are never fetched (no needless
        # HTTP calls or lookups for a request that is refused anyway).
        for match in matches:
            params, errors = await self._params([match], obj)
            if runs_long((match[1].rendered, match[1].cel), obj):
                one = await asyncio.to_thread(validating.validate, [match], variables, params, errors, shared)
            else:
                one = validating.validate([match], variables, params, errors, shared)
            verdict.warnings += one.warnings
            verdict.audit += one.audit
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
            return Decision(False, str(mutation.failure), [], request.object, mutation.warnings, [])
        verdict = await self.validate(request, mutation.object)
        return Decision(verdict.allowed, verdict.message, mutation.patch if verdict.allowed else [],
                        mutation.object, mutation.warnings + verdict.warnings, verdict.audit)
