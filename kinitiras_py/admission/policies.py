"""The policy interrupter: when a policy itself is admitted, check it and write its rendered CEL.

kinitiras only did this for policies carrying a webhook label; here every policy is handled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kinitiras_py.admission import httprefs
from kinitiras_py.admission.pipeline import Request
from kinitiras_py.api import policies as models
from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.engine.policies.compiled import CompiledOverridePolicy, EitherPolicy, validates
from kinitiras_py.engine.policies.compiling import compile_policy
from kinitiras_py.engine.rules import jsrules
from kinitiras_py.refs.egress import Egress


@dataclass
class PolicyAdmission:
    """What admitting a policy object gives: a patch, or a refusal naming the fields."""

    patch: Patch = field(default_factory=list)
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    compiled: EitherPolicy | None = None


def is_policy(obj: Obj) -> bool:
    """Whether ``obj`` is one of our policy kinds."""
    return models.is_policy(obj)


def rendered_patch(doc: Obj, compiled: EitherPolicy) -> Patch:
    """JSON patch ops setting ``renderedCel`` of every templated rule; none when already current."""
    rules = (doc.get("spec") or {}).get("validateRules" if compiled.validating else "overrideRules") or []
    field_name = "validateRules" if compiled.validating else "overrideRules"
    ops: Patch = []
    for index, source in sorted(compiled.rendered.items()):
        rule = rules[index]
        if compiled.validating:
            holder, pointer = rule, f"/spec/{field_name}/{index}"
        elif isinstance(rule.get("overriders"), dict):
            holder, pointer = rule["overriders"], f"/spec/{field_name}/{index}/overriders"
        else:
            continue
        if holder.get("renderedCel") != source:
            ops.append({"op": "add", "path": f"{pointer}/renderedCel", "value": source})
    for index in [] if validates(compiled) else _kept_in_configmaps(compiled):
        if "renderedCel" in (rules[index].get("overriders") or {}):
            ops.append({"op": "remove", "path": f"/spec/{field_name}/{index}/overriders/renderedCel"})
    return ops + compiled.rendered_field_ops(doc)


def _kept_in_configmaps(compiled: CompiledOverridePolicy) -> list[int]:
    """Indexes of the rules whose sidecar template is read from a ConfigMap: a ``renderedCel``
    stored on them (from an earlier inline version) is not what runs, so it is removed."""
    return [rule.index for rule in compiled.rules if rule.sidecar is not None and rule.sidecar.config_map is not None]


def compile_checked(obj: Obj, egress: Egress, seconds: float = float("inf")) -> EitherPolicy:
    """``obj`` compiled and its http references held to the operator's ``egress`` setting, as the
    webhook checks a policy being admitted; PolicyErrors naming the policy, its rules and fields.
    Loading its scripts gives up after ``seconds``."""
    with jsrules.request_deadline(seconds):
        compiled = compile_policy(obj)
    httprefs.check(compiled, egress)
    return compiled


def admit_policy(request: Request, egress: Egress, seconds: float = float("inf")) -> PolicyAdmission:
    """Check a policy on CREATE/UPDATE (its http references against the operator's ``egress``
    setting too) and render its templates; other operations pass untouched. Loading its scripts
    gives up after ``seconds`` (the request's deadline)."""
    if request.operation not in ("CREATE", "UPDATE"):
        return PolicyAdmission()
    obj = request.object
    try:
        compiled = compile_checked(obj, egress, seconds)
    except PolicyErrors as e:
        return PolicyAdmission(error=str(e))
    return PolicyAdmission(patch=rendered_patch(obj, compiled), warnings=list(compiled.warnings),
                           compiled=compiled)
