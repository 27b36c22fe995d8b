"""The tokens of the CUE subset: words, numbers, operators and strings with their interpolations.

A newline after a token that can end an expression counts as a comma, as in CUE. Interpolations
are handed back to the parser through a callback, so reading them nests like any expression and
is bounded by the same depth.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from kinitiras_py.engine.cue.tree import Node, Pos, Unsupported

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+) | (?P<comment>//[^\n]*) | (?P<nl>\n)
  | (?P<bottom>_\|_)
  | (?P<attr>@[A-Za-z_][A-Za-z0-9_]*\([^()\n]*\))
  | (?P<float>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>0|[1-9][0-9]*)(?![0-9A-Za-z_.])
  | (?P<ident>[#_]*[A-Za-z_$][A-Za-z0-9_$]*|_)
  | (?P<string>")
  | (?P<op>==|!=|=~|!~|<=|>=|&&|\|\||\.\.\.|[{}\[\]():,.<>+\-*/!|&=?])
""", re.VERBOSE)

MAX_DEPTH = 40
"""Deepest nesting of expressions (and of interpolations, counted the same) read: deeper is refused."""
_ENDS_EXPR = {"ident", "int", "float", "string", "bottom", ")", "]", "}", "attr"}
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "r": "\r"}
KEYWORDS = {"true": True, "false": False, "null": None}


@dataclass
class Tok:
    """One token: its kind, its text, where it starts, and a string's parts."""


    kind: str
    text: str
    pos: Pos
    parts: tuple[str | Node, ...] = ()


Interpolated = Callable[[list[Tok], int], Node]
"""Reads one interpolation's tokens at a nesting depth into an expression."""


def tokens(text: str, expr: Interpolated, line: int = 1, col: int = 1, depth: int = 0) -> list[Tok]:
    """The tokens of ``text``; each ``\\(...)`` interpolation is read by ``expr`` at ``depth + 1``."""
    out: list[Tok] = []
    i = 0
    while i < len(text):
        pos = (line, col)
        m = _TOKEN.match(text, i)
        if m is None:
            raise Unsupported(pos, f"unexpected character {text[i]!r}")
        kind = m.lastgroup or ""
        if kind == "string":
            if text.startswith('"""', i):
                raise Unsupported(pos, "multi-line strings are not supported")
            end, parts = _string(text, i + 1, pos, depth, expr)
            out.append(Tok("string", text[i:end], pos, parts))
            col += end - i
            i = end
            continue
        word = m.group()
        if kind == "nl":
            if out and (out[-1].kind in _ENDS_EXPR or out[-1].text in _ENDS_EXPR):
                out.append(Tok("op", ",", pos))
            line, col = line + 1, 1
        elif kind not in ("ws", "comment"):
            if kind == "int" and int(word) >= 2 ** 63:
                raise Unsupported(pos, f"integer {word} is beyond 64 bits")
            if kind == "float" and not math.isfinite(float(word)):
                raise Unsupported(pos, f"number {word} is beyond the range of a float")
            out.append(Tok("op" if kind == "op" else kind, word, pos))
            col += len(word)
        else:
            col += len(word)
        i = m.end()
    out.append(Tok("eof", "", (line, col)))
    return out


def _string(text: str, i: int, pos: Pos, depth: int, expr: Interpolated) -> tuple[int, tuple[str | Node, ...]]:
    """Read a double-quoted string from ``i`` (after the quote): its end and its parts."""
    parts: list[str | Node] = []
    buf = ""
    line, col = pos[0], pos[1] + 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            if buf or not parts:
                parts.append(buf)
            return i + 1, tuple(parts)
        if ch == "\n":
            break
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "(":
                depth, j = 1, i + 2
                while j < len(text) and depth and text[j] != "\n":
                    depth += {"(": 1, ")": -1}.get(text[j], 0)
                    j += 1
                if depth:
                    break
                if buf:
                    parts.append(buf)
                buf = ""
                if depth >= MAX_DEPTH // 4:
                    raise Unsupported((line, col), "interpolations nested too deeply")
                parts.append(expr(tokens(text[i + 2:j - 1], expr, line, col + 2, depth + 1), depth + 1))
                col += j - i
                i = j
                continue
            if nxt not in _ESCAPES:
                raise Unsupported((line, col), f"string escape \\{nxt} is not supported")
            buf += _ESCAPES[nxt]
            i, col = i + 2, col + 2
            continue
        buf += ch
        i, col = i + 1, col + 1
    raise Unsupported(pos, "unterminated string")
