"""KubeMod's select dialect (its extended JSONPath) parsed into an AST.

What is accepted, as KubeMod's README documents it:

* paths from the root ``$`` (or, inside a filter, the current item ``@``): ``.name``,
  ``["key"]`` / ``['key']``, ``[n]``, ``[*]`` and ``.*``, unions ``["a", "b"]`` / ``[0, 2]``,
  recursive descent ``..name`` / ``..*`` / ``..[...]``, filters ``[? expr]`` (``[?(expr)]`` too);
* in expressions: string, number, ``true`` and ``false`` literals, ``==``, ``!=``, ``<``,
  ``<=``, ``>``, ``>=``, ``=~`` and ``!~`` (RE2, unanchored), ``&&``, ``||``, ``!``,
  parentheses, and the functions ``length``, ``isDefined``, ``isUndefined``, ``isEmpty``,
  ``isNotEmpty``.

Anything else (arithmetic, slices, ``in``, scripts) is refused with the position and what was
expected, so a rule never means something other than what its author read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kinitiras_py.base.errors import KinitirasError

MAX_LENGTH = 4096
"""Longest select accepted: a select is a short expression, and the CEL it becomes grows with it."""
MAX_DEPTH = 32
"""Deepest nesting of parentheses, filters and operators accepted."""
FUNCTIONS = ("length", "isDefined", "isUndefined", "isEmpty", "isNotEmpty")
COMPARISONS = ("==", "!=", "<=", ">=", "<", ">", "=~", "!~")


class SelectError(KinitirasError, ValueError):
    """A select that is not in the dialect; the message says where and why."""


# -- AST ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """``.name`` or ``["name"]``: one key of a map."""

    name: str


@dataclass(frozen=True)
class Index:
    """``[n]``: one item of a list, or the value of key ``"n"`` of a map (a negative ``n``: nothing)."""

    index: int


@dataclass(frozen=True)
class Wildcard:
    """``[*]`` or ``.*``: every item of a list or value of a map."""


@dataclass(frozen=True)
class Union:
    """``["a", "b"]`` or ``[0, 2]``: the keys given, those present."""

    keys: tuple[str | int, ...]


@dataclass(frozen=True)
class Filter:
    """``[? expr]``: the items (list) or values (map) for which ``expr`` holds, ``@`` being each."""

    condition: Expr


@dataclass(frozen=True)
class Descend:
    """``..``: the value itself and every value below it (then ``step`` applies)."""


Segment = Field | Index | Wildcard | Union | Filter | Descend


@dataclass(frozen=True)
class Path:
    """A path from ``$`` (the object) or ``@`` (the item a filter is looking at)."""

    root: str
    segments: tuple[Segment, ...]

    @property
    def plain(self) -> bool:
        """True when the path names at most one value (no wildcard, union, filter or ``..``)."""
        return all(isinstance(s, Field | Index) for s in self.segments)

    @property
    def fanout(self) -> int:
        """How many segments yield several values (the key parts a patch path can use)."""
        return sum(not isinstance(s, Field | Index) for s in self.segments)


@dataclass(frozen=True)
class Literal:
    """A string, number or boolean constant."""

    value: str | int | float | bool


@dataclass(frozen=True)
class Compare:
    """``left op right`` with op one of :data:`COMPARISONS`."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Logical:
    """``left && right`` or ``left || right``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    """``!operand``."""

    operand: Expr


@dataclass(frozen=True)
class Call:
    """One of :data:`FUNCTIONS` applied to its single argument."""

    name: str
    argument: Expr


Expr = Path | Literal | Compare | Logical | Not | Call


# -- tokens ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<dstring>"(?:[^"\\]|\\.)*")
  | (?P<sstring>'(?:[^'\\]|\\.)*')
  | (?P<raw>`[^`]*`)
  | (?P<op>\.\.|==|!=|<=|>=|=~|!~|&&|\|\||[$@.\[\]()*?,<>!:-])
""", re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[0-7]{3}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                   "\\": "\\", '"': '"', "'": "'", "/": "/"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _unescape(body: str, at: int) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[code]
        if code[0] in "uUx":
            value = int(code[1:], 16)
        elif len(code) == 3 and code.isdigit():
            value = int(code, 8)
        else:
            raise SelectError(f"at {at}: unknown escape \\{code} in a string")
        if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise SelectError(f"at {at}: escape \\{code} is not a character")
        return chr(value)

    return _ESCAPE.sub(one, body)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SelectError(f"at {pos}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            value = m.group()
            if kind in ("dstring", "sstring"):
                kind, value = "string", _unescape(value[1:-1], pos)
            elif kind == "raw":
                kind, value = "string", value[1:-1]
            out.append(_Token(kind, value, pos))
        pos = m.end()
    out.append(_Token("end", "", len(text)))
    return out


# -- parser ---------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.depth = 0
        self.depth_filter = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        if self.token.kind == "op" and self.token.text == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str) -> None:
        if not self.accept(text):
            self.fail(f"expected {what}")

    def fail(self, message: str) -> None:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        raise SelectError(f"at {token.at}: {message}, found {found}")

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectError(f"at {self.token.at}: nested more than {MAX_DEPTH} levels deep")

    def expression(self) -> Expr:
        self.nest()
        left = self.conjunction()
        while self.accept("||"):
            left = Logical("||", left, self.conjunction())
        self.depth -= 1
        return left

    def conjunction(self) -> Expr:
        left = self.negation()
        while self.accept("&&"):
            left = Logical("&&", left, self.negation())
        return left

    def negation(self) -> Expr:
        if self.accept("!"):
            self.nest()
            operand = self.negation()
            self.depth -= 1
            return Not(operand)
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.operand()
        token = self.token
        if token.kind == "op" and token.text in COMPARISONS:
            self.pos += 1
            right = self.operand()
            if token.text in ("=~", "!~") and not (isinstance(right, Literal) and isinstance(right.value, str)):
                raise SelectError(f"at {token.at}: the right side of {token.text} must be a string "
                                  "literal (the regular expression)")
            return Compare(token.text, left, right)
        return left

    def operand(self) -> Expr:
        token = self.token
        if token.kind == "op" and token.text == "(":
            self.pos += 1
            inner = self.expression()
            self.expect(")", "')'")
            return inner
        if token.kind == "op" and token.text in ("$", "@"):
            return self.path()
        if token.kind == "string":
            self.pos += 1
            return Literal(token.text)
        if token.kind == "number" or (token.kind == "op" and token.text == "-"):
            return Literal(self.number())
        if token.kind == "ident":
            if token.text in ("true", "false"):
                self.pos += 1
                return Literal(token.text == "true")
            if token.text in FUNCTIONS:
                self.pos += 1
                self.expect("(", f"'(' after {token.text}")
                argument = self.expression()
                self.expect(")", f"')' closing {token.text}(")
                return Call(token.text, argument)
            raise SelectError(f"at {token.at}: unknown name {token.text!r}; a path starts with $ (or @ "
                              f"in a filter), and the functions are {', '.join(FUNCTIONS)}")
        self.fail("expected a path, a literal, a function or '('")
        raise AssertionError("unreachable")

    def number(self) -> int | float:
        negative = self.accept("-")
        token = self.token
        if token.kind != "number":
            self.fail("expected a number")
        self.pos += 1
        text = ("-" if negative else "") + token.text
        if re.fullmatch(r"-?\d+", text):
            value = int(text)
            if not -(2**63) <= value < 2**63:
                raise SelectError(f"at {token.at}: {text} does not fit a 64-bit integer")
            return value
        number = float(text)
        if number in (float("inf"), float("-inf")):
            raise SelectError(f"at {token.at}: {text} is too large")
        return number

    def path(self) -> Path:
        root = self.take().text
        if root == "@" and self.depth_filter == 0:
            raise SelectError(f"at {self.tokens[self.pos - 1].at}: @ (the current item) is only "
                              "meaningful inside a filter [? ...]")
        segments: list[Segment] = []
        while True:
            if self.accept(".."):
                segments.append(Descend())
                if self.token.kind == "op" and self.token.text == "[":
                    segments.append(self.bracket())
                else:
                    segments.append(self.member("after '..'"))
            elif self.accept("."):
                segments.append(self.member("after '.'"))
            elif self.token.kind == "op" and self.token.text == "[":
                segments.append(self.bracket())
            else:
                return Path(root, tuple(segments))

    def member(self, where: str) -> Segment:
        if self.accept("*"):
            return Wildcard()
        token = self.token
        if token.kind != "ident":
            self.fail(f"expected a field name or * {where}")
        self.pos += 1
        return Field(token.text)

    def bracket(self) -> Segment:
        self.expect("[", "'['")
        if self.accept("*"):
            self.expect("]", "']' after '[*'")
            return Wildcard()
        if self.accept("?"):
            self.nest()
            self.depth_filter += 1
            condition = self.expression()
            self.depth_filter -= 1
            self.depth -= 1
            self.expect("]", "']' closing the filter")
            return Filter(condition)
        keys: list[str | int] = [self.key()]
        while self.accept(","):
            keys.append(self.key())
        if self.token.kind == "op" and self.token.text == ":":
            self.fail("slices are not supported")
        self.expect("]", "']' or ','")
        if len(keys) == 1:
            return Field(keys[0]) if isinstance(keys[0], str) else Index(keys[0])
        return Union(tuple(keys))

    def key(self) -> str | int:
        token = self.token
        if token.kind == "string":
            self.pos += 1
            return token.text
        if token.kind == "number" or (token.kind == "op" and token.text == "-"):
            value = self.number()
            if isinstance(value, float):
                raise SelectError(f"at {token.at}: an index must be a whole number")
            return value
        self.fail("expected a quoted key, an index, * or ? inside '[...]'")
        raise AssertionError("unreachable")


def parse(text: str) -> Expr:
    """Parse a select; raise :class:`SelectError` saying where and why it is not in the dialect."""
    if not isinstance(text, str):
        raise SelectError(f"a select must be a string, got {type(text).__name__}")
    if not text.strip():
        raise SelectError("a select must not be empty")
    if len(text) > MAX_LENGTH:
        raise SelectError(f"a select may be at most {MAX_LENGTH} characters long")
    parser = _Parser(text)
    expr = parser.expression()
    if parser.token.kind != "end":
        parser.fail("expected an operator or the end")
    return expr
