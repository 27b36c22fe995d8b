"""The ``origin`` kind: KubeMod-style origin overriders (:mod:`..rules.origin`), applied last."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.api.overrides import OverrideRuleOrigin
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.kinds.base import OverrideStep
from kinitiras_py.engine.rules import origin


@dataclass(frozen=True, slots=True)
class OriginOverrider:
    """An override rule's ``origin`` entries."""

    entries: list[Obj]

    def step(self, run: OverrideStep) -> None:
        """Apply the entries to the rule's object."""
        origin.apply_origin(run.draft.doc, self.entries, run.rule, run.apply)


def compile_override(errors: list[PolicyError], written: list[OverrideRuleOrigin], path: str) -> OriginOverrider | None:
    """The ``origin`` entries at ``path`` checked; None when absent (or empty)."""
    # The entries are applied as written (:mod:`..rules.origin` reads their JSON); their models are checked.
    entries = [entry.raw if entry is not None else None for entry in written]
    errors += origin.validate_origin(written, entries, path)
    return OriginOverrider(entries) if entries else None
