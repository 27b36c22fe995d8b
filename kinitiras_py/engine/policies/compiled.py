"""Policies as the request path uses them: checked, rendered and compiled once per version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.kinds.base import EMPTY, Check, Overrider, empty
from kinitiras_py.engine.kinds.cel import CelCheck, CelOverrider
from kinitiras_py.engine.kinds.cue import CueCheck, CueOverrider
from kinitiras_py.engine.kinds.inject import InjectOverrider
from kinitiras_py.engine.kinds.javascript import JavascriptCheck, JavascriptOverrider
from kinitiras_py.engine.kinds.origin import OriginOverrider
from kinitiras_py.engine.kinds.plaintext import PlaintextOverrider
from kinitiras_py.engine.kinds.select import Selected
from kinitiras_py.engine.kinds.sidecar import SidecarOverrider
from kinitiras_py.engine.kinds.template import TemplateCheck, TemplateOverrider
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.engine.rules.jsrules import JsProgram
from kinitiras_py.engine.rules.sidecars import SidecarRule

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing's from Python 3.13; for the checker only


PartT = TypeVar("PartT")
_RENDERED: tuple[type[TemplateOverrider | SidecarOverrider | InjectOverrider], ...] = (
    TemplateOverrider, SidecarOverrider, InjectOverrider)
"""The kinds whose program is a rule's rendered template (at most one per rule)."""

CLUSTER_KINDS = frozenset({"ClusterOverridePolicy", "ClusterValidatePolicy"})
VALIDATE_KINDS = frozenset({"ClusterValidatePolicy", "ValidatePolicy"})


def _part(parts: tuple[object, ...], kind: type[PartT] | tuple[type[PartT], ...]) -> PartT | None:
    """The first of a rule's ``parts`` of ``kind`` (a rule holds at most one of each)."""
    # A loop, not next() over a generator: the request path reads these per matched rule.
    for part in parts:
        if isinstance(part, kind):
            return part
    return None


@dataclass(frozen=True, slots=True)
class CompiledOverrideRule:
    """One ``overrideRules[i]``: its overriders in application order."""

    index: int
    operations: frozenset[str] | None
    """None means every operation (empty list or ``*``)."""
    failure_policy: str
    overriders: tuple[Overrider, ...] = ()
    """Each overrider written, compiled by its kind, in the order they apply: the rendered template
    (a sidecar or inject template included), cue, cel, javascript, plaintext, origin."""
    refs: Mapping[str, Obj] = field(default_factory=empty)
    """Value references this rule needs resolved, by parameter name (``params.<name>``)."""
    last_applied: bool = False
    """Apply the operations to the last-applied-configuration annotation too (KubeMod)."""

    @property
    def rendered(self) -> Program | None:
        """The rendered template's program (a sidecar's when inline, an inject template's plan)."""
        part = _part(self.overriders, _RENDERED)
        return part.program if part is not None else None

    @property
    def cue(self) -> Program | None:
        """The ``cue`` program compiled to CEL."""
        part = _part(self.overriders, CueOverrider)
        return part.program if part is not None else None

    @property
    def cel(self) -> Program | None:
        """The ``cel`` program."""
        part = _part(self.overriders, CelOverrider)
        return part.program if part is not None else None

    @property
    def javascript(self) -> JsProgram | None:
        """The ``javascript`` (``jsa_mutate``) program."""
        part = _part(self.overriders, JavascriptOverrider)
        return part.program if part is not None else None

    @property
    def plaintext(self) -> Patch:
        """The ``plaintext`` operations as written."""
        part = _part(self.overriders, PlaintextOverrider)
        return part.ops if part is not None else []

    @property
    def fanout(self) -> Mapping[int, Selected]:
        """Plaintext operations with select or valueTemplate, by index: their program and fan-out depth."""
        part = _part(self.overriders, PlaintextOverrider)
        return part.fanout if part is not None else EMPTY

    @property
    def origin(self) -> list[Obj]:
        """The ``origin`` entries."""
        part = _part(self.overriders, OriginOverrider)
        return part.entries if part is not None else []

    @property
    def sidecar(self) -> SidecarRule | None:
        """For a ``sidecar`` template: its group and, when kept in a ConfigMap, where."""
        part = _part(self.overriders, SidecarOverrider)
        return part.rule if part is not None else None

    @property
    def inject(self) -> InjectOverrider | None:
        """For an ``inject`` template: its plan's program, onConflict and own marker
        (:mod:`..running.injection` combines it with the other inject rules')."""
        return _part(self.overriders, InjectOverrider)


