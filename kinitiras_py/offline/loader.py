"""Read YAML/JSON documents from files or stdin, as kubectl reads them.

kubectl turns YAML into JSON (sigs.k8s.io/yaml over go-yaml v2, a YAML 1.1 reader) before anything
else sees it. This loader gives the same JSON for the same text, or refuses with the file, line
and column of the offending node (exit 2 in the CLI), never a Python object JSON cannot hold:

* scalars resolve as in YAML 1.1 (``yes``, ``off``, ``y`` are booleans, ``~`` is null), except
  timestamps, which stay strings as go-yaml v2 keeps them when decoding into JSON;
* a non-string mapping key becomes a string as sigs.k8s.io/yaml makes it: ``off:`` is ``"false"``,
  ``1:`` is ``"1"``; a null or fractional key is refused;
* ``!!set`` is a mapping to nulls (what YAML defines it as), ``!!omap`` a list of mappings;
  ``!!binary``, ``.nan``, ``.inf``, integers too large for a float and explicit tags that do not
  fit their text (``!!float x``) are refused (JSON has no such values);
* files must be UTF-8, and nesting deeper than :data:`MAX_DEPTH` is refused.

libyaml scans and parses when PyYAML has it (:data:`LOADER`; a 10 MB manifest in seconds, where
the pure-Python scanner takes most of a minute); composing, construction and resolution are this
module's own either way, so both loaders give the same values and refusals. One difference: libyaml
reads a tab where YAML allows white space (``a:<TAB>b``), as go-yaml, its port, does for kubectl;
PyYAML's own scanner refuses it.
"""

from __future__ import annotations

import io
import math
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.base.typedefs import JSON, Obj

MAX_DEPTH = 200
"""Deepest nesting accepted; Kubernetes objects stay far below it, and the engine copies objects
with a JSON library limited to 255 levels."""
MAX_NODES = 1_000_000
"""Most values a document may hold once its aliases are expanded (as JSON spells them out)."""
_UINT64_MAX = 2**64 - 1


class InputError(KinitirasError):
    """A file cannot be read or holds no usable document."""


class _Refused(KinitirasError, yaml.YAMLError):
    """A node that has no JSON equivalent; ``mark`` says where it is."""

    def __init__(self, reason: str, node: Node) -> None:
        super().__init__(reason)
        self.reason = reason
        self.mark = node.start_mark


