"""The registry of converters: foreign (apiVersion group, kind) → a function giving our policies.

A converter is exact or it reports: every field it cannot carry over exactly becomes a
:class:`Problem` naming the field, and the conversion as a whole is refused (exit 2 in the CLI).
A document the source system itself ignores is left out with a note. Documents no converter
claims pass through unchanged.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import Obj

CONVERTER_MODULES: tuple[str, ...] = (
    "kinitiras_py.convert.appmesh", "kinitiras_py.convert.jsadmissions", "kinitiras_py.convert.kubemod",
    "kinitiras_py.convert.podpreset",
)
"""Modules that register converters when imported (one per source system)."""


@dataclass(frozen=True)
class Problem:
    """A field of a foreign document that has no exact equivalent."""

    source: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.field}: {self.reason}"


@dataclass
class Conversion:
    """What one converter made of one document: our documents, and what it could not carry."""

    documents: list[Obj] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    consumed: list[Obj] = field(default_factory=list)
    """Companion documents of the input now carried by ``documents`` (a Mesh's ConfigMap), or left
    out with their document: they are left out of the output instead of passing through."""
    notes: list[str] = field(default_factory=list)
    """Documents left out on purpose, and why (a Mesh the source system ignores too): for stderr."""


ConvertFn = Callable[[Obj, str, Sequence[Obj]], Conversion]
"""(document, source name for messages, every document of the same input) → Conversion.
The whole input is passed so that a converter can find companions (a Mesh's ConfigMap)."""


class ConversionError(KinitirasError):
    """One or more documents cannot be converted exactly; ``problems`` says where and why."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("cannot convert exactly:\n  " + "\n  ".join(str(p) for p in self.problems))


_CONVERTERS: dict[tuple[str, str], ConvertFn] = {}


def register(group: str, kinds: Iterable[str], fn: ConvertFn) -> None:
    """Register ``fn`` for every kind in ``kinds`` of API group ``group`` (any version)."""
    for kind in kinds:
        _CONVERTERS[(group, kind)] = fn


def _loaded() -> dict[tuple[str, str], ConvertFn]:
    for module in CONVERTER_MODULES:
        importlib.import_module(module)
    return _CONVERTERS


def _key(doc: Obj) -> tuple[str, str]:
    api_version = doc.get("apiVersion")
    group = api_version.rsplit("/", 1)[0] if isinstance(api_version, str) and "/" in api_version else ""
    return group, str(doc.get("kind", ""))


def converter_for(doc: Obj) -> ConvertFn | None:
    """The converter registered for ``doc``'s group and kind, or None when it is not foreign."""
    return _loaded().get(_key(doc))


def is_foreign(doc: Obj) -> bool:
    """Whether some converter claims ``doc``."""
    return converter_for(doc) is not None


def convert_all(docs: Sequence[Obj], source: str) -> Conversion:
    """Convert every foreign document of ``docs``; others pass through unchanged, in order, except
    the companions a converter consumed."""
    results: dict[int, Conversion] = {}
    for index, doc in enumerate(docs):
        fn = converter_for(doc)
        if fn is not None:
            results[index] = fn(doc, source, docs)
    consumed = {id(d) for result in results.values() for d in result.consumed}
    out = Conversion()
    for index, doc in enumerate(docs):
        result = results.get(index)
        if result is not None:
            out.documents.extend(result.documents)
            out.problems.extend(result.problems)
            out.notes.extend(result.notes)
        elif id(doc) not in consumed:
            out.documents.append(doc)
    return out


def note_to_stderr(note: str) -> None:
    """Print a conversion's note as the command line shows it."""
    print(f"note: {note}", file=sys.stderr)


def converted(docs: Sequence[Obj], source: str, on_note: Callable[[str], None] = note_to_stderr) -> list[Obj]:
    """:func:`convert_all`, raising ConversionError when anything could not be converted exactly;
    each note goes to ``on_note`` (stderr by default: loading a file skips nothing silently)."""
    result = convert_all(docs, source)
    if result.problems:
        raise ConversionError(result.problems)
    for note in result.notes:
        on_note(note)
    return result.documents
