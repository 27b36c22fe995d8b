"""The ``javascript`` field of override and validate rules: a script with js-admissions-controller's
contract (``jsa_mutate``, ``jsa_validate``) and the limits it runs under."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.schema import Check, Model, Pattern, prop

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MEMORY_MIB = 32
MAX_TIMEOUT_MS = 2000
"""Below the webhook's default 2.5 s deadline."""
MAX_MEMORY_MIB = 256
DEFAULT_STATE_KIB = 1024
MAX_STATE_KIB = 16384
"""What a script's ``state`` may hold, as JSON text; it is copied into every call that reads it."""


def _within(most: int) -> Callable[[int], str | None]:
    def problem(value: int) -> str | None:
        return None if 1 <= value <= most else f"must be from 1 to {most}; got {value}"
    return problem


@dataclass(frozen=True, kw_only=True)
class JavaScriptMarker(Model):
    """An annotation naming the rules that changed the object, as js-admissions-controller writes
    ``jsadmissions.momiji.com/mutate``: when jsa_mutate returns a Result, the annotation is set to
    the names of every rule with this annotation that returned one in this request (within one
    executionTier), joined with commas in the order they ran."""

    annotation: str = prop("The annotation key, e.g. jsadmissions.momiji.com/mutate.", required=True)
    name: Annotated[str, Pattern(r"^[^,]+$", "a name without commas")] = prop(
        "This rule's entry in the list, e.g. <namespace>.<name> of the admission it was converted from.",
        required=True)


@dataclass(frozen=True, kw_only=True)
class JavaScript(Model):
    """A script run in a sandbox (quickjs-ng: no file, network or timer access). An overrider calls
    its jsa_mutate, a validate rule its jsa_validate; parameters are bound by name (op, obj, old,
    sync, state) and the function returns {Allowed, Message, Result}. The watch hooks jsa_init,
    jsa_created, jsa_updated and jsa_deleted keep the rule's state from the objects its policy
    selects (in the policy's namespace, for a namespaced policy)."""

    source: str = prop("The script, defining jsa_mutate (overriders) or jsa_validate (validate rules).",
                       required=True)
    timeout_ms: Annotated[int, Check(_within(MAX_TIMEOUT_MS))] | None = prop(
        f"CPU time a call may take, in milliseconds (1 to {MAX_TIMEOUT_MS}); default "
        f"{DEFAULT_TIMEOUT_MS}.")
    memory_limit_mi_b: Annotated[int, Check(_within(MAX_MEMORY_MIB))] | None = prop(
        f"Memory the script may use, in MiB (1 to {MAX_MEMORY_MIB}); default {DEFAULT_MEMORY_MIB}.")
    state_limit_ki_b: Annotated[int, Check(_within(MAX_STATE_KIB))] | None = prop(
        f"Most the state may hold, in KiB of JSON (1 to {MAX_STATE_KIB}); default {DEFAULT_STATE_KIB}. A "
        "call that leaves more fails the rule until the policy changes.")
    marker: JavaScriptMarker | None = prop("Overriders only: the annotation to write when jsa_mutate returns "
                                           "a Result (js-admissions-controller's marker).")
