"""The spec shared by ClusterValidatePolicy and ValidatePolicy: ordered rules, each a condition
template rendered to CEL or a CEL expression, with what a failure does (validationActions)."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated

from kinitiras_py.api import policywide
from kinitiras_py.api.javascript import JavaScript
from kinitiras_py.api.matching import MatchCondition
from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.api.schema import Model, OneOf, Pattern, prop
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.api.values import ConstantValue, FailurePolicy, TargetOperation

VALIDATE_TEMPLATE_TYPES = ("condition",)
AFFECT_MODES = ("reject", "allow")
CONDS = ("Equal", "NotEqual", "Exist", "NotExist", "In", "NotIn", "Gt", "Gte", "Lt", "Lte", "Regex")
"""kinitiras' conditions, plus Regex (a Go constant there, but neither in its enum nor renderable)."""
VALUE_OPERATIONS = ("+", "-", "*", "/")
VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")
OPERAND_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?%?$"
Operand = Annotated[int | str, Pattern(OPERAND_PATTERN, 'a number or a percentage, e.g. 2, "0.5" or "50%"')]


@dataclass(frozen=True, kw_only=True)
class ValueProcess(Model):
    """Arithmetic applied to the right operand before comparing, e.g. * "50%"."""

    operation: Annotated[str, OneOf(VALUE_OPERATIONS)] = prop("+, -, * or /.", required=True)
    operation_with: Operand = prop('The other operand: a number, or a percentage such as "50%".',
                                   required=True)

    def problems(self) -> Iterator[tuple[str, str]]:
        """Dividing by zero fails on every request."""
        if self.operation == "/" and Decimal(str(self.operation_with).rstrip("%")) == 0:
            yield "operationWith", "division by zero"


@dataclass(frozen=True, kw_only=True)
class ValidateCondition(Model):
    """Compares the data under test (dataRef) with a value or another reference."""

    affect_mode: Annotated[str, OneOf(AFFECT_MODES)] = prop(
        "reject: deny when the condition holds; allow: deny unless it holds.", default="reject")
    cond: Annotated[str, OneOf(CONDS)] = prop("The comparison.", required=True)
    data_ref: ResourceRefer = prop("The data under test (left operand).", required=True)
    value: ConstantValue | None = prop("Constant right operand.")
    value_ref: ResourceRefer | None = prop("Referenced right operand; wins over value.")
    value_process: ValueProcess | None = prop("Arithmetic on the right operand (not for In, NotIn).")
    message: str | None = prop("Why the request is denied.")


@dataclass(frozen=True, kw_only=True)
class ValidateRuleTemplate(Model):
    """A declarative check, rendered to CEL into renderedCel when the policy is admitted."""

    type: Annotated[str, OneOf(VALIDATE_TEMPLATE_TYPES)] = prop("The kind of template.", required=True)
    condition: ValidateCondition = prop("The condition checked.", required=True)


@dataclass(frozen=True, kw_only=True)
class ValidateRule(Model):
    """A check and the operations it runs on."""

    target_operations: list[TargetOperation] = prop("Operations the rule runs on; empty or * means "
                                                    "all.", factory=list)
    template: ValidateRuleTemplate | None = prop("A declarative check rendered to renderedCel.")
    cel: str | None = prop("CEL expression over object and oldObject deciding whether the request "
                           "is admitted: a bool, or a map {valid, reason}.")
    javascript: JavaScript | None = prop("A script whose jsa_validate returns {Allowed, Message}; "
                                         "Allowed false refuses the request with Message.")
    message: str | None = prop("Why the request was refused when cel returns false (the template's "
                               "condition has its own message).")
    message_template: str | None = prop("A rule with neither template nor cel refuses every request "
                                        "its policy applies to (the policy's matchConditions decide), "
                                        "with this message: text with {{ CEL }} placeholders.")
    rendered_cel: str | None = prop("CEL rendered from template; written by the controller, do not "
                                    "edit.")
    cue: str | None = prop("CUE program (kinitiras), compiled to CEL into cueCel when the policy is "
                           "admitted; outside the supported subset (docs/cue.md) it is refused.")
    cue_cel: str | None = prop("CEL compiled from cue; written by the controller, do not edit.")
    rendered_cue: str | None = prop("CUE rendered by kinitiras; ignored (templates render to CEL).")
    failure_policy: FailurePolicy = prop("On an error: Fail denies the request, Ignore skips this "
                                         "rule.", default="Fail")
    validation_actions: list[Annotated[str, OneOf(VALIDATION_ACTIONS)]] = prop(
        "What a failed check does: Deny refuses the request, Warn returns a warning, Audit records "
        "it.", default=["Deny"], min_items=1)


@dataclass(frozen=True, kw_only=True)
class ValidatePolicySpec(Model):
    """Which objects to check and how."""

    resource_selectors: list[ResourceSelector] = prop("Objects the policy applies to (any selector "
                                                      "matching); empty means every object.",
                                                      factory=list)
    validate_rules: list[ValidateRule] = prop("Rules checked in order; the first denial wins.",
                                              required=True, min_items=1)
    match_conditions: list[MatchCondition] = policywide.match_conditions()
    rendered_match_conditions: str | None = policywide.rendered_match_conditions()
    value_refs: dict[str, ResourceRefer] = policywide.value_refs()
