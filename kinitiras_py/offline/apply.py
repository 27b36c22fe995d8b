"""Run policies against objects from files, exactly as the webhook would."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kinitiras_py.admission.engine import Engine
from kinitiras_py.admission.pipeline import Decision, Request, with_namespace
from kinitiras_py.admission.results import ObjectResult
from kinitiras_py.base.typedefs import OPERATIONS, Obj
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.engine.running import watchhooks
from kinitiras_py.offline.loader import InputError
from kinitiras_py.offline.static import StaticHttp, StaticStore
from kinitiras_py.refs.egress import Egress


@dataclass
class Case:
    """One offline admission: policies, the object, and what surrounds it."""

    policies: Sequence[Obj]
    resource: Obj
    old_resource: Obj | None = None
    operation: str = "CREATE"
    context: Sequence[Obj] = ()
    user_info: Obj | None = None
    namespace: str | None = None
    """The request's namespace; by default the object's own (as the API server sends it)."""
    egress: Egress = field(default_factory=Egress)
    """The operator's setting for http references (``--http-allow``, ``--http-namespaced``)."""


def build_engine(policies: Sequence[Obj], context: Sequence[Obj] = (), egress: Egress | None = None,
                 on_warning: Callable[[str], None] | None = None) -> tuple[Engine, list[CompiledPolicy]]:
    """An engine over ``policies`` whose references are answered from ``context``, http ones within
    ``egress`` (default: the webhook's default setting), and the policies as it compiled them, in
    the order given. Each is checked as the webhook admits a policy: InputError listing each
    refused policy with its field paths. The objects in ``context`` count as existing for
    JavaScript watch hooks (passed to jsa_created, in a stable order).

    Warnings the compiler gives for accepted policies go to ``on_warning``.
    """
    egress = egress if egress is not None else Egress()
    engine = Engine(store=StaticStore(context), http=StaticHttp(context, egress), egress=egress)
    compiled, refused = engine.compile_all(policies)
    if refused:
        raise InputError("invalid policy:\n  " + "\n  ".join(map(str, refused)))
    engine.add(*compiled)
    for one in compiled:
        for warning in one.warnings:
            if on_warning is not None:
                on_warning(warning)
    watchhooks.start_offline(compiled, context)
    return engine, compiled


def check_object(obj: Obj, what: str) -> None:
    """An object under admission needs apiVersion and kind (strings) and a metadata map."""
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise InputError(f"{what}: not a Kubernetes object (no {key})")
    if not isinstance(obj.get("metadata", {}), dict):
        raise InputError(f"{what}: metadata must be a mapping")


def check_context(obj: Obj, index: int) -> None:
    """A ``--context`` document: an object (as :func:`check_object`) or an HTTPResponse whose
    ``url`` is a string and ``method``, ``params`` and ``header`` have the shapes requests have."""
    what = f"context document {index + 1} ({obj.get('kind') or 'no kind'})"
    if obj.get("kind") != "HTTPResponse":
        check_object(obj, what)
        return
    if not isinstance(obj.get("url"), str):
        raise InputError(f"{what}: url must be a string")
    if not isinstance(obj.get("method", "GET"), str):
        raise InputError(f"{what}: method must be a string such as GET")
    for key in ("params", "header"):
        value = obj.get(key)
        if value is not None and (not isinstance(value, dict)
                                  or any(isinstance(v, dict | list) for v in value.values())):
            raise InputError(f"{what}: {key} must be a mapping of names to values")


def _in_namespace(obj: Obj, namespace: str, what: str) -> Obj:
    """``obj`` as the API server admits it in a request for ``namespace``: its own namespace must be
    that one (the API server refuses a mismatch before any webhook sees it), and a missing one is
    filled in."""
    own = (obj.get("metadata") or {}).get("namespace")
    if own and own != namespace:
        raise InputError(f"the namespace of the {what} ({own!r}) does not match the namespace of the request "
                         f"(--namespace {namespace!r}), which the API server refuses: drop one or make them equal")
    filled = with_namespace({**obj, "metadata": obj.get("metadata") or {}}, namespace) if namespace else obj
    assert isinstance(filled, dict)
    return filled


