"""Fields that OverridePolicy and ValidatePolicy specs both have, for the policy as a whole:
``matchConditions`` (with the CEL rendered from them) and ``valueRefs``. Each function declares
the field anew (a dataclass field belongs to one class), with one description for both kinds."""

from __future__ import annotations

from typing import Any

from kinitiras_py.api.schema import prop


def match_conditions() -> Any:
    """The ``matchConditions`` field (a list of MatchCondition)."""
    return prop("Conditions that must all hold for the policy to apply (checked once its selectors match).",
                factory=list)


def rendered_match_conditions() -> Any:
    """The ``renderedMatchConditions`` field the controller writes."""
    return prop("CEL rendered from matchConditions; written by the controller, do not edit.")


def value_refs() -> Any:
    """The ``valueRefs`` field (a map of name to ResourceRefer)."""
    return prop("Values every request resolves once for the whole policy (k8s, owner or http references): "
                "params.<name> in matchConditions and rules, $.syntheticRefs.<name> in selects.",
                factory=dict)