class _Constructor(yaml.constructor.SafeConstructor):
    """SafeConstructor producing JSON values only (see the module docstring); shared by the C and
    the pure-Python loaders, so that both give the same values."""

    def construct_document(self, node: Node) -> Any:
        """Refuse a document that aliases make cyclic, deeper than the limit or huge before building it."""
        if not _plain_tree_fits(node):
            _Measure().measure(node, 1)
        try:
            return super().construct_document(node)
        except (ValueError, KeyError, TypeError, OverflowError, IndexError) as e:  # a tag that does not fit its node
            raise _Refused(f"cannot be read: {e}", node) from None

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """A node's value; an explicit tag that does not fit the text (``!!float x``) is refused."""
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError, TypeError, OverflowError, IndexError):
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise _Refused(f"{str(node.value)[:40]!r} cannot be read as {tag}", node) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping with its keys as sigs.k8s.io/yaml writes them into JSON (the last of equal
        keys wins, as there)."""
        if not isinstance(node, MappingNode):
            raise _Refused(f"{node.tag.replace('tag:yaml.org,2002:', '!!')} needs a mapping", node)
        self.flatten_mapping(node)  # merge keys (<<)
        return {_json_key(self.construct_object(key_node, deep=deep), key_node):
                self.construct_object(value_node, deep=deep) for key_node, value_node in node.value}


class _Resolver(yaml.resolver.Resolver):
    """YAML 1.1 scalar resolution as go-yaml v2 does it: no timestamps, and y/n are booleans."""


class _Composer(yaml.composer.Composer):
    """Composing in Python, one level at a time, stopping at :data:`MAX_DEPTH` before Python's
    recursion limit does (libyaml's own composer recurses in C without a limit: deep input crashes it)."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """The next node, refused when nested too deep."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", self.peek_event())  # type: ignore[attr-defined]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, _Composer, _Constructor, _Resolver):
    """The pure-Python loader: the reference, and the fallback where libyaml is missing."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)

    def scan_to_next_token(self) -> None:
        """Skip a byte order mark at the start of any line, as libyaml (and go-yaml, kubectl's
        port of it) does, counting it as a column; PyYAML's scanner skips one only at the start of
        the stream."""
        super().scan_to_next_token()
        while self.column == 0 and self.peek() == "\ufeff":
            self.forward()
            self.column += 1  # PyYAML's reader gives a mark no column; libyaml's gives it one
            super().scan_to_next_token()


LOADER: type = _Loader
try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python loader, slower but the same
    pass
else:
    class _CLoader(_Composer, CParser, _Constructor, _Resolver):
        """libyaml scanning and parsing (most of the time taken), the same composing, construction
        and resolution: the same values as :class:`_Loader`, several times faster."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _Composer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

    LOADER = _CLoader
"""The loader :func:`parse_yaml` uses."""


def _plain_tree_fits(root: Node) -> bool:
    """Whether ``root``, aliases expanded, stays within :data:`MAX_NODES` values and
    :data:`MAX_DEPTH` levels (a cycle does not). False sends the document to :class:`_Measure`,
    which says which limit it exceeds, and where.

    One pass over the nodes, without recursion or bookkeeping: the common case, several times cheaper."""
    stack: list[tuple[Node, int]] = [(root, 1)]
    size = 0
    while stack:
        node, depth = stack.pop()
        size += 1
        if depth > MAX_DEPTH or size > MAX_NODES:
            return False
        if isinstance(node, MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
    return True


class _Measure:
    """Size and height of a node tree as JSON would spell it out, aliases expanded."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[int, int]] = {}
        self.open: set[int] = set()

    def measure(self, node: Node, depth: int) -> tuple[int, int]:
        """``(nodes, levels)`` below and including ``node``, found at nesting ``depth``."""
        if id(node) in self.open:
            raise _Refused("an alias refers to a node that contains it (JSON has no cycles)", node)
        if depth > MAX_DEPTH:  # before going further down: aliases can chain deep subtrees
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels (aliases expanded)", node)
        size, height = self.known.get(id(node)) or self._children(node, depth)
        if depth + height - 1 > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels (aliases expanded)", node)
        if depth > MAX_DEPTH or size > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} values once aliases are expanded", node)
        return size, height

    def _children(self, node: Node, depth: int) -> tuple[int, int]:
        children: list[Node] = []
        if isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, SequenceNode):
            children = list(node.value)
        self.open.add(id(node))
        size, height = 1, 0
        for child in children:
            child_size, child_height = self.measure(child, depth + 1)
            size, height = size + child_size, max(height, child_height)
            if size > MAX_NODES:
                break
        self.open.discard(id(node))
        self.known[id(node)] = size, height + 1
        return size, height + 1


def _json_key(key: Any, node: Node) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    shown = repr(node.value) if isinstance(node, ScalarNode) else "a list or a mapping"
    raise _Refused(f"a mapping key must be a string, an integer or a boolean, got {shown}"
                   " (quote it to make it a string)", node)


_BOOLS = {"y": True, "yes": True, "true": True, "on": True, "n": False, "no": False, "false": False, "off": False}


def _construct_bool(loader: yaml.SafeLoader, node: Node) -> bool:
    return _BOOLS[str(loader.construct_scalar(node)).lower()]  # type: ignore[arg-type]


def _construct_int(loader: yaml.SafeLoader, node: Node) -> int | float:
    try:
        value: int = yaml.SafeLoader.construct_yaml_int(loader, node)  # type: ignore[arg-type]
        if -(2**63) <= value <= _UINT64_MAX:
            return value
        return float(value)  # go-yaml reads an integer beyond 64 bits as a float
    except (ValueError, OverflowError):
        if not re.fullmatch(r"[-+]?[0-9_]+", str(node.value)):  # an explicit !!int on other text
            raise _Refused(f"{str(node.value)[:40]!r} cannot be read as !!int", node) from None
        # beyond Python's digit limit, or a float's range
        raise _Refused(f"the integer {str(node.value)[:20]}... is too large", node) from None


def _construct_float(loader: yaml.SafeLoader, node: Node) -> float:
    value: float = yaml.SafeLoader.construct_yaml_float(loader, node)  # type: ignore[arg-type]
    if math.isnan(value) or math.isinf(value):
        raise _Refused(f"{node.value} has no JSON equivalent (NaN and infinities are not numbers in JSON)", node)
    return value


def _refuse_binary(loader: yaml.SafeLoader, node: Node) -> None:
    raise _Refused("!!binary values have no JSON equivalent; write the base64 text as a string", node)


def _construct_set(loader: yaml.SafeLoader, node: Node) -> dict[Any, None]:
    return dict.fromkeys(loader.construct_mapping(node))  # type: ignore[arg-type] # refuses non-mappings


def _construct_list(loader: yaml.SafeLoader, node: Node) -> Iterator[list[Any]]:
    yield from loader.construct_yaml_seq(node)


def _construct_timestamp(loader: yaml.SafeLoader, node: Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


_Constructor.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_Constructor.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Constructor.add_constructor("tag:yaml.org,2002:binary", _refuse_binary)
_Constructor.add_constructor("tag:yaml.org,2002:set", _construct_set)
# Ordered maps and pairs stay what they are written as: lists of one-key mappings.
_Constructor.add_constructor("tag:yaml.org,2002:omap", _construct_list)
_Constructor.add_constructor("tag:yaml.org,2002:pairs", _construct_list)
_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)
_Resolver.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# go-yaml v2 also reads y, Y, n and N as booleans.
_Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


class _Named(io.StringIO):
    """Text with a name, so that PyYAML's messages say which file."""

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name


def parse_yaml(text: str, source: str, loader: type | None = None) -> list[JSON]:
    """Every document of ``text`` as JSON values (empty documents are None); InputError naming
    ``source``, the line and the column of the first problem. ``loader`` (default :data:`LOADER`)
    is for tests comparing the C and pure-Python loaders."""
    try:
        return list(yaml.load_all(_Named(text, source), Loader=loader or LOADER))
    except _Refused as e:
        raise InputError(f"{source}:{e.mark.line + 1}:{e.mark.column + 1}: {e.reason}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{source}: not valid YAML: {e}") from None


def read_text(path: str | Path) -> str:
    """The text of a file (``-``: stdin); InputError when it is unreadable or not UTF-8."""
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start} is {data[e.start:e.start + 1]!r})") from None


