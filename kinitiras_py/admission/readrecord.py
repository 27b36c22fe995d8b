"""One record of what a request's mutation read beyond the request and the policy index.

The pipeline fills one :class:`ReadRecord` for each tier of override policies it applies: the
index generation that found the rules, the Namespace (when a rule may read it), each resolved
reference with its value (the rule's own and its policy's ``valueRefs``), each sidecar template
read from a ConfigMap, the lookups that failed and whether JavaScript may run (a script may read
the clock, randomness and its watch state). Everything the caches decide is derived from it:

* the key of the memory of mutations (:meth:`ReadRecord.key`, :func:`.mutationmemo.key` of its
  fields), so a remembered mutation is recalled only for equal inputs;
* whether the answer depends on the request and the index alone (:attr:`ReadRecord.alone`), which
  makes it eligible for the remembered answers (:attr:`.Mutation.stamp`);
* whether the CEL result cache may serve the tier's rules (:attr:`ReadRecord.cacheable`);
* which conversions of the variables for CEL are kept across the rules of the request
  (:attr:`ReadRecord.conversions`, the engine's part of the record: a
  :class:`~..engine.evaluation.conversionrecord.ConversionRecord`). The engine notes there what
  each conversion projected (a program's reads and where the projection depends on each variable)
  and what each rule changed (the patch log's paths), and keeps a conversion across a change only
  when the record says the change cannot reach it.

CEL itself reads nothing outside its variables (no clock, no randomness: the library has no such
function), and the CEL result cache keys each result by the parts of the variables it read (the
projections the record keeps). The variables the record describes stay the same for the request;
the object is the one the rules change, and its changes are recorded.

Fail closed: an input the record cannot describe (a feature of the matched policies it does not
know, a value without exact JSON, a change of a variable other than the object or at no path) is
noted in :attr:`ReadRecord.undescribed`, and the request is then neither remembered nor answered
from memory, its rules get no cached CEL result and no conversion is kept across a change (one
noted while the rules run stops the keeping from then on, and the mutation is not remembered).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kinitiras_py.admission import mutationmemo
from kinitiras_py.base.ids import PolicyId, RuleId
from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.evaluation.conversionrecord import ConversionRecord
from kinitiras_py.engine.matching import selection
from kinitiras_py.engine.policies.compiled import OverrideMatch

KNOWN_FEATURES = (selection.CONDITIONS | selection.SIDECARS | selection.JAVASCRIPT | selection.INJECTS
                  | selection.NAMESPACE)
"""The feature bits whose inputs the record describes; any other bit turns caching off."""


@dataclass
class ReadRecord:
    """What one tier's mutation read beyond the request and the policy index (see the module)."""

    generation: int
    """The policy index's generation when it found the matched rules."""
    features: int
    """The :func:`.selection.policy_features` bits of the matched policies."""
    namespace: Obj | None = None
    """The request's Namespace as read, when a matched rule may read it (None: not read or absent)."""
    references: Mapping[RuleId, Mapping[str, JSON]] = field(default_factory=dict)
    """Each rule's resolved references (its policy's ``valueRefs`` under them), by value."""
    policy_references: Mapping[PolicyId, Mapping[str, JSON]] = field(default_factory=dict)
    """Each policy's resolved ``valueRefs``, by policy."""
    configmaps: Mapping[RuleId, Program] = field(default_factory=dict)
    """The CEL of each sidecar template read from a ConfigMap."""
    failures: Mapping[RuleId, str] = field(default_factory=dict)
    """The lookups (conditions, references, ConfigMaps) that failed: a later request may succeed."""
    javascript: bool = False
    """Whether a matched rule is a script, so one may run (it may read the clock, randomness or its
    watch state)."""
    undescribed: list[str] = field(default_factory=list)
    """Inputs the record cannot describe: caching is off for the request."""
    conversions: ConversionRecord = field(init=False, repr=False)
    """The engine's part, filled while the rules run: what each conversion kept across them
    projected and what each rule changed. It shares :attr:`undescribed` (nothing is kept across a
    change while an input is undescribed; a change it cannot describe is noted there)."""

    def __post_init__(self) -> None:
        self.conversions = ConversionRecord(self.undescribed)
        unknown = self.features & ~KNOWN_FEATURES
        if unknown:
            self.undescribed.append(f"policy features {unknown:#x}")

    @property
    def namespace_read(self) -> bool:
        """Whether the Namespace was looked up (a matched rule may read it)."""
        return bool(self.features & selection.NAMESPACE)

    @property
    def alone(self) -> bool:
        """Whether the outcome depends on nothing but the request and the policy index: nothing
        looked up, no script, nothing the record cannot describe."""
        return not (self.failures or self.references or self.policy_references or self.configmaps
                    or self.namespace_read or self.javascript or self.undescribed)

    @property
    def cacheable(self) -> bool:
        """Whether cached CEL results may serve this tier's rules: every input is described."""
        return not self.undescribed

    def key(self, fingerprint: bytes | None, matches: list[OverrideMatch]) -> mutationmemo.Key | None:
        """The key of the memory of mutations for the request with ``fingerprint`` and ``matches``
        under these reads; None when the mutation is not to be remembered (a failed lookup, a
        script, no fingerprint, an input not described)."""
        if self.undescribed:
            return None
        found = mutationmemo.key(fingerprint, self.generation, matches, self.features, self.namespace,
                                 self.references, self.failures, self.configmaps)
        if found is None and fingerprint is not None and not (self.failures or self.javascript):
            self.undescribed.append("a value without exact JSON")
        return found
