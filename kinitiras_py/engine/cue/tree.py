"""The syntax tree of a CUE program of the subset, and the refusal of what is outside it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kinitiras_py.base.errors import KinitirasError

Pos = tuple[int, int]


class Unsupported(KinitirasError):
    """A construct outside the subset (or a syntax error), at ``pos`` (line, column; from 1)."""

    def __init__(self, pos: Pos, what: str) -> None:
        self.pos = pos
        self.what = what
        super().__init__(f"line {pos[0]}, column {pos[1]}: {what}")


@dataclass(frozen=True)
class Node:
    """An expression; ``pos`` is where it starts."""

    pos: Pos


@dataclass(frozen=True)
class Lit(Node):
    value: object  # str, int, float, bool or None


@dataclass(frozen=True)
class Interp(Node):
    parts: tuple[str | Node, ...]


@dataclass(frozen=True)
class Top(Node):
    pass


@dataclass(frozen=True)
class Bottom(Node):
    pass


@dataclass(frozen=True)
class Ref(Node):
    name: str


@dataclass(frozen=True)
class Sel(Node):
    base: Node
    name: str


@dataclass(frozen=True)
class Index(Node):
    base: Node
    index: Node


@dataclass(frozen=True)
class Unary(Node):
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Disjunction(Node):
    options: tuple[Node, ...]
    default: int | None  # index of the `*` option


@dataclass(frozen=True)
class Field:
    pos: Pos
    label: str
    value: Node
    attrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Let:
    pos: Pos
    name: str
    value: Node


@dataclass(frozen=True)
class Clause:
    """``for key, value in source`` (key may be None) or ``if cond`` (source is the condition)."""

    pos: Pos
    kind: str
    source: Node
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class Comprehension:
    pos: Pos
    clauses: tuple[Clause, ...]
    body: Struct


@dataclass(frozen=True)
class Embed:
    pos: Pos
    value: Node


Decl = Field | Let | Comprehension | Embed


@dataclass(frozen=True)
class Struct(Node):
    decls: tuple[Decl, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ListLit(Node):
    elems: tuple[Node | Comprehension, ...]


@dataclass(frozen=True)
class File(Struct):
    """The whole program: its top-level declarations and the packages it imports."""

    imports: tuple[str, ...] = ()
