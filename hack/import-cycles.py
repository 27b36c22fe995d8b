#!/usr/bin/env python3
"""Print every import circle in kinitiras_py, between modules and between (sub)packages.

Every import counts, wherever it is written: at import time, inside a function, or under
``if TYPE_CHECKING:``. Each circle is listed with the imports that close it (file:line and
kind), so the next person can see which edge to cut. import-linter checks the layers between
top-level packages (``make lint``); this script also sees circles inside one package.

    python3 hack/import-cycles.py                # every circle; exit status 0
    python3 hack/import-cycles.py --import-time  # only imports run at import time
    python3 hack/import-cycles.py --check        # exit status 1 when a circle is printed

tests/unit/test_layering.py loads this file to keep the package free of circles, of every kind.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by one of its modules."""

    source: str
    """The importing module, e.g. ``kinitiras_py.engine.running.overriding``."""
    target: str
    """The imported module (for ``from a import b``: ``a.b`` when that is a module, else ``a``)."""
    path: str
    line: int
    kind: str
    """``import-time``, ``function`` or ``TYPE_CHECKING``."""


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.AST, str]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, "function" if kind == "import-time" else kind)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, "TYPE_CHECKING"
                yield from _walk(stmt, "TYPE_CHECKING")
            for stmt in child.orelse:
                yield stmt, kind
                yield from _walk(stmt, kind)
        else:
            yield child, kind
            yield from _walk(child, kind)


def imports(root: Path) -> list[Import]:
    """Every import of a module of the package rooted at ``root`` by one of its modules."""
    package = root.name
    modules = {_module_name(root, p) for p in root.rglob("*.py")}
    found: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        source = _module_name(root, path)
        depth = len(source.split(".")) + (1 if path.name == "__init__.py" else 0)
        for node, kind in _walk(ast.parse(path.read_text(), str(path)), "import-time"):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = source.split(".")[: depth - node.level]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found.append(Import(source, target, str(path.relative_to(root.parent)), node.lineno, kind))
    return found


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one node (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _package_of(module: str, modules: set[str], root: str) -> str:
    """The package holding ``module``: a package's ``__init__`` belongs to the package itself; a
    module beside the root's ``__init__`` (``__main__``) stands for itself, as a top-level layer."""
    parent = module.rpartition(".")[0]
    return module if f"{module}.__init__" in modules or parent == root else parent


@dataclass(frozen=True)
class Circle:
    """Modules (or packages) that import each other, and the imports inside the circle."""

    level: str
    """``module`` or ``package``."""
    members: list[str]
    imports: list[Import]


def circles(root: Path, kinds: Iterable[str] = ("import-time", "function", "TYPE_CHECKING")) -> list[Circle]:
    """The import circles between modules, then between packages, counting imports of ``kinds``."""
    wanted = set(kinds)
    found = [i for i in imports(root) if i.kind in wanted and i.source != i.target]
    modules = {_module_name(root, p) + (".__init__" if p.name == "__init__.py" else "") for p in root.rglob("*.py")}
    result: list[Circle] = []
    for level, key in (("module", lambda m: m), ("package", lambda m: _package_of(m, modules, root.name))):
        edges: dict[str, set[str]] = {}
        for imp in found:
            src, dst = key(imp.source), key(imp.target)
            if src != dst:
                edges.setdefault(src, set()).add(dst)
        for members in strongly_connected(edges):
            inside = set(members)
            closing = [i for i in found if key(i.source) in inside and key(i.target) in inside
                       and key(i.source) != key(i.target)]
            result.append(Circle(level, members, closing))
    return result


def main(argv: list[str] | None = None) -> int:
    """Print the circles; with ``--check``, exit 1 when there is one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import-time", action="store_true", help="count only imports run at import time")
    parser.add_argument("--check", action="store_true", help="exit status 1 when a circle is found")
    parser.add_argument("--root", type=Path, default=ROOT / "kinitiras_py", help="the package directory")
    args = parser.parse_args(argv)
    found = circles(args.root, ("import-time",) if args.import_time else ("import-time", "function", "TYPE_CHECKING"))
    for circle in found:
        print(f"{circle.level} circle: {' ↔ '.join(circle.members)}")
        for imp in circle.imports:
            print(f"    {imp.path}:{imp.line} ({imp.kind}) {imp.source} → {imp.target}")
    print(f"{len(found)} circle(s)")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
