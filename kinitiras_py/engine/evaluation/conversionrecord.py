"""What the conversions kept across one request's rules projected, and what the rules changed.

This is the engine's part of the request's read record (the admission layer's ``ReadRecord``
holds one as its ``conversions`` and shares its list of undescribed inputs with it).
:class:`.celbindings.Bindings` notes here each conversion it makes (:meth:`ConversionRecord.projected`:
a program's reads and, for each variable, where the projection depends on its value,
:data:`.celreads.Taken`) and each change a rule made that the conversions are carried across
(the variable and the patch log's paths), and keeps a conversion across a change only when this
record says the change cannot reach it (:meth:`ConversionRecord.kept`).

Fail closed: nothing is kept while the record notes an input it cannot describe (its own or the
request's), for a conversion it did not make, across a change of a variable other than the
object (rules change only that; its paths are JSON pointer tokens) or across a change that names
no path. A change it cannot describe is noted as undescribed, which turns the request's other
caches off too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from kinitiras_py.engine.evaluation import celreads

CHANGING = "object"
"""The one variable rules change, and so the one whose changes the record describes."""

K = TypeVar("K")
UNMADE: Any = object()
"""A :attr:`Projection.key` not made yet (None is a key: the result is not to be kept)."""


class Projection:
    """One conversion: a program's reads (None: all of every variable), the parts of the variables
    they read, where those depend on each variable's value, and what is made of them on first use
    (the result cache's key, the cel-expr-python activation)."""

    __slots__ = ("activation", "data", "key", "maker", "reads", "taken")

    def __init__(self, maker: object, reads: celreads.Reads | None, data: dict[str, Any],
                 taken: dict[str, celreads.Taken]) -> None:
        self.maker = maker
        """The token of the record that made it (not the record: no cycle outlives the request)."""
        self.reads = reads
        self.data = data
        self.taken = taken
        self.key: Any = UNMADE
        """The result cache's key of ``data``, once made."""
        self.activation: Any = None
        """The cel-expr-python activation holding ``data``, once made."""


class ConversionRecord:
    """The conversions of one request's variables and the changes made since (see the module)."""

    __slots__ = ("changes", "kept_count", "projections", "reached", "token", "undescribed")

    def __init__(self, undescribed: list[str] | None = None) -> None:
        """``undescribed``: the list of inputs the request's record cannot describe, shared (a
        record of its own when None)."""
        self.undescribed: list[str] = [] if undescribed is None else undescribed
        """Inputs not described: while any is, no conversion is kept across a change."""
        self.projections: list[tuple[celreads.Reads | None, dict[str, celreads.Taken]]] = []
        """What each conversion made projected, in order: the program's reads and, by variable,
        where the projection depends on the value."""
        self.changes: list[tuple[str, tuple[celreads.Path, ...]]] = []
        """Each change the conversions were carried across, in order: the variable and the paths
        (a rule's, and a rule's changes so far when a later program of the same rule runs)."""
        self.reached: list[tuple[str, ...]] = []
        """Every path of the object a rule's operations reached, in order (:meth:`reach`)."""
        self.kept_count = 0
        """How many times a conversion was kept across a change."""
        self.token = object()
        """What this record's projections carry, to tell them from others'."""

    def projected(self, reads: celreads.Reads | None, data: dict[str, Any], taken: dict[str, celreads.Taken]
                  ) -> Projection:
        """Note a conversion to ``data``, the parts ``reads`` of the variables, depending on them at
        ``taken``."""
        self.projections.append((reads, taken))
        return Projection(self.token, reads, data, taken)

    def reach(self, paths: list[tuple[str, ...]]) -> None:
        """Note that a rule's operations reached the object at ``paths``: wrote there, whether or
        not that changed it, or read there (a copy's or move's source, a test). The request's
        memory of mutations asks where the rules' operations reached."""
        self.reached += paths

    def kept(self, name: str, paths: list[tuple[str, ...]], held: Mapping[K, Projection]) -> dict[K, Projection]:
        """Note that variable ``name`` changed at ``paths``, and give those of the conversions
        ``held`` (by a key of the caller's) that hold across the change: none while an
        input is undescribed (a change of another variable than the object, or at no path, is
        noted as one); of the others, those this record made that depend on no part a path lies
        on, above or (where they depend on everything below) below."""
        self.changes.append((name, tuple(paths)))
        if name != CHANGING or not paths:
            self.undescribed.append(f"a change of {name!r} at {len(paths)} paths")
        if self.undescribed:
            return {}
        touches, token = celreads.touches, self.token
        out = {}
        for key, projection in held.items():
            if projection.maker is token:
                taken = projection.taken.get(name)
                if taken is None or not touches(taken, paths):
                    out[key] = projection
        self.kept_count += len(out)
        return out
