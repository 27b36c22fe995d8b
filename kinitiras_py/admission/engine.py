"""One admission engine: its policies, what it reads references through, and every memory it keeps.

:class:`Engine` is how policies are run from Python, and the one way the webhook (``serve``),
the offline CLI (``apply``, ``test``), the benchmarks and background scans run them: each builds
an engine and hands it requests or objects. It wraps :class:`~.pipeline.Pipeline`, which does the
work, and owns everything that outlives a request:

* its two policy indexes (override and validate policies), which :meth:`Engine.add`,
  :meth:`Engine.replace` and :meth:`Engine.remove` change (``serve`` hands them to the cluster's
  policy watch, which keeps them in step with the cluster);
* the store and http client that ``k8s``, ``owner`` and ``http`` references and sidecar
  ConfigMaps are read through, and the operator's egress setting;
* its caches: the CEL result cache (:mod:`..engine.evaluation.celmemo`, made the active one while
  the engine evaluates), the memory of mutations (:mod:`.mutationmemo`) and the remembered answers
  (:mod:`.answers`, read and filled by the webhook's /mutate handler). Two engines never share an
  entry, so an engine's answers never depend on what another evaluated. The conversions kept
  across rules (:class:`~..engine.evaluation.celbindings.Bindings`) live for one request only.

Shared by every engine in the process, because each is a pure function of its key and cannot
change an answer: compiled and checked CEL programs and their cost estimates, the interned sets
of paths programs read, compiled regular expressions, parsed field paths and the jinja2
environments of templates. They hold what the text they are keyed by gives, whoever asks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from kinitiras_py.admission import answers, httprefs, mutationmemo, policies
from kinitiras_py.admission.pipeline import Decision, Pipeline, Request, with_namespace
from kinitiras_py.admission.results import ObjectResult, ResourceRef, override_results, validate_results
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import OPERATIONS, Obj
from kinitiras_py.engine.evaluation import celmemo
from kinitiras_py.engine.matching.selection import PolicyIndex
from kinitiras_py.engine.policies.compiled import (
    VALIDATE_KINDS,
    CompiledOverrideRule,
    CompiledPolicy,
    CompiledValidateRule,
    EitherPolicy,
    validates,
)
from kinitiras_py.engine.policies.results import Mutation, Verdict
from kinitiras_py.refs.egress import Egress
from kinitiras_py.refs.resolver import HttpClient
from kinitiras_py.refs.store import Store

T = TypeVar("T")


class _NoObjects:
    """The store of an engine given none: every object is missing."""

    async def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """Nothing exists."""
        return None

    async def list(self, api_version: str, kind: str, namespace: str | None) -> Sequence[Obj]:
        """Nothing exists."""
        return []


class Engine:
    """Policies compiled once, evaluated against requests or single objects, with their caches.

    ``policies`` are policy objects (dicts, as ``kubectl`` would apply them) or policies compiled
    already; each is checked as the webhook checks a policy being admitted (:meth:`add`).
    ``store`` answers ``k8s`` and ``owner`` references and sidecar ConfigMaps (default: no object
    exists), ``http`` answers ``http`` references (default: none can be made), within ``egress``
    (default: the webhook's default setting); a lookup gives up after ``lookup_timeout`` seconds.
    ``cel_results_bytes`` bounds the CEL result cache, ``mutation_results_bytes`` the memory of
    mutations and the remembered answers together (half each, as ``serve`` splits
    ``--mutation-results-mib``); 0 switches a cache off.

    The async methods run on any event loop; the ``*_sync`` ones block the calling thread (see
    :meth:`admit_sync`). An engine is used from one event loop at a time.
    """

    def __init__(self, policies: Iterable[Obj | EitherPolicy] = (), *, store: Store | None = None,
                 http: HttpClient | None = None, egress: Egress | None = None, lookup_timeout: float = 2.5,
                 cel_results_bytes: int = celmemo.DEFAULT_BYTES,
                 mutation_results_bytes: int = mutationmemo.DEFAULT_BYTES) -> None:
        self.overrides: PolicyIndex[CompiledOverrideRule] = PolicyIndex()
        """The override policies, as requests find them."""
        self.validations: PolicyIndex[CompiledValidateRule] = PolicyIndex()
        """The validate policies, as requests find them."""
        self.egress = egress if egress is not None else Egress()
        """The operator's setting for http references: policies are held to it when added."""
        self.cel_results = celmemo.Results(cel_results_bytes)
        """The CEL result cache."""
        self.mutations = mutationmemo.Mutations(mutation_results_bytes - mutation_results_bytes // 2)
        """The memory of mutations."""
        self.answers = answers.Answers(mutation_results_bytes // 2)
        """Answers to whole /mutate reviews, by their bytes (used by the webhook's handler)."""
        self._pipeline = Pipeline(self.overrides, self.validations, store if store is not None else _NoObjects(),
                                  http, lookup_timeout, self.egress, self.mutations)
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the engine last ran on, where sync calls from other threads run."""
        self._private: asyncio.AbstractEventLoop | None = None
        """The loop a sync call made for itself while it runs (never :attr:`_loop`: it ends with the call)."""
        self._sync_lock = threading.Lock()
        self.add(*policies)

    # Policies

    def compile(self, policy: Obj | EitherPolicy) -> EitherPolicy:
        """``policy`` compiled and checked as the webhook admits a policy (its http references held to
        :attr:`egress`); PolicyErrors naming the policy and each refused field of its rules."""
        if isinstance(policy, CompiledPolicy):
            httprefs.check(policy, self.egress)
            return policy
        return policies.compile_checked(policy, self.egress)

    def compile_all(self, given: Iterable[Obj | EitherPolicy]) -> tuple[list[EitherPolicy], list[PolicyErrors]]:
        """Each of ``given`` compiled (:meth:`compile`), in order, and the refusal of each refused one."""
        compiled: list[EitherPolicy] = []
        refused: list[PolicyErrors] = []
        for policy in given:
            try:
                compiled.append(self.compile(policy))
            except PolicyErrors as e:
                refused.append(e)
        return compiled, refused

    def _compiled(self, given: Iterable[Obj | EitherPolicy]) -> list[EitherPolicy]:
        compiled, refused = self.compile_all(given)
        if len(refused) == 1:
            raise refused[0]
        if refused:
            raise PolicyErrors(list[PolicyError](refused))  # ``errors`` holds each refused policy's PolicyErrors
        return compiled

    def add(self, *given: Obj | EitherPolicy) -> list[EitherPolicy]:
        """Compile (:meth:`compile`) and put ``given`` in force, each in place of a policy of the same
        kind, namespace and name; the compiled policies, in the order given. If any is refused,
        none is added: PolicyErrors for it, or one whose ``errors`` are each refused policy's."""
        compiled = self._compiled(given)
        for policy in compiled:
            self._put(policy)
        return compiled

    def replace(self, *given: Obj | EitherPolicy) -> list[EitherPolicy]:
        """Make ``given`` the engine's only policies (as :meth:`add`; if any is refused, nothing changes)."""
        compiled = self._compiled(given)
        for policy in self.policies:
            (self.validations if validates(policy) else self.overrides).remove(policy.kind, policy.namespace,
                                                                              policy.name)
        for policy in compiled:
            self._put(policy)
        return compiled

    def remove(self, kind: str, name: str, namespace: str | None = None) -> bool:
        """Take the policy of ``kind``, ``name`` (and ``namespace`` for the namespaced kinds) out of
        force; whether there was one."""
        index = self.validations if kind in VALIDATE_KINDS else self.overrides
        if index.get(kind, namespace, name) is None:
            return False
        index.remove(kind, namespace, name)
        return True

    @property
    def policies(self) -> list[EitherPolicy]:
        """Every policy in force: override policies, then validate policies."""
        return [*self.overrides, *self.validations]

    def _put(self, policy: EitherPolicy) -> None:
        if validates(policy):
            self.validations.put(policy)
        else:
            self.overrides.put(policy)

    # Requests

    def _note_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._private:
            self._loop = loop

    async def mutate(self, request: Request) -> Mutation:
        """What the override policies do to ``request``'s object (the /mutate webhook's question)."""
        self._note_loop()
        with celmemo.using(self.cel_results):
            return await self._pipeline.mutate(request)

    async def validate(self, request: Request, obj: Obj | None = None) -> Verdict:
        """What the validate policies say of ``obj`` (default: ``request``'s object; the /validate
        webhook's question)."""
        self._note_loop()
        with celmemo.using(self.cel_results):
            return await self._pipeline.validate(request, obj)

    async def admit(self, request: Request) -> Decision:
        """Mutation, then validation of the mutated object, as the API server runs the two webhooks."""
        self._note_loop()
        with celmemo.using(self.cel_results):
            return await self._pipeline.admit(request)

    def admit_sync(self, request: Request) -> Decision:
        """:meth:`admit`, blocking. Outside any event loop it runs on a loop of its own; from a thread
        other than that of the event loop the engine last ran on, while that loop runs, it runs there
        (where its store and http client live). On the thread of a running event loop it would block
        that loop, so it raises RuntimeError: await :meth:`admit` there."""
        return self._sync("admit_sync", lambda: self.admit(request))

    # Objects

    async def evaluate(self, obj: Obj, operation: str = "CREATE", *, old_object: Obj | None = None,
                       namespace: str | None = None, user_info: Obj | None = None,
                       dry_run: bool = False) -> ObjectResult:
        """Admit ``obj`` as a request for ``operation`` would (``old_object`` is the object before an
        UPDATE or DELETE; ``namespace`` the request's, by default the object's own, filled into an
        object that has none) and give the decision with the result of every rule that matched.
        ValueError for an unknown operation. What a background scan calls for each object."""
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}: {', '.join(OPERATIONS)}")
        if namespace is None:
            meta = obj.get("metadata")
            namespace = str((meta.get("namespace") if isinstance(meta, dict) else None) or "")
        else:
            obj = _filled(obj, namespace)
            old_object = _filled(old_object, namespace) if old_object is not None else None
        return await self.evaluate_request(Request(operation, obj, old_object, namespace, user_info or {}, dry_run))

    def evaluate_sync(self, obj: Obj, operation: str = "CREATE", *, old_object: Obj | None = None,
                      namespace: str | None = None, user_info: Obj | None = None,
                      dry_run: bool = False) -> ObjectResult:
        """:meth:`evaluate`, blocking (where it may run: :meth:`admit_sync`)."""
        return self._sync("evaluate_sync", lambda: self.evaluate(
            obj, operation, old_object=old_object, namespace=namespace, user_info=user_info, dry_run=dry_run))

    async def evaluate_request(self, request: Request) -> ObjectResult:
        """:meth:`admit` ``request``, with the result of every rule that matched its object (override
        rules) or the mutated object (validate rules)."""
        decision = await self.admit(request)
        mutated = list(self.overrides.matching(request.object, request.operation, request.namespace))
        validated = sorted(self.validations.matching(decision.object, request.operation, request.namespace),
                           key=lambda m: (m[0].sort_key(), m[1].index))
        return ObjectResult(ResourceRef.of(request.object), decision,
                            override_results(decision, mutated) + validate_results(decision, validated))

    async def evaluate_requests(self, requests: Iterable[Request]) -> list[ObjectResult]:
        """:meth:`evaluate_request` of each of ``requests``, one after the other."""
        return [await self.evaluate_request(request) for request in requests]

    def evaluate_requests_sync(self, requests: Iterable[Request]) -> list[ObjectResult]:
        """:meth:`evaluate_requests`, blocking (where it may run: :meth:`admit_sync`)."""
        return self._sync("evaluate_requests_sync", lambda: self.evaluate_requests(requests))

    def _sync(self, name: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make`` gives to its end from synchronous code (see :meth:`admit_sync`)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(f"Engine.{name} was called on the thread of a running event loop, which it would "
                               f"block: await Engine.{name.removesuffix('_sync')}(...) there instead")
        home = self._loop
        if home is not None and home.is_running():
            return asyncio.run_coroutine_threadsafe(make(), home).result()
        with self._sync_lock, asyncio.Runner() as runner:  # the caches are used from one loop at a time
            self._private = runner.get_loop()
            try:
                return runner.run(make())
            finally:
                self._private = None


def _filled(obj: Obj, namespace: str) -> Obj:
    filled = with_namespace(obj, namespace)
    assert isinstance(filled, dict)
    return filled
