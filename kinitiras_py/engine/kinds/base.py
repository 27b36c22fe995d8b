"""What every rule kind's step is given, and the protocols the request path dispatches on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from kinitiras_py.base.errors import RuleDenied
from kinitiras_py.base.ids import RuleId
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.evaluation.celbindings import Bindings
from kinitiras_py.engine.objects import patchlog
from kinitiras_py.engine.rules import jsrules

EMPTY: Mapping[Any, Any] = MappingProxyType({})
"""What a policy, rule or kind without references or fan-out holds: one shared empty mapping, not an
empty dict each (10,000 policies would hold megabytes of them)."""


def empty() -> Mapping[Any, Any]:
    """:data:`EMPTY`, as a dataclass field's default_factory."""
    return EMPTY


Inputs = Mapping[str, Any] | Bindings
"""What a validate check evaluates against: plain variables or the shared converted bindings."""


@dataclass(slots=True)
class OverrideStep:
    """One override rule being applied: what its overriders read and where they write.

    ``working`` is the object before the rule; ``draft`` holds it as the rule's overriders so far
    left it; ``apply`` applies operations to the draft (and records them for ``patchLastApplied``).
    """

    working: Obj
    draft: patchlog.Draft
    variables: dict[str, Any]
    bound: Bindings | None
    """``variables`` with ``working`` as the object, converted for CEL (None: a rule with parameters)."""
    apply: Callable[[Patch], Any]
    rule: RuleId
    rendered: Program | None = None
    """Stands in for a sidecar template's program (a template read from a ConfigMap)."""
    marks: jsrules.Marks | None = None
    """The names js-admissions' marker annotations hold so far in this request."""

    def inputs(self) -> Bindings | dict[str, Any]:
        """What a program of the rule evaluates against: the shared bindings while the rule has not
        changed the object, then those bindings with the object changed (their untouched conversions
        kept); plain variables for a rule with its own parameters."""
        if self.bound is None:
            return {**self.variables, "object": self.draft.doc}
        return self.bound if self.draft.doc is self.working else self.bound.changed(
            "object", self.draft.doc, self.draft.touched)


class Overrider(Protocol):
    """An override kind compiled: its step changes the rule's working object."""

    def step(self, run: OverrideStep) -> None:
        """Apply this overrider to ``run.draft`` (through ``run.apply``)."""


class Check(Protocol):
    """A validate kind compiled: its step tells whether the object passes."""

    def step(self, variables: Inputs, fallback: str) -> str | None:
        """None when the object passes, else why not (``fallback`` when the check gives no reason)."""


def patch_ops(result: JSON, what: str, answers: bool = False) -> Patch:
    """``result`` checked to be JSON patch operations (``what`` names the part that returned it).
    With ``answers``, ``{"deny": reason}`` denies and ``{"error": reason}`` fails the rule."""
    if isinstance(result, dict) and answers:
        # Rendered sidecar templates answer {"deny": reason} or {"error": reason} instead of operations.
        if isinstance(result.get("deny"), str):
            raise RuleDenied(result["deny"])
        if isinstance(result.get("error"), str):
            raise ValueError(result["error"])
    if not isinstance(result, list):
        raise ValueError(f"{what} must return a list of JSON patch operations, got {type(result).__name__}")
    for i, op in enumerate(result):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise ValueError(f"{what} returned an invalid operation at index {i}: {op!r} (needs op and path)")
    return result


def failed(result: JSON, what: str, fallback: str) -> str | None:
    """A check's CEL ``result`` read: None when valid, else its reason or ``fallback``."""
    if isinstance(result, bool):
        valid, reason = result, ""
    elif isinstance(result, dict) and isinstance(result.get("valid", True), bool):
        valid, reason = bool(result.get("valid", True)), str(result.get("reason") or "")
    else:
        raise ValueError(f"{what} must return a bool or a map {{valid, reason}}, got {result!r}")
    return None if valid else reason or fallback
