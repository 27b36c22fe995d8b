"""Run policies against objects from files, exactly as the webhook would."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kinitiras_py.admission import httprefs
from kinitiras_py.admission.pipeline import Decision, Pipeline, Request, with_namespace
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import OPERATIONS, Obj
from kinitiras_py.engine import jshooks
from kinitiras_py.engine.compiled import CompiledPolicy
from kinitiras_py.engine.compiling import compile_policy
from kinitiras_py.engine.selection import PolicyIndex
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


def compile_all(policies: Sequence[Obj], on_warning: Callable[[str], None] | None = None,
                egress: Egress | None = None) -> list[CompiledPolicy]:
    """Compile every policy and hold its http references to ``egress`` (default: the webhook's
    default setting), as the webhook does when a policy is admitted; InputError listing each
    refused policy with its field paths.

    Warnings the compiler gives for accepted policies go to ``on_warning``.
    """
    compiled, problems = [], []
    for policy in policies:
        try:
            result = compile_policy(policy)
            httprefs.check(result, egress if egress is not None else Egress())
        except PolicyErrors as e:
            problems.append(str(e))
            continue
        compiled.append(result)
        for warning in getattr(result, "warnings", ()) or ():
            if on_warning is not None:
                on_warning(warning)
    if problems:
        raise InputError("invalid policy:\n  " + "\n  ".join(problems))
    return compiled


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


def build_pipeline(compiled: Sequence[CompiledPolicy], context: Sequence[Obj] = (),
                   egress: Egress | None = None) -> Pipeline:
    """A pipeline over ``compiled`` whose references are answered from ``context``, http ones
    within ``egress`` (default: the webhook's default setting); the objects in ``context`` count
    as existing for JavaScript watch hooks (passed to jsa_created, in a stable order)."""
    jshooks.start_offline(compiled, context)
    egress = egress if egress is not None else Egress()
    return Pipeline(
        overrides=PolicyIndex(p for p in compiled if not p.validating),
        validations=PolicyIndex(p for p in compiled if p.validating),
        store=StaticStore(context), http=StaticHttp(context, egress), egress=egress,
    )


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


def run(case: Case, on_warning: Callable[[str], None] | None = None) -> Decision:
    """Mutation then validation of ``case.resource``; InputError when the input cannot be admitted."""
    if case.operation not in OPERATIONS:
        raise InputError(f"unknown operation {case.operation!r}: {', '.join(OPERATIONS)}")
    check_object(case.resource, "resource")
    if case.operation == "UPDATE":
        if case.old_resource is None:
            raise InputError("UPDATE needs the previous object (--old-resource)")
        check_object(case.old_resource, "old resource")
    for index, obj in enumerate(case.context):
        check_context(obj, index)
    pipeline = build_pipeline(compile_all(case.policies, on_warning, case.egress), case.context, case.egress)
    return asyncio.run(pipeline.admit(request_for(case)))
