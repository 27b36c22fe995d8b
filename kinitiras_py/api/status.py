"""The status every policy kind carries, written by the controller through the status subresource."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.core import Int64, Timestamp
from kinitiras_py.api.schema import Model, OneOf, prop

CONDITION_STATUSES = ("True", "False", "Unknown")


@dataclass(frozen=True, kw_only=True)
class Condition(Model):
    """One observation about the policy, such as Ready."""

    type: str = prop("Condition type, e.g. Ready.", required=True)
    status: Annotated[str, OneOf(CONDITION_STATUSES)] = prop("True, False or Unknown.", required=True)
    reason: str | None = prop("Machine-readable reason in CamelCase.")
    message: str | None = prop("Human-readable details.")
    observed_generation: Int64 | None = prop("metadata.generation the condition was computed from.")
    last_transition_time: Timestamp | None = prop("When status last changed.")


@dataclass(frozen=True, kw_only=True)
class PolicyStatus(Model):
    """What the controller observed about the policy."""

    conditions: list[Condition] = prop("Current conditions; Ready tells whether the policy is in "
                                       "force.", factory=list)
    rule_count: Int64 | None = prop("Number of rules in the spec, shown by kubectl get (JSONPath "
                                    "cannot count on Kubernetes 1.20).")
