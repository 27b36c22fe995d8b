"""The spec shared by OverridePolicy and ClusterOverridePolicy: ordered rules, each with its
overriders (plaintext JSON patches, a template rendered to CEL, a CEL program, typed origin
overriders, and kinitiras' CUE fields kept so its YAML applies unchanged)."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from kinitiras_py.api import policywide
from kinitiras_py.api.core import Affinity, Int32, ResourceRequirements, Toleration, TopologySpreadConstraint
from kinitiras_py.api.injection import Inject
from kinitiras_py.api.javascript import JavaScript
from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.api.schema import Model, OneOf, Pattern, prop
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.api.sidecar import SidecarTemplate
from kinitiras_py.api.values import ConstantValue, Decimal, FailurePolicy, TargetOperation

OVERRIDE_OPERATIONS = ("add", "replace", "remove")
TEMPLATE_TYPES = ("annotations", "labels", "resources", "resourcesOversell", "tolerations", "affinity",
                  "sidecar", "inject")
ORIGIN_TYPES = ("annotations", "labels", "nodeSelector", "hostNetwork", "schedulerName",
                "resourceRequirements", "resourceOversell", "affinity", "tolerations",
                "topologySpreadConstraints")

OverrideOperation = Annotated[str, OneOf(OVERRIDE_OPERATIONS)]
POINTER_PATTERN = r"^(/([^~/]|~[01])*)*$"
Pointer = Annotated[str, Pattern(POINTER_PATTERN, "a JSON pointer such as /metadata/labels/team "
                                                  "(write ~0 for '~' and ~1 for '/' in a key)")]


@dataclass(frozen=True, kw_only=True)
class PlaintextOverrider(Model):
    """One RFC 6902 operation, applied as written or once per value a select picks."""

    path: Pointer = prop(
        "JSON pointer of the target field, e.g. /metadata/labels/team; with select, #0, #1... are the "
        "indexes (or keys) the select's [*], unions and filters took.", required=True)
    op: OverrideOperation = prop("add, replace or remove.", required=True)
    value: Any = prop("Any JSON value; not used by remove.")
    select: str | None = prop("A KubeMod select: the operation is applied once per value it picks.")
    value_template: str | None = prop("The value as text with {{ CEL }} placeholders (target, "
                                      "namespace, selectedItem, selectKeyParts), read as YAML once "
                                      "rendered; wins over value.")
    lenient: bool = prop("KubeMod's leniency: a negative index counts from the end of the array (-1 "
                         "appends when adding), add creates a missing array for it, remove of a "
                         "missing path does nothing.", factory=bool)
    rendered_cel: str | None = prop("CEL rendered from select and valueTemplate; written by the "
                                    "controller, do not edit.")


@dataclass(frozen=True, kw_only=True)
class ResourcesOversellRule(Model):
    """Factors applied to container limits to compute requests, written as decimal strings."""

    cpu_factor: Decimal | None = prop('CPU request = CPU limit x this factor, e.g. "0.5".')
    memory_factor: Decimal | None = prop("Memory request = memory limit x this factor.")
    disk_factor: Decimal | None = prop("ephemeral-storage request = its limit x this factor.")


@dataclass(frozen=True, kw_only=True)
class OverrideRuleTemplate(Model):
    """A declarative override, rendered to CEL into renderedCel when the policy is admitted."""

    type: Annotated[str, OneOf(TEMPLATE_TYPES)] = prop("What the template changes.", required=True)
    operation: OverrideOperation | None = prop("add, replace or remove; required except for type inject "
                                               "(which only adds).")
    path: str | None = prop("For annotations and labels: the key (not a full path).")
    value: ConstantValue | None = prop("Constant value for annotations and labels; wins over "
                                       "valueRef.")
    value_ref: ResourceRefer | None = prop("Where to read the value for annotations and labels.")
    resources: ResourceRequirements | None = prop("Requests and limits for type resources.")
    resources_oversell: ResourcesOversellRule | None = prop("Factors for type resourcesOversell.")
    tolerations: list[Toleration] = prop("Tolerations for type tolerations.", factory=list)
    affinity: Affinity | None = prop("Affinity for type affinity.")
    sidecar: SidecarTemplate | None = prop("Containers and more to add, for type sidecar (operation add).")
    container_names: list[str] = prop("Only containers with these names (resources, "
                                      "resourcesOversell, inject); empty means every container.",
                                      factory=list)
    inject: Inject | None = prop("What type inject adds to pods: env, envFrom, volumeMounts, volumes.")

    def problems(self) -> Iterator[tuple[str, str]]:
        """operation is required, except for inject, which only adds."""
        if self.type == "inject":
            if self.operation not in (None, "add"):
                yield "operation", "type inject only adds: write operation: add or leave it out"
        elif self.operation is None:
            yield "operation", "required field is missing"


@dataclass(frozen=True, kw_only=True)
class OriginOversell(Model):
    """Per-resource factors applied to a container's current requests and limits."""

    requests: dict[str, Decimal] = prop("Factor per resource name applied to requests.", factory=dict)
    limits: dict[str, Decimal] = prop("Factor per resource name applied to limits.", factory=dict)


