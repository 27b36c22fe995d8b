"""The memory of mutations keyed without the object's managedFields, where no matched rule reads them.

The API server writes ``metadata.managedFields`` with per-second timestamps, so the same Pod sent
again a second later arrives with other bytes, and :mod:`.mutationmemo`'s key (the request's
fingerprint: the object as received) would miss. When nothing the matched rules do can depend on
those fields, the mutation they make is the same, and the key may leave them out
(:func:`key`): the object's JSON without that member, and the member's length (so the object's
size, which a cost bound may check, is the same too).

Nothing can depend on them when every matched rule consists of CEL programs only (a rendered
template, ``cue``, ``cel``; no plaintext, origin, sidecar, inject or script, no last-applied
annotation) whose reads (:func:`.celreads.reaches`) and measured lengths
(:attr:`.cost.Estimate.paths`) stay off the field, and when the rules write nowhere on the way to
it, at it or below it, nor copy, move or test there (:func:`reached`, checked after they ran: a
mutation whose operations did is not remembered under such a key). Fail closed: a program whose
reads are unknown reads everything; a field that cannot be cut out of the object's JSON once and
exactly keeps the usual key.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from kinitiras_py.base import identity
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.evaluation import celreads, costmodel
from kinitiras_py.engine.evaluation.cel import Program
from kinitiras_py.engine.kinds.cel import CelOverrider
from kinitiras_py.engine.kinds.cue import CueOverrider
from kinitiras_py.engine.kinds.template import TemplateOverrider
from kinitiras_py.engine.policies.compiled import CompiledOverrideRule, OverrideMatch

FIELD = ("metadata", "managedFields")
"""Where the API server keeps them, in the object."""
_PROGRAMS = (TemplateOverrider, CueOverrider, CelOverrider)
_MEMBER = b'"managedFields":'


def key(fingerprint: bytes | None, obj: Obj, matches: Iterable[OverrideMatch]) -> bytes | None:
    """The request's fingerprint with the object's managedFields left out, or None where that
    key may not be used: no fingerprint, no such field, a matched rule that may read it, or a
    field that does not appear exactly once in the object's JSON."""
    if fingerprint is None:
        return None
    meta = obj.get("metadata")
    if type(meta) is not dict or "managedFields" not in meta:
        return None
    if not all(unread(rule) for _, rule in matches):
        return None
    try:
        member = _MEMBER + orjson.dumps(meta["managedFields"])
    except orjson.JSONEncodeError:
        return None
    # The fingerprint: the request's fields, the object's JSON, the old object's, apart by NULs.
    start = fingerprint.find(b"\0") + 1
    stop = fingerprint.find(b"\0", start)
    if start == 0 or stop < 0:
        return None
    at = fingerprint.find(member, start, stop)
    if at < 0 or fingerprint.find(member, at + 1, stop) >= 0:  # found once: the metadata's own
        return None
    end = at + len(member)
    # The member and a comma beside it: what the object without the member writes.
    if fingerprint[end] == 44:  # ","
        end += 1
    elif fingerprint[at - 1] == 44:
        at -= 1
    # A fourth part, its length: never equal to a fingerprint of three.
    return b"".join((fingerprint[:at], fingerprint[end:], b"\0%d" % len(member)))


def unread(rule: CompiledOverrideRule) -> bool:
    """Whether nothing ``rule`` does before it writes can depend on the object's managedFields."""
    if rule.last_applied or not rule.overriders:
        return False
    return all(isinstance(part, _PROGRAMS) and _blind(part.program) for part in rule.overriders)


@identity.by_identity(4096)  # programs are compiled once per text and kept (cel.compile_program)
def _blind(program: Program) -> bool:
    """Whether ``program`` neither reads the field nor measures a length it changes."""
    if celreads.reaches(program.reads, "object", FIELD):
        return False
    for path in program.bound.paths or ():
        if path[0] == costmodel.EVERYWHERE:
            return False
        if path[0] == "object" and all(segment in (costmodel.ANY, wanted)
                                       for segment, wanted in zip(path[1:], FIELD, strict=False)):
            return False
    return True


def reached(paths: Iterable[tuple[str, ...]]) -> bool:
    """Whether any of ``paths`` (JSON pointer tokens: where the rules' operations wrote or read)
    lies on the way to the field, at it or below it."""
    return any(path[:len(FIELD)] == FIELD[:len(path)] for path in paths)
