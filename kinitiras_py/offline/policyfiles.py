"""Policy files for the offline commands: YAML documents with foreign kinds converted on load."""

from __future__ import annotations

from pathlib import Path

from kinitiras_py.base.typedefs import Obj
from kinitiras_py.convert.registry import ConversionError, converted
from kinitiras_py.offline.loader import InputError, load_documents


def load_policies(path: str | Path) -> list[Obj]:
    """Every document of ``path``, foreign kinds (PodPreset, ModRule...) converted to our policies;
    InputError naming each field that has no exact equivalent."""
    try:
        return converted(load_documents(path), str(path))
    except ConversionError as e:
        raise InputError(str(e)) from None
