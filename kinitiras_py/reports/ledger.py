"""The latest results of every object, background scan and admission merged: what its reports say.

Each object (by uid; by reference while it has none, as on CREATE) keeps its results by rule:

* a scan (:meth:`Ledger.publish`) replaces every result of the object: a rule the scan no longer
  reports has stopped matching it. One exception: a rule the scan reports as ``skip`` (it reads
  request data, which a scan has not) keeps what admission found, which is newer knowledge;
* admission (:meth:`Ledger.admit`) replaces the results of the rules it evaluated, and no others;
* a deleted object (:meth:`Ledger.forget_resource`) or policy (:meth:`Ledger.forget_policy`)
  loses its results everywhere.

Every change returns the keys whose reports must be written again.

A record keeps its results as tuples of strings, numbers and flags (:data:`Entry`), which the
garbage collector stops tracking, not as result objects: at 10,000 Pods and 50 policies the ledger
holds a million results, and as objects their three million parts made each full collection
walk them for over a second, with admission waiting. A scan's results share one time per object,
so equal results of many objects (a rule passing on every Pod) are one tuple, kept once
(:data:`INTERNED`). They become :class:`Stamped` results when read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.base.pacing import Slicer
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports.build import Stamped

Key = tuple[str, ResourceRef | None]
"""An object: ``(uid, None)``, or ``("", reference)`` while its uid is not known."""
RuleKey = tuple[str, str | None, str, str, int]
"""A rule: its policy's kind, namespace and name, the rule's type and index."""
Entry = tuple[str, str | None, str, str, int, str, str, bool, bool, bool, bool, bool]
"""A result: the :data:`RuleKey`, then the result, message and the five flags."""
Found = tuple[Entry, float]
"""A result and when it was found (Unix seconds)."""
INTERNED = 65_536
"""Distinct results the ledger shares between objects, at most (later ones are kept per object)."""


def key_of(resource: ResourceRef, uid: str) -> Key:
    """The ledger key of an object."""
    return (uid, None) if uid else ("", resource)


def _entry(result: RuleResult) -> Entry:
    policy = result.policy
    return (policy.kind, policy.namespace, policy.name, result.type, result.rule, result.result, result.message,
            result.patched, result.denied, result.warned, result.audited, result.skipped)


def _rule(entry: Entry) -> RuleKey:
    return entry[:5]


def _result(entry: Entry) -> str:
    return entry[5]


def _stamped(found: Found) -> Stamped:
    (kind, namespace, name, type_, rule, result, message, patched, denied, warned, audited, skipped), when = found
    return Stamped(RuleResult(PolicyId(kind, namespace, name), rule, type_, result, message, patched, denied,
                              warned, audited, skipped), when)


@dataclass
class Record:
    """One object's results: where it is, and its results by rule and by origin."""

    resource: ResourceRef
    uid: str
    scanned: tuple[Entry, ...] = ()
    scanned_at: float = 0.0
    """When the scan found :attr:`scanned`."""
    admitted: dict[RuleKey, Found] = field(default_factory=dict)

    def results(self) -> list[Stamped]:
        """What its reports say: scan results, admission's where it is newer or the scan skipped."""
        merged = {_rule(entry): (entry, self.scanned_at) for entry in self.scanned}
        for rule, found in self.admitted.items():
            scanned = merged.get(rule)
            if scanned is None or _result(scanned[0]) == "skip" or scanned[1] < found[1]:
                merged[rule] = found
        return [_stamped(found) for found in merged.values()]


class Ledger:
    """The records of every object with results."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._records: dict[Key, Record] = {}
        self._entries: dict[Entry, Entry] = {}

    def _interned(self, entry: Entry) -> Entry:
        shared = self._entries.get(entry)
        if shared is not None:
            return shared
        if len(self._entries) < INTERNED:
            self._entries[entry] = entry
        return entry

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._records))

    def get(self, key: Key) -> Record | None:
        """The record of ``key``, if it has results."""
        return self._records.get(key)

    def _record(self, resource: ResourceRef, uid: str) -> Record:
        key = key_of(resource, uid)
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = Record(resource, uid)
        return record

    def _drop_empty(self, key: Key) -> None:
        record = self._records.get(key)
        if record is not None and not record.scanned and not record.admitted:
            del self._records[key]

    def publish(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> list[Key]:
        """A scan's results for the object replace its earlier ones (none: its reports go away)."""
        key = key_of(resource, uid)
        if not results:
            return [key] if self._records.pop(key, None) is not None else []
        now = self._clock()
        record = self._record(resource, uid)
        record.resource = resource
        record.scanned, record.scanned_at = tuple(self._interned(_entry(one)) for one in results), now
        skipped = {_rule(entry) for entry in record.scanned if _result(entry) == "skip"}
        record.admitted = {rule: found for rule, found in record.admitted.items() if rule in skipped}
        return [key]

    def admit(self, resource: ResourceRef, uid: str, results: Sequence[RuleResult]) -> list[Key]:
        """Admission's results for the rules it evaluated replace those rules' earlier ones."""
        if not results:
            return []
        now = self._clock()
        record = self._record(resource, uid)
        record.resource = resource
        for one in results:
            entry = self._interned(_entry(one))
            record.admitted[_rule(entry)] = (entry, now)
        return [key_of(resource, uid)]

    def resolve(self, key: Key, uid: str) -> Key:
        """The record kept under a reference (no uid yet) moves to the object's uid."""
        record = self._records.pop(key, None)
        new = (uid, None)
        if record is None:
            return new
        known = self._records.get(new)
        if known is None:
            record.uid = uid
            self._records[new] = record
        else:
            for rule, found in record.admitted.items():
                if rule not in known.admitted or known.admitted[rule][1] < found[1]:
                    known.admitted[rule] = found
        return new

    def forget_resource(self, resource: ResourceRef, uid: str) -> list[Key]:
        """The object was deleted: its results go."""
        keys = [key for key in {key_of(resource, uid), key_of(resource, "")} if self._records.pop(key, None)]
        return keys

    async def forget_policy(self, policy: PolicyId) -> list[Key]:
        """The policy was deleted: its results go from every object.

        In time slices (:class:`~kinitiras_py.base.pacing.Slicer`): at 10,000 objects the walk
        would hold the event loop, and admission, for tens of milliseconds. Between slices the
        records may change; each is read when its turn comes."""
        changed, which, slicer = [], (policy.kind, policy.namespace, policy.name), Slicer()
        for key in list(self._records):
            record = self._records.get(key)
            if record is None:  # forgotten meanwhile
                continue
            before = len(record.scanned) + len(record.admitted)
            record.scanned = tuple(entry for entry in record.scanned if entry[:3] != which)
            record.admitted = {rule: found for rule, found in record.admitted.items() if rule[:3] != which}
            if len(record.scanned) + len(record.admitted) != before:
                changed.append(key)
                self._drop_empty(key)
            await slicer.turn()
        return changed

    def drop(self, key: Key) -> None:
        """Forget ``key`` without telling anyone (an object that never came to exist)."""
        self._records.pop(key, None)
