"""Variables converted for CEL once per request, kept across the changes rules make.

Only the request path uses this (:mod:`.cel` evaluates programs against it); see
:class:`Bindings`. Which conversions a change keeps is decided by the request's record of them
(:mod:`.conversionrecord`), part of its read record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import bounds, celenv, celmemo, celreads, costmodel
from kinitiras_py.engine.evaluation.conversionrecord import UNMADE, ConversionRecord, Projection
from kinitiras_py.engine.evaluation.costmodel import Path


class Bindings:
    """Variables converted for CEL once, shared by every program evaluated against them.

    cel-expr-python converts a variable on the first evaluation that reads it (about 95 µs for
    a 9.5 KB Pod). Programs evaluated against the same bindings pay it once for each set of
    parts they read (:mod:`.celreads`), and :meth:`changed` keeps the conversions that the
    record of conversions says a change did not touch. The values must not change while the
    bindings are in use.
    """

    __slots__ = ("_activations", "_estimated", "_longest", "_record", "_sizes", "_variables")

    def __init__(self, variables: Mapping[str, JSON], measured: Mapping[str, tuple[JSON, int]] | None = None,
                 record: ConversionRecord | None = None) -> None:
        """``measured``, when given: by variable name, a value and at most how many bytes it
        serializes to; taken for the variables that are that very value. ``record``: where the
        conversions and changes are noted and reuse is decided (the request's, from its read
        record; one of these bindings' own when None)."""
        self._variables = variables
        self._record = ConversionRecord() if record is None else record
        # Keyed by id(): reads are interned (compile_program) and long tuples hash slowly.
        self._activations: dict[int, Projection] = {}
        self._sizes: dict[str, int] = {name: size for name, (value, size) in (measured or {}).items()
                                       if variables.get(name) is value}
        self._estimated: dict[str, list[tuple[str, ...]]] = {name: [] for name in self._sizes}
        """Variables whose size is an upper bound: the paths changed since (:meth:`changed`)."""
        self._longest: dict[int, tuple[tuple[Path, ...], tuple[int, str]]] = {}  # by id() of the paths

    @property
    def variables(self) -> Mapping[str, JSON]:
        """The variables as given (not converted)."""
        return self._variables

    def largest(self, names: tuple[str, ...], within: int | None = None) -> int:
        """:func:`bounds.largest` of the variables ``names``, each variable measured once; when
        that is at most ``within``, possibly an upper bound instead (see :meth:`changed`)."""
        if costmodel.EVERYWHERE in names:
            names = tuple(self._variables)
        size = 0
        for name in names:
            own = self._sizes.get(name)
            changes = self._estimated.get(name)
            if own is not None and changes is not None:
                # Serialized, the value is at most what it was when measured plus what lies at
                # the paths changed since, with their keys (parents a lenient add made included).
                own += sum(bounds.grown(self._variables[name], path) for path in changes)
                self._sizes[name], self._estimated[name] = own, []
                if own > (within or 0):
                    own = None
            if own is None:
                own = self._sizes[name] = bounds.largest(self._variables, (name,))
                self._estimated.pop(name, None)
            size = max(size, own)
        return size

    def longest(self, paths: tuple[Path, ...]) -> tuple[int, str]:
        """:func:`bounds.longest` at ``paths``, computed once for each set of paths."""
        entry = self._longest.get(id(paths))
        if entry is None or entry[0] is not paths:
            entry = self._longest[id(paths)] = (paths, bounds.longest(self._variables, paths))
        return entry[1]

    def key(self, reads: celreads.Reads | None = None) -> bytes | None:
        """The parts ``reads`` of the variables as :mod:`.celmemo` keys them (None: not kept)."""
        entry = self._entry(reads)
        if entry.key is UNMADE:
            entry.key = celmemo.key(entry.data)
        key: bytes | None = entry.key
        return key

    def activation(self, reads: celreads.Reads | None = None) -> Any:
        """The cel-expr-python activation holding the parts ``reads`` of the variables, made on
        first use: a value that cannot be converted raises then, inside the evaluation, as it
        would without bindings."""
        entry = self._entry(reads)
        if entry.activation is None:
            entry.activation = celenv.env().Activation(data=celenv.prepare(entry.data))
        return entry.activation

    def _entry(self, reads: celreads.Reads | None) -> Projection:
        """The conversion of the parts ``reads`` of the variables, noted in the record when made."""
        entry = self._activations.get(id(reads))
        if entry is None or entry.reads is not reads:
            data, taken = celenv.projected(self._variables, reads)
            entry = self._activations[id(reads)] = self._record.projected(reads, data, taken)
        return entry

    def changed(self, name: str, value: JSON, paths: list[tuple[str, ...]]) -> Bindings:
        """These bindings with the variable ``name`` now ``value``, which differs from the old
        one at most at ``paths`` (JSON pointer tokens; see :class:`.patchlog.Draft`): the
        conversions the record keeps across that change (:meth:`.ConversionRecord.kept`) are kept."""
        record = self._record
        new = Bindings({**self._variables, name: value}, record=record)
        new._sizes = dict(self._sizes)
        new._estimated = {key: list(changes) for key, changes in self._estimated.items()}
        if name in self._sizes:
            new._estimated.setdefault(name, []).extend(paths)
        new._activations = record.kept(name, paths, self._activations)
        return new
