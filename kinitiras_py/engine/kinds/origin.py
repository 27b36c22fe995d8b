"""The ``origin`` kind: KubeMod-style origin overriders (:mod:`..rules.origin`), applied last."""

from __future__ import annotations

from dataclasses import dataclass

from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking.checker import list_of
from kinitiras_py.engine.kinds.base import OverrideStep
from kinitiras_py.engine.rules import origin


@dataclass(frozen=True, slots=True)
class OriginOverrider:
    """An override rule's ``origin`` entries."""

    entries: list[Obj]

    def step(self, run: OverrideStep) -> None:
        """Apply the entries to the rule's object."""
        origin.apply_origin(run.draft.doc, self.entries, run.rule, run.apply)


def compile_override(errors: list[PolicyError], written: object, path: str) -> OriginOverrider | None:
    """The ``origin`` entries at ``path`` checked; None when absent (or empty)."""
    entries = list_of(written)
    errors += origin.validate_origin(entries, path)
    return OriginOverrider(entries) if entries else None
