"""What the conversions kept across one request's rules projected, and what the rules changed.

This is the engine's part of the request's read record (the admission layer's ``ReadRecord``
holds one as its ``conversions`` and shares its list of undescribed inputs with it).
:class:`.celbindings.Bindings` notes here each conversion it makes (:meth:`ConversionRecord.projected`:
a program's reads and, for each variable, where the projection depends on its value,
:data:`.celreads.Taken`) and each change a rule made that the conversions are carried across
(:meth:`ConversionRecord.change`: the variable and the patch log's paths), and keeps a conversion
across a change only when this record says the change cannot reach it (:meth:`ConversionRecord.keeps`).

Fail closed: nothing is kept while the record notes an input it cannot describe (its own or the
request's), for a conversion it did not make, across a change of a variable other than the
object (rules change only that; its paths are JSON pointer tokens) or across a change that names
no path. A change it cannot describe is noted as undescribed, which turns the request's other
caches off too.
"""

from __future__ import annotations

from kinitiras_py.engine.evaluation import celreads

CHANGING = "object"
"""The one variable rules change, and so the one whose changes the record describes."""


class Projection:
    """What one conversion projected: the program's reads (None: all of every variable) and,
    for each variable it holds, where the projection depends on the value."""

    __slots__ = ("reads", "taken")

    def __init__(self, reads: celreads.Reads | None, taken: dict[str, celreads.Taken]) -> None:
        self.reads = reads
        self.taken = taken


class ConversionRecord:
    """The conversions of one request's variables and the changes made since (see the module)."""

    __slots__ = ("changes", "kept", "projections", "undescribed")

    def __init__(self, undescribed: list[str] | None = None) -> None:
        """``undescribed``: the list of inputs the request's record cannot describe, shared (a
        record of its own when None)."""
        self.undescribed: list[str] = [] if undescribed is None else undescribed
        """Inputs not described: while any is, no conversion is kept across a change."""
        self.projections: dict[int, Projection] = {}
        """Every conversion made, by identity (each kept alive here, so no identity is reused)."""
        self.changes: list[tuple[str, tuple[celreads.Path, ...]]] = []
        """Each change the conversions were carried across, in order: the variable and the paths
        (a rule's, and a rule's changes so far when a later program of the same rule runs)."""
        self.kept = 0
        """How many times a conversion was kept across a change."""

    def projected(self, reads: celreads.Reads | None, taken: dict[str, celreads.Taken]) -> Projection:
        """Note a conversion of the parts ``reads`` of the variables, depending on them at ``taken``."""
        projection = Projection(reads, taken)
        self.projections[id(projection)] = projection
        return projection

    def change(self, name: str, paths: list[tuple[str, ...]]) -> bool:
        """Note that variable ``name`` changed at ``paths``; whether the record can describe the
        change (otherwise it is noted as undescribed)."""
        self.changes.append((name, tuple(paths)))
        if name != CHANGING or not paths:
            self.undescribed.append(f"a change of {name!r} at {len(paths)} paths")
            return False
        return True

    def keeps(self, projection: Projection, name: str, paths: list[tuple[str, ...]]) -> bool:
        """Whether ``projection`` holds across the change of ``name`` at ``paths`` noted last: it
        is one this record made, every input is described and no path lies on, above or (where
        it depends on everything below) below a part it depends on."""
        if self.undescribed or self.projections.get(id(projection)) is not projection:
            return False
        taken = projection.taken.get(name)
        if taken is not None and celreads.touches(taken, paths):
            return False
        self.kept += 1
        return True