@dataclass(frozen=True, slots=True)
class CompiledValidateRule:
    """One ``validateRules[i]``: rendered and custom CEL checks and what a failure does."""

    index: int
    operations: frozenset[str] | None
    failure_policy: str
    actions: frozenset[str]
    """A subset of Deny, Warn, Audit."""
    message: str = ""
    allow_mode: bool = False
    checks: tuple[Check, ...] = ()
    """Each check written, compiled by its kind, in the order they run: the rendered template (or
    ``messageTemplate``), cue, cel, javascript."""
    refs: Mapping[str, Obj] = field(default_factory=empty)

    @property
    def rendered(self) -> Program | None:
        """The rendered template's program."""
        part = _part(self.checks, TemplateCheck)
        return part.program if part is not None else None

    @property
    def cue(self) -> Program | None:
        """The ``cue`` program compiled to CEL (object, and oldObject on UPDATE only)."""
        part = _part(self.checks, CueCheck)
        return part.program if part is not None else None

    @property
    def cel(self) -> Program | None:
        """The ``cel`` program."""
        part = _part(self.checks, CelCheck)
        return part.program if part is not None else None

    @property
    def javascript(self) -> JsProgram | None:
        """The ``javascript`` (``jsa_validate``) program."""
        part = _part(self.checks, JavascriptCheck)
        return part.program if part is not None else None


CompiledRule = CompiledOverrideRule | CompiledValidateRule
"""A compiled rule of either family."""
RuleT = TypeVar("RuleT", bound=CompiledRule, covariant=True)
"""The rule family of a policy (override or validate)."""


@dataclass(frozen=True, slots=True)
class CompiledPolicy(Generic[RuleT]):
    """A policy ready for the request path, with the compiled rules of its family."""

    kind: str
    name: str
    namespace: str | None
    uid: str
    generation: int
    selectors: list[Obj]
    rules: tuple[RuleT, ...]
    """CompiledOverrideRule for override kinds, CompiledValidateRule for validate kinds."""
    rendered: dict[int, str] = field(default_factory=dict)
    """Rendered CEL source per rule index, as written back to the policy."""
    resource_version: str = ""
    """``metadata.resourceVersion`` of the version compiled (inject rules mark pods with it)."""
    warnings: tuple[str, ...] = ()
    """Problems that do not stop the policy from working (e.g. credentials written inline), each
    naming the policy and the field; the webhook returns them as admission warnings."""
    javascript_only: bool = False
    """Every rule is a ``javascript`` one and nothing else: the policy keeps js-admissions-controller's
    order (see :meth:`sort_key`)."""
    conditions: Program | None = None
    """``matchConditions`` rendered to one CEL bool; None when there are none."""
    tier: int = 0
    """``executionTier`` (override policies): lower tiers run first."""
    refs: Mapping[str, Obj] = field(default_factory=empty)
    """``valueRefs``: resolved once per request, ``params.<name>`` for conditions and every rule."""
    rendered_fields: tuple[tuple[str, str], ...] = ()
    """Other rendered CEL written back to the policy: (JSON pointer of the field, source), e.g.
    ``/spec/renderedMatchConditions`` and the ``renderedCel`` of fanned-out plaintext operations."""
    http_refs: tuple[tuple[str, Obj], ...] = ()
    """Every ``from: http`` reference written in the policy: (field path of the reference, e.g.
    ``spec.overrideRules[0].overriders.template.valueRef``, its ``http`` block)."""

    @property
    def cluster_scoped(self) -> bool:
        """True for ClusterOverridePolicy and ClusterValidatePolicy."""
        return self.kind in CLUSTER_KINDS

    @property
    def validating(self) -> bool:
        """True for the validate kinds."""
        return self.kind in VALIDATE_KINDS

    _identity: PolicyId | None = field(default=None, init=False, compare=False, repr=False)
    """:attr:`identity`, made on first use: the request path needs it per matched rule, while most
    policies of a large set are never matched (kept for all, 10,000 would hold megabytes)."""

    @property
    def ref(self) -> str:
        """How messages name this policy: ``OverridePolicy team-a/oversell``."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    @property
    def identity(self) -> PolicyId:
        """The policy's structured identity (metrics, Events, results)."""
        identity = self._identity
        if identity is None:
            identity = PolicyId(self.kind, self.namespace or None, self.name)
            object.__setattr__(self, "_identity", identity)  # frozen: set once, the same value every time
        return identity

    def rule(self, index: int) -> RuleT:
        """The rule written at ``overrideRules[index]`` or ``validateRules[index]``."""
        return next(rule for rule in self.rules if rule.index == index)

    def rendered_field_ops(self, doc: Obj) -> Patch:
        """JSON patch ops writing :attr:`rendered_fields` into the policy ``doc`` where not current."""
        return [{"op": "add", "path": pointer, "value": source} for pointer, source in self.rendered_fields
                if _at(doc, pointer) != source]

    def sort_key(self) -> tuple[int, str, str]:
        """Cluster policies first, then namespaced; by name; namespace breaks ties.

        Policies made only of ``javascript`` rules (what ``convert`` makes of js-admissions) come
        after all others in js-admissions-controller's order: namespaced ones, then cluster ones,
        so a cluster admission sees, and has the last word over, a namespaced one.
        """
        if self.javascript_only:
            return (3 if self.cluster_scoped else 2, self.name, self.namespace or "")
        return (0 if self.cluster_scoped else 1, self.name, self.namespace or "")