def load_documents(path: str | Path) -> list[Obj]:
    """Every non-empty document in a YAML (or JSON) file; ``-`` reads stdin. Lists are flattened."""
    out: list[Obj] = []
    for doc in parse_yaml(read_text(path), str(path)):
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else None
        for item in items if isinstance(items, list) else [doc]:
            if not isinstance(item, dict):
                raise InputError(f"{path}: expected a mapping, got {_json_name(item)}")
            out.append(item)
    return out


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""The files a directory given to :func:`load_objects` contributes (as ``kubectl apply -f DIR``)."""


def load_objects(paths: Sequence[str | Path]) -> list[tuple[str, Obj]]:
    """Every object of every file, directory (its YAML and JSON files, recursively, in path order) or
    ``-`` (stdin) in ``paths``, each with where it was read: the file, and its place when the file
    holds several. InputError when a path holds no file or nothing at all is found."""
    out: list[tuple[str, Obj]] = []
    for given in paths:
        path = Path(given)
        files: list[str | Path] = [given]
        if str(given) != "-" and path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.suffix in MANIFEST_SUFFIXES and f.is_file())
            if not files:
                raise InputError(f"{given}: no {', '.join(MANIFEST_SUFFIXES)} file in this directory")
        for file in files:
            docs = load_documents(file)
            out += [(f"{file} (object {i + 1} of {len(docs)})" if len(docs) > 1 else str(file), doc)
                    for i, doc in enumerate(docs)]
    if not out:
        raise InputError(f"no object in {', '.join(map(str, paths))}")
    return out


def load_one(path: str | Path) -> Obj:
    """Exactly one document from a file."""
    docs = load_documents(path)
    if len(docs) != 1:
        raise InputError(f"{path}: expected one document, found {len(docs)}")
    return docs[0]


_NAMES = ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"), (list, "a list"))


def _json_name(value: JSON) -> str:
    return next((name for kind, name in _NAMES if isinstance(value, kind)), "null")
