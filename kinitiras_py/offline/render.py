"""Write rendered CEL back into a policy document (what the webhook's policy patch does)."""

from __future__ import annotations

import copy

from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.engine.compiled import CompiledPolicy


def rendered_patch(doc: Obj, compiled: CompiledPolicy) -> Patch:
    """JSON patch ops setting ``renderedCel`` of every templated rule, and the other rendered fields
    (``renderedMatchConditions``, fanned-out plaintext operations); none when already current."""
    field = "validateRules" if compiled.validating else "overrideRules"
    ops: Patch = []
    for index, source in sorted(compiled.rendered.items()):
        rule = doc["spec"][field][index]
        holder, pointer = (rule, f"/spec/{field}/{index}") if compiled.validating else \
            (rule.get("overriders") or {}, f"/spec/{field}/{index}/overriders")
        if holder.get("renderedCel") != source:
            ops.append({"op": "add", "path": f"{pointer}/renderedCel", "value": source})
    return ops + compiled.rendered_field_ops(doc)


def with_rendered(doc: Obj, compiled: CompiledPolicy) -> Obj:
    """A copy of ``doc`` with each templated rule's ``renderedCel`` set."""
    from kinitiras_py.engine import patching

    result: Obj = patching.apply_patch(copy.deepcopy(doc), rendered_patch(doc, compiled))
    return result


def rendered_sources(compiled: CompiledPolicy) -> list[tuple[str, str]]:
    """``(field path, CEL source)`` of every templated rule, in rule order."""
    field = "validateRules" if compiled.validating else "overrideRules"
    where = "" if compiled.validating else ".overriders"
    found = [(f"spec.{field}[{i}]{where}.renderedCel", source) for i, source in sorted(compiled.rendered.items())]
    return found + [(_field_path(pointer), source) for pointer, source in compiled.rendered_fields]


def _field_path(pointer: str) -> str:
    """``/spec/overrideRules/0/overriders/plaintext/1/renderedCel`` as ``spec.overrideRules[0]...``."""
    out = ""
    for token in pointer.split("/")[1:]:
        out += f"[{token}]" if token.isdigit() else f".{token}" if out else token
    return out
