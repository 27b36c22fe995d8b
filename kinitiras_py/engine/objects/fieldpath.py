"""Field paths: how policies name a field of an object.

Syntax (tokens are object keys, ``str``, or list indexes, ``int``)::

    spec.replicas                                  dotted keys
    spec.containers[0].image                       [n]: list index (canonical: no sign, no leading 0)
    metadata.labels['app.kubernetes.io/name']      ['...'] or ["..."]: any key; \\ escapes the next char
    /spec/containers/0/image                       JSON pointer (RFC 6901, ~1 is '/', ~0 is '~')

A bare dotted key is one or more characters other than ``.``, ``[``, ``]``, quotes, backslash
and whitespace. In pointer form every token is a string except canonical integers, which become
indexes; ``get_path`` reads an integer token of an object as its string key and a digit-string
token of a list as an index, so both spellings reach the same field.

kinitiras compatibility: a path without brackets that contains ``.annotations.`` or
``.labels.`` ends with a single key made of everything after the first such marker, so
``metadata.labels.app.kubernetes.io/name`` reads the label ``app.kubernetes.io/name``.
"""

from __future__ import annotations

import functools
import re

from kinitiras_py.base.typedefs import JSON

Token = str | int
Path = tuple[Token, ...]

_INDEX = re.compile(r"0|[1-9][0-9]*")
_BARE = re.compile(r"[^.\[\]'\"\\\s]+")
_PLAIN_KEY = re.compile(r"(?![0-9]+$)[A-Za-z0-9_-]+")
_COMPAT = re.compile(r"\.(?:annotations|labels)\.")
_COMPAT_KEYS = frozenset({"annotations", "labels"})


def _fail(path: str, reason: str) -> ValueError:
    return ValueError(f"invalid field path {path!r}: {reason}")


def _parse_pointer(path: str) -> Path:
    tokens: list[Token] = []
    for raw in path[1:].split("/"):
        if re.search(r"~(?![01])", raw):
            raise _fail(path, f"bad escape in pointer token {raw!r} (use ~0 for '~', ~1 for '/')")
        token = raw.replace("~1", "/").replace("~0", "~")
        tokens.append(int(token) if _INDEX.fullmatch(token) else token)
    return tuple(tokens)


def _parse_bracket(path: str, i: int) -> tuple[Token, int]:
    """Parse ``[n]`` or ``['key']`` starting at ``path[i] == '['``; return the token and next offset."""
    end = len(path)
    if i + 1 < end and path[i + 1] in "'\"":
        quote, j, chars = path[i + 1], i + 2, []
        while j < end and path[j] != quote:
            if path[j] == "\\":
                j += 1
                if j == end:
                    break
            chars.append(path[j])
            j += 1
        if j >= end:
            raise _fail(path, f"unterminated quote at offset {i + 1}")
        if j + 1 >= end or path[j + 1] != "]":
            raise _fail(path, f"expected ']' at offset {j + 1}")
        return "".join(chars), j + 2
    close = path.find("]", i)
    if close < 0:
        raise _fail(path, f"unclosed '[' at offset {i}")
    inner = path[i + 1 : close]
    if not _INDEX.fullmatch(inner):
        raise _fail(path, f"list index {inner!r} must be a non-negative integer without leading zeros"
                          " (quote keys: ['key'])")
    return int(inner), close + 1


def _parse_dotted(path: str, end: int) -> Path:
    """Parse ``path[:end]``; messages quote the whole path."""
    tokens: list[Token] = []
    i = 0
    after_dot = True  # a bare key may start here
    while i < end:
        if path[i] == "[":
            token, i = _parse_bracket(path, i)
            tokens.append(token)
            after_dot = False
        elif path[i] == "." and not after_dot:
            i += 1
            if i == end:
                raise _fail(path, "ends with '.'")
            after_dot = True
            if path[i] == "[":
                raise _fail(path, f"expected a key after '.' at offset {i}")
        elif after_dot:
            if path[i] == ".":
                raise _fail(path, f"empty key at offset {i}")
            match = _BARE.match(path, i)
            if match is None:
                raise _fail(path, f"unexpected {path[i]!r} at offset {i}")
            tokens.append(match.group())
            i = match.end()
            after_dot = False
        else:
            raise _fail(path, f"unexpected {path[i]!r} at offset {i}")
    return tuple(tokens)


@functools.lru_cache(maxsize=4096)
def parse_path(path: str) -> Path:
    """Parse a field path (see the module docstring) into its tokens.

    Raises ``ValueError`` saying what is wrong and where.
    """
    if not isinstance(path, str) or not path:
        raise ValueError("invalid field path: it must be a non-empty string")
    if path.startswith("/"):
        return _parse_pointer(path)
    marker = _COMPAT.search(path)
    if marker and "[" not in path and "]" not in path:
        key = path[marker.end() :]
        if not key:
            raise _fail(path, f"no key after {marker.group()!r}")
        return (*_parse_dotted(path, marker.end() - 1), key)
    return _parse_dotted(path, len(path))


def get_path(obj: JSON, tokens: Path) -> tuple[bool, JSON]:
    """Follow ``tokens`` into ``obj``; return ``(True, value)`` or ``(False, None)`` if absent."""
    node = obj
    for token in tokens:
        if isinstance(node, dict):
            key = str(token)
            if key not in node:
                return False, None
            node = node[key]
        elif isinstance(node, list):
            if isinstance(token, str):
                if not _INDEX.fullmatch(token):
                    return False, None
                token = int(token)
            if not 0 <= token < len(node):
                return False, None
            node = node[token]
        else:
            return False, None
    return True, node


def to_pointer(tokens: Path) -> str:
    """The JSON pointer for ``tokens``, e.g. ``/metadata/labels/app.kubernetes.io~1name``."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def format_path(tokens: Path) -> str:
    """The canonical text of ``tokens``: dotted where possible, ``['...']`` otherwise, ``[n]`` indexes.

    ``parse_path(format_path(t)) == t``. Keys right after a ``labels`` or ``annotations`` key
    are always bracketed, which keeps the kinitiras compatibility rule from applying.
    """
    parts: list[str] = []
    for i, token in enumerate(tokens):
        if isinstance(token, int):
            parts.append(f"[{token}]")
        elif _PLAIN_KEY.fullmatch(token) and not (i > 1 and tokens[i - 1] in _COMPAT_KEYS):
            parts.append(f".{token}" if parts else token)
        else:
            escaped = token.replace("\\", "\\\\").replace("'", "\\'")
            parts.append(f"['{escaped}']")
    return "".join(parts)
