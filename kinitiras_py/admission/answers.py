"""Answers to whole /mutate requests remembered by the request's bytes, all but its uid (bounded).

A Deployment's replicas reach the webhook as the same AdmissionReview each time but for its uid:
the API server writes the same object, userInfo and options in the same bytes. Their answer is
the same too but for the uid, as long as it depends on nothing beyond the request and the
override policies in force (:attr:`.Mutation.stamp`: no Namespace read, no reference, no sidecar
template, no JavaScript, no failed or skipped rule). Such an answer is kept with the generation
of the policy index it was made under, and a later request whose bytes match is answered by
putting its uid into the remembered answer: it is not decoded, checked or evaluated again, the
costs it would share with every other request.

Only bodies laid out as the API server writes them are looked up: they start with
``{"kind":"AdmissionReview","apiVersion":...,"request":{"uid":"`` and a uid of the characters a
Kubernetes UID has. Anything else takes the full path. An answer is kept only when the decoded
review's uid is the one found there, so the uid's place is the request's uid and no other
member. Used from the event loop only.

There are no answers of the process: each :class:`kinitiras_py.Engine` owns its own (the
webhook's /mutate handler reads and fills its engine's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from kinitiras_py.base.bounded import Cache
from kinitiras_py.engine.policies.results import PolicyId

_START: Final = re.compile(
    rb'\{"kind":"AdmissionReview","apiVersion":"admission\.k8s\.io/v1(?:beta1)?","request":\{"uid":"'
    rb'([0-9A-Za-z][0-9A-Za-z._:-]{0,255})"')
"""The start of a review as the API server writes it, with a uid that needs no escaping in JSON."""
_OVERHEAD: Final = 300
"""Bytes an entry costs beyond its key and answer (the entry, dict slot, headers)."""
MAX_ENTRY_BYTES: Final = 128 * 1024
"""Larger entries are not kept."""


@dataclass(frozen=True)
class ReviewBody:
    """Where a body's uid is: ``key`` is the body without it."""

    key: bytes
    uid: str


@dataclass(frozen=True)
class Answer:
    """A remembered answer: ``head`` + uid + ``tail``, made under the index generation ``stamp``,
    and the policies to count in metrics each time it is given."""

    stamp: int
    head: bytes
    tail: bytes
    timed: tuple[PolicyId, ...]
    """The policies whose rules matched (their evaluation time is the look-up's, shared)."""
    patched: tuple[PolicyId, ...]
    """The policy of each rule that changed the object."""

    def to(self, uid: str) -> bytes:
        """The answer for the request with ``uid``."""
        return self.head + uid.encode() + self.tail


def request(body: bytes) -> ReviewBody | None:
    """Where ``body``'s uid is, or None when it is not laid out as the API server writes reviews."""
    found = _START.match(body)
    if found is None:
        return None
    return ReviewBody(body[:found.start(1)] + body[found.end(1):], found.group(1).decode())


class Answers(Cache[bytes, Answer]):
    """A bounded map (request bytes but the uid) → answer, the least recently used leaving first."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, MAX_ENTRY_BYTES)

    def recall(self, req: ReviewBody, stamp: int) -> Answer | None:
        """The answer remembered for ``req`` under the index generation ``stamp``, or None."""
        found = self._entries.get(req.key, refresh=True)
        if found is None or found.stamp != stamp:
            self.misses += 1
            return None
        self.hits += 1
        return found

    def remember(self, req: ReviewBody, uid: str, stamp: int, answer: bytes, timed: tuple[PolicyId, ...],
                 patched: tuple[PolicyId, ...]) -> None:
        """Keep ``answer`` (to the request ``req``, whose decoded uid is ``uid``) as made under the
        index generation ``stamp``, in place of an older one for the same bytes."""
        if uid != req.uid or not self.enabled:
            return
        marker = b'"uid":"' + uid.encode() + b'"'
        at = answer.find(marker)
        if at < 0:
            return
        cut = at + len(marker) - 1  # the uid's closing quote
        head, tail = answer[:cut - len(uid)], answer[cut:]
        cost = len(req.key) + len(head) + len(tail) + _OVERHEAD
        self.keep(req.key, Answer(stamp, head, tail, timed, patched), cost, replace=True)


DEFAULT_BYTES: Final = 512 * 1024
"""What `serve` keeps unless told otherwise (half of ``--mutation-results-mib``)."""
