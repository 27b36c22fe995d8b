"""Which policy and which rule: the identities results, errors, metrics and every per-rule key use.

``str()`` of an identity is the display form messages use (``OverridePolicy team-a/oversell``,
``... rule 0``), so a message built from one reads as messages always have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


class Identified(Protocol):
    """What knows the identity of its policy: a compiled policy (results need no more of it)."""

    @property
    def identity(self) -> PolicyId:
        """The policy's structured identity."""


@dataclass(frozen=True, slots=True)
class PolicyId:
    """Which policy: kind, namespace (None for the cluster kinds) and name."""

    kind: str
    namespace: str | None
    name: str

    @classmethod
    def of(cls, policy: Identified) -> PolicyId:
        """The identity of a compiled policy."""
        return policy.identity

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


class RuleId(NamedTuple):
    """Which rule: its policy and its index in ``overrideRules``/``validateRules``.

    A named tuple: the request path makes one per matched rule and looks values up by it, for
    which a tuple is quicker to build and hash than a dataclass.
    """

    policy: PolicyId
    rule: int

    def __str__(self) -> str:
        return f"{self.policy} rule {self.rule}"