@dataclass(frozen=True, kw_only=True)
class OverrideRuleOrigin(Model):
    """A typed change to a native field of the object or its pod template. The payload fields are
    None when not written: the type's own one must be, even empty."""

    type: Annotated[str, OneOf(ORIGIN_TYPES)] = prop("The field changed.", required=True)
    operation: OverrideOperation = prop("add, replace or remove; several types allow replace only.",
                                        required=True)
    replace: bool = prop("Replace the whole map or list instead of merging into it.", factory=bool)
    container_count: int = prop("Index of the container for resourceRequirements and "
                                "resourceOversell; 0 is the first.", factory=int)
    resources_oversell: OriginOversell | None = prop("Factors for type resourceOversell.")
    resource_requirements: ResourceRequirements | None = prop("Resources for type "
                                                              "resourceRequirements.")
    tolerations: list[Toleration] | None = prop("Tolerations for type tolerations.")
    affinity: Affinity | None = prop("Affinity for type affinity.")
    topology_spread_constraints: list[TopologySpreadConstraint] | None = prop(
        "Constraints for type topologySpreadConstraints.")
    scheduler_name: str | None = prop("Scheduler for type schedulerName.")
    host_network: bool | None = prop("Value for type hostNetwork.")
    node_selector: dict[str, str] | None = prop("Node labels for type nodeSelector.")
    annotations: dict[str, str] | None = prop("Annotations for type annotations.")
    labels: dict[str, str] | None = prop("Labels for type labels.")


@dataclass(frozen=True, kw_only=True)
class Overriders(Model):
    """How a rule changes the object; the parts run in this order: renderedCel (from template),
    cueCel (from cue), cel, javascript, plaintext, origin, each seeing the previous one's result."""

    plaintext: list[PlaintextOverrider] = prop("JSON patch operations applied as written.",
                                               factory=list)
    template: OverrideRuleTemplate | None = prop("A declarative override rendered to renderedCel.")
    cel: str | None = prop("CEL expression over object (and oldObject, params) returning a list of "
                           "JSON patch operations.")
    origin: list[OverrideRuleOrigin] = prop("Typed changes to native fields.", factory=list)
    javascript: JavaScript | None = prop("A script whose jsa_mutate returns {Allowed, Message, Result}; "
                                         "Result replaces the object.")
    rendered_cel: str | None = prop("CEL rendered from template; written by the controller, do not "
                                    "edit.")
    cue: str | None = prop("CUE program (kinitiras), compiled to CEL into cueCel when the policy is "
                           "admitted; outside the supported subset (docs/cue.md) it is refused.")
    cue_cel: str | None = prop("CEL compiled from cue; written by the controller, do not edit.")
    rendered_cue: str | None = prop("CUE rendered by kinitiras; ignored (templates render to CEL).")


@dataclass(frozen=True, kw_only=True)
class OverrideRule(Model):
    """Overriders and the operations they run on."""

    target_operations: list[TargetOperation] = prop("Operations the rule runs on; empty or * means "
                                                    "all.", factory=list)
    overriders: Overriders = prop("The changes to make.", required=True)
    failure_policy: FailurePolicy = prop("On an error: Fail denies the request, Ignore skips this "
                                         "rule.", default="Fail")
    patch_last_applied: bool = prop("Also apply the rule's operations to the JSON in the "
                                    "kubectl.kubernetes.io/last-applied-configuration annotation, "
                                    "as KubeMod does.", factory=bool)


@dataclass(frozen=True, kw_only=True)
class OverridePolicySpec(Model):
    """Which objects to change and how."""

    resource_selectors: list[ResourceSelector] = prop("Objects the policy applies to (any selector "
                                                      "matching); empty means every object.",
                                                      factory=list)
    override_rules: list[OverrideRule] = prop("Rules applied in order.", required=True, min_items=1)
    match_conditions: list[MatchCondition] = policywide.match_conditions()
    rendered_match_conditions: str | None = policywide.rendered_match_conditions()
    value_refs: dict[str, ResourceRefer] = policywide.value_refs()
    execution_tier: Int32 = prop("Lower tiers run first; a later tier is matched and applied against "
                                 "the object earlier tiers produced.", factory=int)
