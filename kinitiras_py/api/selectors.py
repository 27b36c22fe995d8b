"""Which objects a policy applies to (``resourceSelectors``), and the lookup spec of ``from: k8s``
references, which has the same shape. Matching itself lives in the engine."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.core import LABEL_SELECTOR_OPERATORS, LabelSelector
from kinitiras_py.api.schema import Model, OneOf, prop


@dataclass(frozen=True, kw_only=True)
class FieldSelectorRequirement(Model):
    """A requirement on one string field of the object."""

    field: str = prop("Dotted path of the field, e.g. metadata.annotations.team; the text after "
                      "'.annotations.' is one annotation key.", required=True)
    operator: Annotated[str, OneOf(LABEL_SELECTOR_OPERATORS)] = prop(
        "How the field relates to value; NotIn also holds when the field is absent.", required=True)
    value: list[str] = prop("Values for In and NotIn.", factory=list)


@dataclass(frozen=True, kw_only=True)
class FieldSelector(Model):
    """Requirements on the object's fields, ANDed."""

    match_fields: dict[str, str] = prop("Field paths that must exist with exactly these values.",
                                        factory=dict)
    match_expressions: list[FieldSelectorRequirement] = prop("Requirements that must all hold.",
                                                             factory=list)


@dataclass(frozen=True, kw_only=True)
class ResourceSelector(Model):
    """Selects objects by apiVersion and kind, then by namespace, name, labels and fields."""

    api_version: str = prop("API version of the objects, e.g. apps/v1 or v1 (compared as written).",
                            required=True)
    kind: str = prop("Kind of the objects, e.g. Deployment.", required=True)
    namespace: str | None = prop("Only objects in this namespace; empty means any namespace.")
    name: str | None = prop("Only the object with this name; label and field selectors are then "
                            "ignored.")
    label_selector: LabelSelector | None = prop("Only objects whose labels match.")
    field_selector: FieldSelector | None = prop("Only objects whose fields match.")
