"""The ``javascript`` field of override and validate rules: a script with js-admissions-controller's
contract (``jsa_mutate``, ``jsa_validate``) and the limits it runs under."""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from kinitiras_py.api.schema import Check, Model, prop

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MEMORY_MIB = 32
MAX_TIMEOUT_MS = 2000
"""Below the webhook's default 2.5 s deadline."""
MAX_MEMORY_MIB = 256


def _within(most: int) -> Callable[[int], str | None]:
    def problem(value: int) -> str | None:
        return None if 1 <= value <= most else f"must be from 1 to {most}; got {value}"
    return problem


@dataclass(frozen=True, kw_only=True)
class JavaScript(Model):
    """A script run in a sandbox (quickjs-ng: no file, network or timer access). An overrider calls
    its jsa_mutate, a validate rule its jsa_validate; parameters are bound by name (op, obj, old,
    sync, state) and the function returns {Allowed, Message, Result}."""

    source: str = prop("The script, defining jsa_mutate (overriders) or jsa_validate (validate rules).",
                       required=True)
    timeout_ms: Annotated[int, Check(_within(MAX_TIMEOUT_MS))] | None = prop(
        f"CPU time a call may take, in milliseconds (1 to {MAX_TIMEOUT_MS}); default "
        f"{DEFAULT_TIMEOUT_MS}.")
    memory_limit_mi_b: Annotated[int, Check(_within(MAX_MEMORY_MIB))] | None = prop(
        f"Memory the script may use, in MiB (1 to {MAX_MEMORY_MIB}); default {DEFAULT_MEMORY_MIB}.")
