"""Kubernetes core shapes that policies embed: label selectors, affinity, tolerations, resources,
topology spread constraints. Field names follow core/v1 and meta/v1 so the values can be copied
into Pods as they are; enums are checked here so a bad policy fails when it is applied, not later
on every Pod it touches."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated

from kinitiras_py.api.schema import Check, Format, Model, OneOf, Pattern, prop

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = (*LABEL_SELECTOR_OPERATORS, "Gt", "Lt")
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")

_NUMBER = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
QUANTITY_PATTERN = rf"^{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))?$"

_SUFFIXES = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10**3, "M": 10**6,
             "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
             **{f"{p}i": 2 ** (10 * n) for n, p in enumerate("KMGTPE", start=1)}}
MAX_QUANTITY = 2**63 - 1
"""The largest amount a resource request or limit can hold: the API server keeps them as int64."""


def quantity_problem(value: int | str) -> str | None:
    """Why a well-formed quantity cannot be a resource amount (negative, or beyond int64), or None."""
    text = str(value).strip()
    number = re.match(_NUMBER, text)
    if number is None:  # the pattern reports it
        return None
    rest = text[number.end():]
    exponent = rest[1:] if rest[:1] in ("e", "E") and rest not in _SUFFIXES else None
    try:
        amount = Decimal(number.group(0)) * (Decimal(10) ** int(exponent) if exponent else _SUFFIXES[rest])
    except (KeyError, ValueError, ArithmeticError):  # an exponent beyond Decimal's range
        amount = Decimal("Infinity") if exponent and not exponent.startswith("-") else Decimal(0)
    if amount < 0:
        return f"{value} is negative: a resource amount must be 0 or more"
    if amount > MAX_QUANTITY:
        return f"{value} is too large: a resource amount must be at most {MAX_QUANTITY} (2^63-1)"
    return None


Quantity = Annotated[int | str, Pattern(QUANTITY_PATTERN, "a quantity such as 500m, 2, 1.5Gi or 1e3"),
                     Check(quantity_problem)]
"""An amount of a resource: an integer, or a string in Kubernetes' quantity syntax; from 0 to 2^63-1."""

Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]
Timestamp = Annotated[str, Format("date-time")]
"""A meta/v1 time, RFC 3339 (``2024-05-01T12:00:00Z``)."""


@dataclass(frozen=True, kw_only=True)
class LabelSelectorRequirement(Model):
    """One ``matchExpressions`` entry of a label selector."""

    key: str = prop("Label key the requirement applies to.", required=True)
    operator: Annotated[str, OneOf(LABEL_SELECTOR_OPERATORS)] = prop(
        "How the label's value relates to values.", required=True)
    values: list[str] = prop("Values for In and NotIn; empty for Exists and DoesNotExist.", factory=list)


@dataclass(frozen=True, kw_only=True)
class LabelSelector(Model):
    """A meta/v1 label selector: matchLabels AND matchExpressions; empty selects everything."""

    match_labels: dict[str, str] = prop("Labels that must all be present with these values.",
                                        factory=dict)
    match_expressions: list[LabelSelectorRequirement] = prop(
        "Requirements that must all hold.", factory=list)


@dataclass(frozen=True, kw_only=True)
class NodeSelectorRequirement(Model):
    """A requirement on a node label or field."""

    key: str = prop("Node label or field name.", required=True)
    operator: Annotated[str, OneOf(NODE_SELECTOR_OPERATORS)] = prop(
        "How the node's value relates to values.", required=True)
    values: list[str] = prop("Values to compare with; one integer for Gt and Lt.", factory=list)


@dataclass(frozen=True, kw_only=True)
class NodeSelectorTerm(Model):
    """Requirements that a node must all meet."""

    match_expressions: list[NodeSelectorRequirement] = prop("Requirements on node labels.",
                                                            factory=list)
    match_fields: list[NodeSelectorRequirement] = prop("Requirements on node fields.", factory=list)


@dataclass(frozen=True, kw_only=True)
class NodeSelector(Model):
    """Node selector terms, ORed."""

    node_selector_terms: list[NodeSelectorTerm] = prop("Terms of which at least one must match.",
                                                       required=True)


