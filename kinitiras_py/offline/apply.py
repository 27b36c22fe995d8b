"""Run policies against objects from files, exactly as the webhook would."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from kinitiras_py.admission.pipeline import Decision, Pipeline, Request
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.compiled import CompiledPolicy
from kinitiras_py.engine.compiling import compile_policy
from kinitiras_py.engine.selection import PolicyIndex
from kinitiras_py.offline.loader import InputError
from kinitiras_py.offline.static import StaticHttp, StaticStore


@dataclass
class Case:
    """One offline admission: policies, the object, and what surrounds it."""

    policies: Sequence[Obj]
    resource: Obj
    old_resource: Obj | None = None
    operation: str = "CREATE"
    context: Sequence[Obj] = ()
    user_info: Obj | None = None


def compile_all(policies: Sequence[Obj]) -> list[CompiledPolicy]:
    """Compile every policy; InputError listing each refused policy with its field paths."""
    compiled, problems = [], []
    for policy in policies:
        try:
            compiled.append(compile_policy(policy))
        except PolicyErrors as e:
            problems.append(str(e))
    if problems:
        raise InputError("invalid policy:\n  " + "\n  ".join(problems))
    return compiled


def run(case: Case) -> Decision:
    """Mutation then validation of ``case.resource``."""
    if case.operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise InputError(f"unknown operation {case.operation!r}: CREATE, UPDATE, DELETE or CONNECT")
    if case.operation == "UPDATE" and case.old_resource is None:
        raise InputError("UPDATE needs --old-resource")
    compiled = compile_all(case.policies)
    pipeline = Pipeline(
        overrides=PolicyIndex(p for p in compiled if not p.validating),
        validations=PolicyIndex(p for p in compiled if p.validating),
        store=StaticStore(case.context), http=StaticHttp(case.context),
    )
    namespace = str((case.resource.get("metadata") or {}).get("namespace") or "")
    request = Request(operation=case.operation, object=case.resource, old_object=case.old_resource,
                      namespace=namespace, user_info=case.user_info or {"username": "kinitiras-py-offline"})
    return asyncio.run(pipeline.admit(request))
