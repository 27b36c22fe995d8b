"""The latest results of every object, background scan and admission merged: what its reports say.

Each object (by uid; by reference while it has none, as on CREATE) keeps its results by rule:

* a scan (:meth:`Ledger.publish`) replaces every result of the object: a rule the scan no longer
  reports has stopped matching it. One exception: a rule the scan reports as ``skip`` (it reads
  request data, which a scan has not) keeps what admission found, which is newer knowledge;
* admission (:meth:`Ledger.admit`) replaces the results of the rules it evaluated, and no others;
* a deleted object (:meth:`Ledger.forget_resource`) or policy (:meth:`Ledger.forget_policy`)
  loses its results everywhere.

Every change returns the keys whose reports must be written again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kinitiras_py.admission.results import ResourceRef, RuleResult
from kinitiras_py.engine.policies.results import PolicyId
from kinitiras_py.reports.build import Stamped

Key = tuple[str, ResourceRef | None]
"""An object: ``(uid, None)``, or ``("", reference)`` while its uid is not known."""
RuleKey = tuple[PolicyId, str, int]


def key_of(resource: ResourceRef, uid: str) -> Key:
    """The ledger key of an object."""
    return (uid, None) if uid else ("", resource)


def _rule(result: RuleResult) -> RuleKey:
    return (result.policy, result.type, result.rule)


@dataclass
class Record:
    """One object's results: where it is, and its results by rule and by origin."""

    resource: ResourceRef
    uid: str
    scanned: dict[RuleKey, Stamped] = field(default_factory=dict)
    admitted: dict[RuleKey, Stamped] = field(default_factory=dict)

    def results(self) -> list[Stamped]:
        """What its reports say: scan results, admission's where it is newer or the scan skipped."""
        merged = dict(self.scanned)
        for rule, found in self.admitted.items():
            scanned = merged.get(rule)
            if scanned is None or scanned.result.result == "skip" or scanned.when < found.when:
                merged[rule] = found
        return list(merged.values())


class Ledger:
    """The records of every object with results."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._records: dict[Key, Record] = {}

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
        record.scanned = {_rule(one): Stamped(one, now) for one in results}
        skipped = {rule for rule, found in record.scanned.items() if found.result.result == "skip"}
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
            record.admitted[_rule(one)] = Stamped(one, now)
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
                if rule not in known.admitted or known.admitted[rule].when < found.when:
                    known.admitted[rule] = found
        return new

    def forget_resource(self, resource: ResourceRef, uid: str) -> list[Key]:
        """The object was deleted: its results go."""
        keys = [key for key in {key_of(resource, uid), key_of(resource, "")} if self._records.pop(key, None)]
        return keys

    def forget_policy(self, policy: PolicyId) -> list[Key]:
        """The policy was deleted: its results go from every object."""
        changed = []
        for key, record in list(self._records.items()):
            before = len(record.scanned) + len(record.admitted)
            record.scanned = {rule: found for rule, found in record.scanned.items() if rule[0] != policy}
            record.admitted = {rule: found for rule, found in record.admitted.items() if rule[0] != policy}
            if len(record.scanned) + len(record.admitted) != before:
                changed.append(key)
                self._drop_empty(key)
        return changed

    def drop(self, key: Key) -> None:
        """Forget ``key`` without telling anyone (an object that never came to exist)."""
        self._records.pop(key, None)