@dataclass(frozen=True, kw_only=True)
class PreferredSchedulingTerm(Model):
    """A weighted node preference."""

    weight: Int32 = prop("Weight from 1 to 100 added when the preference matches.", required=True)
    preference: NodeSelectorTerm = prop("The node selector term to prefer.", required=True)


@dataclass(frozen=True, kw_only=True)
class NodeAffinity(Model):
    """Node affinity scheduling rules."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = prop(
        "Nodes the pod may be scheduled on.")
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = prop(
        "Weighted node preferences.", factory=list)


@dataclass(frozen=True, kw_only=True)
class PodAffinityTerm(Model):
    """Pods, found by label in some namespaces, that must (or must not) share a topology domain."""

    label_selector: LabelSelector | None = prop("Selects the pods this term refers to.")
    namespace_selector: LabelSelector | None = prop("Selects the namespaces searched for those pods.")
    namespaces: list[str] = prop("Namespaces searched; empty means the pod's own namespace.",
                                 factory=list)
    topology_key: str = prop("Node label whose value defines a topology domain.", required=True)


@dataclass(frozen=True, kw_only=True)
class WeightedPodAffinityTerm(Model):
    """A weighted pod affinity term."""

    weight: Int32 = prop("Weight from 1 to 100 added when the term matches.", required=True)
    pod_affinity_term: PodAffinityTerm = prop("The pod affinity term.", required=True)


@dataclass(frozen=True, kw_only=True)
class PodAffinity(Model):
    """Co-locate the pod with other pods."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = prop(
        "Terms that must all hold at scheduling time.", factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = prop(
        "Weighted preferred terms.", factory=list)


@dataclass(frozen=True, kw_only=True)
class PodAntiAffinity(PodAffinity):
    """Keep the pod away from other pods (same shape as pod affinity)."""


@dataclass(frozen=True, kw_only=True)
class Affinity(Model):
    """Pod scheduling constraints."""

    node_affinity: NodeAffinity | None = prop("Node affinity rules.")
    pod_affinity: PodAffinity | None = prop("Pod affinity rules.")
    pod_anti_affinity: PodAntiAffinity | None = prop("Pod anti-affinity rules.")


@dataclass(frozen=True, kw_only=True)
class Toleration(Model):
    """A core/v1 toleration."""

    key: str | None = prop("Taint key; empty with operator Exists tolerates every taint.")
    operator: Annotated[str, OneOf(TOLERATION_OPERATORS)] | None = prop(
        "Exists or Equal (the Kubernetes default).")
    value: str | None = prop("Taint value compared when operator is Equal.")
    effect: Annotated[str, OneOf(TAINT_EFFECTS)] | None = prop(
        "Taint effect to tolerate; empty tolerates every effect.")
    toleration_seconds: Int64 | None = prop("How long a NoExecute taint is tolerated before eviction.")


@dataclass(frozen=True, kw_only=True)
class ResourceRequirements(Model):
    """Compute resources of a container."""

    limits: dict[str, Quantity] = prop("Maximum amount of each resource.", factory=dict)
    requests: dict[str, Quantity] = prop("Amount of each resource reserved for scheduling.",
                                         factory=dict)


@dataclass(frozen=True, kw_only=True)
class TopologySpreadConstraint(Model):
    """How pods spread over topology domains."""

    max_skew: Int32 = prop("Largest allowed difference in matching pods between two domains.",
                           required=True)
    topology_key: str = prop("Node label whose value defines a domain.", required=True)
    when_unsatisfiable: Annotated[str, OneOf(WHEN_UNSATISFIABLE)] = prop(
        "What the scheduler does when the constraint cannot be met.", required=True)
    label_selector: LabelSelector | None = prop("Selects the pods that are counted.")
    min_domains: Int32 | None = prop("Minimum number of eligible domains.")
    node_affinity_policy: Annotated[str, OneOf(NODE_INCLUSION_POLICIES)] | None = prop(
        "Whether the pod's node affinity limits the domains counted.")
    node_taints_policy: Annotated[str, OneOf(NODE_INCLUSION_POLICIES)] | None = prop(
        "Whether node taints limit the domains counted.")
    match_label_keys: list[str] = prop("Pod label keys whose values further narrow the selector.",
                                       factory=list)
