"""``matchConditions``: what must hold of the request for a policy to apply, beyond its selectors.

A condition is CEL (``expression``, as in Kubernetes' admission matchConditions) or a KubeMod
criterion (``select`` with ``matchValue``, ``matchValues`` or ``matchRegex``, ``matchFor`` and
``negate``). Every condition of a policy is rendered into one CEL expression stored as
``renderedMatchConditions`` when the policy is admitted.
"""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.schema import Model, OneOf, prop

MATCH_FOR = ("Any", "All")


@dataclass(frozen=True, kw_only=True)
class MatchCondition(Model):
    """One condition: set expression, or select (with what its values are compared with)."""

    name: str | None = prop("A name for messages.")
    expression: str | None = prop("CEL over object, oldObject, request and namespaceObject that must "
                                  "return true.")
    select: str | None = prop("A KubeMod select (its JSONPath dialect), e.g. $.spec.containers[*].image.")
    match_value: str | None = prop("A selected value must equal this (non-strings in printed form).")
    match_values: list[str] = prop("A selected value must equal one of these.", factory=list)
    match_regex: str | None = prop("A selected value must match this RE2 regular expression "
                                   "(unanchored).")
    match_for: Annotated[str, OneOf(MATCH_FOR)] = prop("Any (the default): one selected value must pass; "
                                                       "All: every one, and at least one.",
                                                       factory=lambda: "Any")
    negate: bool = prop("Invert the outcome.", factory=bool)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Exactly one of expression and select; the comparisons belong to select."""
        if (self.expression is None) == (self.select is None):
            yield "expression", "set exactly one of expression (CEL) and select (a KubeMod criterion)"
        elif self.expression is not None:
            # matchFor Any and negate false are the defaults: harmless, whoever wrote them.
            for name in ("matchValue", "matchValues", "matchRegex", "matchFor", "negate"):
                if self.raw.get(name) not in (None, "Any", False, []):
                    yield name, "only for a select; an expression says it all"