def request_for(case: Case) -> Request:
    """The admission request the API server would send for ``case``; InputError when ``case.namespace``
    and an object's own namespace differ."""
    resource, old = case.resource, case.old_resource
    namespace = case.namespace
    if namespace is None:
        namespace = str((resource.get("metadata") or {}).get("namespace") or "")
    else:
        resource = _in_namespace(resource, namespace, "resource")
        old = _in_namespace(old, namespace, "old resource") if old is not None else None
    return Request(operation=case.operation, object=resource, old_object=old,
                   namespace=namespace, user_info=case.user_info or {"username": "kinitiras-py-offline"})


@dataclass
class Batch:
    """Offline admissions of many objects under the same policies, context and operation."""

    policies: Sequence[Obj]
    resources: Sequence[tuple[str, Obj]]
    """Each object with where it was read (a file, its document number), for messages."""
    old_resources: Sequence[tuple[str, Obj]] = ()
    operation: str = "CREATE"
    context: Sequence[Obj] = ()
    user_info: Obj | None = None
    namespace: str | None = None
    egress: Egress = field(default_factory=Egress)
    """The operator's setting for http references, as on :class:`Case`."""


@dataclass
class Outcome:
    """The policies compiled for a batch, and each object's result (in the batch's order)."""

    policies: list[CompiledPolicy]
    objects: list[ObjectResult]


def _identity(obj: Obj, namespace: str | None) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), str(namespace or meta.get("namespace") or ""), str(meta.get("name") or "")


def pair_old(batch: Batch) -> list[Obj | None]:
    """The previous object of each resource. One resource takes the one old resource given; many
    are paired with old resources by kind, namespace and name. InputError for an UPDATE resource
    without its old one, an old one paired with nothing, or two old ones of one identity."""
    olds = batch.old_resources
    if len(batch.resources) == 1 and len(olds) <= 1:
        return [olds[0][1] if olds else None]
    by_identity: dict[tuple[str, str, str], Obj] = {}
    for where, old in olds:
        check_object(old, where)
        key = _identity(old, batch.namespace)
        if key in by_identity:
            raise InputError(f"{where}: a second old resource for {key[0]} {key[1]}/{key[2]}")
        by_identity[key] = old
    paired: list[Obj | None] = []
    for where, resource in batch.resources:
        check_object(resource, where)
        paired.append(by_identity.pop(_identity(resource, batch.namespace), None))
        if paired[-1] is None and batch.operation == "UPDATE":
            kind, namespace, name = _identity(resource, batch.namespace)
            raise InputError(f"{where}: UPDATE needs the previous object of {kind} {namespace}/{name} "
                             "(--old-resource, paired by kind, namespace and name)")
    if by_identity:
        kind, namespace, name = next(iter(by_identity))
        raise InputError(f"--old-resource {kind} {namespace}/{name} is the previous object of no --resource "
                         "(old resources are paired with resources by kind, namespace and name)")
    return paired


def run_batch(batch: Batch, on_warning: Callable[[str], None] | None = None) -> Outcome:
    """Mutation then validation of every object of ``batch``, policies compiled once; InputError when
    an input cannot be admitted (naming where it was read)."""
    if batch.operation not in OPERATIONS:
        raise InputError(f"unknown operation {batch.operation!r}: {', '.join(OPERATIONS)}")
    olds = pair_old(batch)
    cases = []
    for (where, resource), old in zip(batch.resources, olds, strict=True):
        check_object(resource, where)
        if batch.operation == "UPDATE":
            if old is None:
                raise InputError("UPDATE needs the previous object (--old-resource)")
            check_object(old, f"old resource of {where}")
        cases.append(Case(batch.policies, resource, old, batch.operation, batch.context, batch.user_info,
                          batch.namespace, batch.egress))
        request_for(cases[-1])  # a namespace mismatch is bad input, found before anything runs
    for index, obj in enumerate(batch.context):
        check_context(obj, index)
    engine, compiled = build_engine(batch.policies, batch.context, batch.egress, on_warning)
    return Outcome(compiled, engine.evaluate_requests_sync([request_for(case) for case in cases]))


def evaluate(case: Case, on_warning: Callable[[str], None] | None = None) -> Outcome:
    """:func:`run_batch` of the one object of ``case``."""
    return run_batch(Batch(case.policies, [("resource", case.resource)],
                           [("old resource", case.old_resource)] if case.old_resource is not None else [],
                           case.operation, case.context, case.user_info, case.namespace, case.egress), on_warning)


def run(case: Case, on_warning: Callable[[str], None] | None = None) -> Decision:
    """Mutation then validation of ``case.resource``; InputError when the input cannot be admitted."""
    return evaluate(case, on_warning).objects[0].decision
