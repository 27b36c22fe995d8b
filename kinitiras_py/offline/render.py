"""Write rendered CEL back into a policy document (what the webhook's policy patch does)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence

from kinitiras_py.admission import sidecars as sidecar_templates
from kinitiras_py.admission.policies import rendered_patch
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.policies.compiled import AnyPolicy, CompiledOverrideRule, EitherPolicy
from kinitiras_py.engine.rules import sidecars
from kinitiras_py.offline.loader import InputError
from kinitiras_py.offline.static import StaticStore


def with_rendered(doc: Obj, compiled: EitherPolicy) -> Obj:
    """A copy of ``doc`` with each templated rule's ``renderedCel`` set."""
    from kinitiras_py.engine.objects import patching

    result: Obj = patching.apply_patch(copy.deepcopy(doc), rendered_patch(doc, compiled))
    return result


def rendered_sources(compiled: AnyPolicy) -> list[tuple[str, str]]:
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


def configmap_sources(compiled: AnyPolicy, context: Sequence[Obj]) -> list[tuple[str, str]]:
    """``(field path and ConfigMap, CEL source)`` of every sidecar rule whose template is kept in a
    ConfigMap, rendered from the ConfigMaps in ``context`` as the webhook renders them when it reads
    one; InputError when a ConfigMap or key is not there or its template cannot be rendered."""
    out = []
    store = StaticStore(context)
    for rule in compiled.rules:
        sidecar = rule.sidecar if isinstance(rule, CompiledOverrideRule) else None
        if sidecar is None or sidecar.config_map is None:
            continue
        where = f"spec.overrideRules[{rule.index}].overriders.template ({sidecar.source})"
        try:
            text = asyncio.run(sidecar_templates.template_text(sidecar, store, 1.0, compiled.namespace))
            out.append((where, sidecars.source_for(sidecar, text)))
        except LookupError as e:
            raise InputError(f"{compiled.ref}: {e} in --context") from None
        except PolicyError as e:
            raise InputError(f"{compiled.ref}: {e}") from None
    return out
