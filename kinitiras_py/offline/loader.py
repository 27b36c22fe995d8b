"""Read YAML/JSON documents from files or stdin."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import Obj


class InputError(KinitirasError):
    """A file cannot be read or holds no usable document."""


def load_documents(path: str | Path) -> list[Obj]:
    """Every non-empty document in a YAML (or JSON) file; ``-`` reads stdin. Lists are flattened."""
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML: {e}") from None
    out: list[Obj] = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else None
        for item in items if isinstance(items, list) else [doc]:
            if not isinstance(item, dict):
                raise InputError(f"{path}: expected a mapping, got {type(item).__name__}")
            out.append(item)
    return out


def load_one(path: str | Path) -> Obj:
    """Exactly one document from a file."""
    docs = load_documents(path)
    if len(docs) != 1:
        raise InputError(f"{path}: expected one document, found {len(docs)}")
    return docs[0]
