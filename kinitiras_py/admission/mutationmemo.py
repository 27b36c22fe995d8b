"""Whole mutations remembered by everything they depend on (bounded).

:mod:`..engine.evaluation.celmemo` remembers one program's result by the parts of its variables
it read; this remembers what all the rules matched for a request did together, by every input
they had: the request as the review carried it (:attr:`.Request.fingerprint`), which rules of
which policies matched (the index's generation and the policies' identities), the Namespace
when a rule may read it, the resolved references and the sidecar templates read. A Deployment's
replicas (and a Job's Pods) arrive as the same object each time, so from the second on the
answer is looked up: no rule runs again, no patch is built again. The stored CEL still decides
every answer: an entry is what those rules returned for exactly those inputs.

Not remembered: mutations with a JavaScript rule (a script's time limit makes its outcome depend
on more than its inputs), a failed lookup (the next request may find it), a mutation in which a
rule failed (even one skipped under failurePolicy Ignore: a rule stopped by its time limit may
succeed next time), and inputs without exact JSON. An entry holds the patch's JSON, not the final
object: a request recalling it carries the same object (its fingerprint says so), and the patch
replays strictly onto it (:mod:`..engine.objects.patchlog`), so the final object is that request's
own with the patch applied, copy-on-write, made only when a caller reads it (the webhook hands the
patch's JSON on as it is and never reads the object; serialising every distinct Pod's final
object for the few that recur cost more than their rules' operations). Used from the event loop only.

There is no memory of the process: each :class:`kinitiras_py.Engine` owns one and hands it to
its :class:`~.pipeline.Pipeline`. The pipeline derives an entry's key from the record of what the
mutation read (:meth:`.readrecord.ReadRecord.key`), with the object's managedFields left out
where no matched rule reads them (:mod:`.managedfields`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import orjson

from kinitiras_py.base.bounded import Cache
from kinitiras_py.base.ids import RuleId
from kinitiras_py.base.typedefs import JSON, Obj, Patch
from kinitiras_py.engine.evaluation import celvalues
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.matching import selection
from kinitiras_py.engine.objects import patchlog
from kinitiras_py.engine.policies.compiled import OverrideMatch
from kinitiras_py.engine.policies.results import Mutation

DEFAULT_BYTES: Final = 1024 * 1024
"""What `serve` keeps unless told otherwise (``--mutation-results-mib``)."""
MAX_ENTRY_BYTES: Final = 128 * 1024
"""Larger entries are not kept (a ConfigMap of megabytes would push out every Pod's)."""
_OVERHEAD: Final = 400
"""Bytes an entry costs beyond its key, object and patch (the entry, dict slot, headers)."""
Key = tuple[bytes, bytes]
"""(the matched rules and what they read beyond the request, the request's fingerprint); for the
rules a request matches, (the index's generation in decimal, the request's fingerprint)."""


class _Entry:
    """What one mutation did, kept as JSON and values nobody changes."""

    __slots__ = ("applied", "cost", "patch_json", "timed", "warnings")

    def __init__(self, mutation: Mutation, patch_json: bytes, cost: int) -> None:
        self.patch_json, self.cost = patch_json, cost
        self.applied = tuple(mutation.applied)
        self.warnings = tuple(mutation.warnings)
        self.timed = tuple(mutation.timings)


class _Selected:
    """The (policy, rule) pairs one request matched under one generation of the index."""

    __slots__ = ("cost", "matches")

    def __init__(self, matches: tuple[OverrideMatch, ...], cost: int) -> None:
        self.matches, self.cost = matches, cost


class Recalled(Mutation):
    """A remembered mutation answered again for a request carrying ``received``: its patch is
    decoded from its JSON when first read (a copy of its own), its object is ``received`` with the
    patch applied copy-on-write when first read (sharing what the patch does not change, as a
    mutation made afresh does); the patch's JSON is handed out as it is."""

    def __init__(self, entry: _Entry, seconds: float, received: Obj) -> None:  # every field of Mutation
        self._entry = entry
        self._received = received
        self._object: Obj | None = None
        self._patch: Patch | None = None
        self.applied, self.warnings = list(entry.applied), list(entry.warnings)
        self.failure, self.ignored = None, []  # a mutation in which a rule failed is not remembered
        self.stamp = None  # the pipeline says what the outcome depends on
        self.timings = dict.fromkeys(entry.timed, seconds / len(entry.timed) if entry.timed else 0.0)

    @property
    def object(self) -> Obj:
        """The final object."""
        if self._object is None:
            draft = patchlog.Draft(self._received)
            self._object = draft.apply(orjson.loads(self._entry.patch_json))
        return self._object

    @object.setter
    def object(self, value: Obj) -> None:
        self._object = value

    @property
    def patch(self) -> Patch:
        """The response patch."""
        if self._patch is None:
            self._patch = orjson.loads(self._entry.patch_json)
        return self._patch

    @patch.setter
    def patch(self, value: Patch) -> None:
        self._patch = value

    def patch_json(self) -> bytes | None:
        """The patch as JSON, None when there is none: as remembered unless it was read (and so
        perhaps changed) or replaced."""
        if self._patch is not None:
            return super().patch_json()
        return self._entry.patch_json if self._entry.patch_json != b"[]" else None


class Mutations(Cache[Key, _Entry | _Selected]):
    """A bounded map (inputs) → mutation, the least recently used entries leaving first."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        super().__init__(max_bytes, MAX_ENTRY_BYTES)

    def matches(self, generation: int, fingerprint: bytes | None, find: Callable[[], list[OverrideMatch]]
                ) -> list[OverrideMatch]:
        """What ``find`` (selection in the index of ``generation``) gives for the request with
        ``fingerprint``, remembered: it depends on nothing else (the object, the operation and
        the namespace are in the fingerprint)."""
        if fingerprint is None or not self.enabled:
            return find()
        key = (b"%d" % generation, fingerprint)
        entry = self._entries.get(key, refresh=True)
        if isinstance(entry, _Selected):
            return list(entry.matches)
        found = find()
        self._keep(key, _Selected(tuple(found), len(key[0]) + len(fingerprint) + 8 * len(found) + _OVERHEAD))
        return found

    def recall(self, key: Key, received: Obj, seconds: float = 0.0) -> Mutation | None:
        """The mutation remembered for ``key`` answered afresh for the request whose object is
        ``received`` (the one ``key``'s fingerprint describes), or None. ``seconds`` (the time the
        look-up took) is shared among the matched policies as their time, for metrics."""
        entry = self._entries.get(key, refresh=True)
        if not isinstance(entry, _Entry):
            self.misses += 1
            return None
        self.hits += 1
        return Recalled(entry, seconds, received)

    def remember(self, key: Key, mutation: Mutation) -> None:
        """Keep ``mutation`` (made for the inputs ``key``), unless a rule of it failed or it is
        too large. A failure may not depend on the inputs alone (a rule stopped by its time
        limit), and a skipped rule (failurePolicy Ignore) is one: the next request tries again."""
        if not mutation.complete or key in self._entries:
            return
        try:
            # The engine makes the patch from JSON values only (the review's, the policies' and
            # checked CEL results), so its JSON is exact.
            patch_json = orjson.dumps(mutation.patch)
        except orjson.JSONEncodeError:
            return
        cost = len(key[0]) + len(key[1]) + len(patch_json) + sum(map(len, mutation.warnings)) + _OVERHEAD
        self._keep(key, _Entry(mutation, patch_json, cost))

    def _keep(self, key: Key, entry: _Entry | _Selected) -> None:
        """Add ``entry`` unless it is too large; the least recently used leave until it fits."""
        self.keep(key, entry, entry.cost)


def key(fingerprint: bytes | None, generation: int, matches: list[OverrideMatch], features: int,
        namespace_object: Obj | None, params: Mapping[RuleId, Mapping[str, JSON]],
        errors: Mapping[RuleId, str], programs: Mapping[RuleId, Program]) -> Key | None:
    """The inputs of a mutation as a key that differs whenever they do, or None when it is not to
    be remembered (see the module's docstring). ``generation`` is the policy index's when it
    found ``matches``; the index keeps its policies alive, so within it their ids are theirs."""
    if fingerprint is None or errors or features & selection.JAVASCRIPT:
        return None
    # No null where there is nothing: exact_json reads back JSON holding a null to check it.
    # namespaceObject is None unless a rule may read it (features say which).
    inputs = [generation, features, [[id(policy), rule.index] for policy, rule in matches],
              [] if namespace_object is None else [namespace_object],
              [[str(policy), index, values] for (policy, index), values in params.items()],
              [[str(policy), index, program.source] for (policy, index), program in programs.items()]]
    head = celvalues.exact_json(inputs)
    # A pair, not one joined bytes: the fingerprint's hash is computed once per request and kept.
    return None if head is None else (head, fingerprint)

