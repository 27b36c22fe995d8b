"""Every exception kinitiras-py raises, in one tree.

::

    KinitirasError
    ├── PolicyError          a policy itself is malformed (field path + reason); refused at admission
    ├── RuleDenied           a rule decided to deny the object (a sidecar check, jsa_mutate's Allowed: false)
    ├── RuleError            a valid rule failed while evaluating one object (its RuleId)
    ├── PatchError           an RFC 6902 operation cannot be applied to a document
    ├── QuantityError        a string is not a Kubernetes quantity
    ├── CelError             a CEL program failed
    │   ├── CelCompileError  it does not compile (message carries the compiler's caret diagram)
    │   └── CelEvalError     it evaluated to an error value
    ├── ReviewError          an AdmissionReview request is malformed (the request is bad, not the object)
    └── DevError             the local control plane could not be brought up or down

Each package's own errors live beside the code that raises them, and derive from
``KinitirasError`` too (keeping a builtin base where callers catch that: ``LookupError`` for
reads refused, ``ValueError`` for untranslatable input, ``OSError`` for guarded addresses).
tests/unit/base/test_errors.py walks the package to keep it so.

"The object under review is bad" is a verdict, not an exception: see ``engine.policies.results``.
"""

from __future__ import annotations

from kinitiras_py.base.ids import RuleId


class KinitirasError(Exception):
    """Base of every error raised by kinitiras-py."""


class PolicyError(KinitirasError):
    """A policy is malformed. ``path`` is the field path, e.g. ``spec.overrideRules[1].overriders``."""

    def __init__(self, path: str, reason: str, policy: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.policy = policy
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        who = f"policy {self.policy}: " if self.policy else ""
        return f"{who}{where}{self.reason}"

    def with_policy(self, policy: str) -> PolicyError:
        """Return a copy naming ``policy`` (kind/namespace/name)."""
        return PolicyError(self.path, self.reason, policy)


class PolicyErrors(PolicyError):
    """Several problems found in one policy; ``errors`` keeps each one."""

    def __init__(self, errors: list[PolicyError], policy: str | None = None) -> None:
        self.errors = errors
        super().__init__("", "; ".join(str(e) for e in errors), policy)


class RuleDenied(KinitirasError):
    """A rule refuses the object with ``reason``: a decision, not an error, so it denies whatever the
    rule's failurePolicy."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class RuleError(KinitirasError):
    """A rule failed on one object. Names the rule (its policy and index) and the reason."""

    def __init__(self, rule: RuleId, reason: str) -> None:
        self.rule = rule
        self.reason = reason
        super().__init__(f"policy {rule.policy}, rule {rule.rule}: {reason}")


class PatchError(KinitirasError):
    """A JSON patch operation cannot be applied; ``index`` is the op's position in its patch."""

    def __init__(self, reason: str, index: int | None = None, path: str | None = None) -> None:
        self.reason = reason
        self.index = index
        self.path = path
        where = f"patch op {index} ({path!r}): " if index is not None else ""
        super().__init__(f"{where}{reason}")


class QuantityError(KinitirasError, ValueError):
    """A string is not a valid Kubernetes quantity."""


class CelError(KinitirasError):
    """A CEL program failed."""


class CelCompileError(CelError):
    """A CEL program does not compile; the message carries the compiler's diagnostic."""


class CelEvalError(CelError):
    """A CEL program evaluated to an error."""


class ReviewError(KinitirasError):
    """An AdmissionReview request is malformed."""


class DevError(KinitirasError):
    """The local control plane could not be managed; the message says why and where to look."""


class BenchError(KinitirasError, RuntimeError):
    """A benchmark could not set itself up or clean up (the API server refused or kept failing)."""