CompiledOverridePolicy = CompiledPolicy[CompiledOverrideRule]
"""A compiled ClusterOverridePolicy or OverridePolicy."""
CompiledValidatePolicy = CompiledPolicy[CompiledValidateRule]
"""A compiled ClusterValidatePolicy or ValidatePolicy."""
AnyPolicy = CompiledPolicy[CompiledRule]
"""A compiled policy, whatever its family (what reads only what both families have takes it)."""
EitherPolicy = CompiledOverridePolicy | CompiledValidatePolicy
"""A compiled policy of one family or the other (what compiling makes; :func:`validates` tells which)."""
Match = tuple[CompiledPolicy[RuleT], RuleT]
"""A matched (policy, rule): one of the policy's rules, which applies to the object under review."""
OverrideMatch = Match[CompiledOverrideRule]
"""A matched override rule with its policy."""
ValidateMatch = Match[CompiledValidateRule]
"""A matched validate rule with its policy."""
AnyMatch = Match[CompiledRule]
"""A matched rule of either family with its policy."""


def validates(policy: EitherPolicy) -> TypeIs[CompiledValidatePolicy]:
    """Whether ``policy`` is of a validate kind (its rules are validate rules), else an override kind."""
    return policy.kind in VALIDATE_KINDS


def _at(doc: Obj, pointer: str) -> object:
    node: object = doc
    for token in pointer.split("/")[1:]:
        if isinstance(node, dict):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def rule_applies(operations: frozenset[str] | None, operation: str) -> bool:
    """Whether a rule with ``targetOperations`` (normalised) runs for ``operation``."""
    return operations is None or operation in operations


_OPERATION_SETS: dict[frozenset[str], frozenset[str]] = {}
"""One shared set per combination of operations: thousands of rules repeat a handful."""


def normalise_operations(values: list[str] | None) -> frozenset[str] | None:
    """``targetOperations`` as a set; empty or containing ``*`` means every operation."""
    if not values or "*" in values:
        return None
    operations = frozenset(values)
    if len(_OPERATION_SETS) >= 256:  # only valid operation names are few; anything else is not kept
        return operations
    return _OPERATION_SETS.setdefault(operations, operations)
