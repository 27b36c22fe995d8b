"""The layering docs/architecture.md states, checked on the imports of kinitiras_py (read with ast).

One contract per rule:

* data flows one way, ``webhook → admission → refs/engine``: a layer never imports a layer
  above it, and the engine (pure) imports only ``api`` and ``base``, so nothing from webhook,
  cluster, runtime, cli, admission or refs;
* ``api`` imports nothing above ``base``, and ``base`` nothing else of ours;
* no import cycles between subpackages, nor between modules.

Every import counts, wherever it is written (functions, ``TYPE_CHECKING`` blocks), except that
module cycles count only imports executed at import time (a ``TYPE_CHECKING`` import or one
inside a function does not make a cycle Python has to resolve). The checks run on a synthetic
package too, so a violation is known to fail the test.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "kinitiras_py"

ALLOWED: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "api": frozenset({"base"}),
    "engine": frozenset({"api", "base"}),
}
"""Subpackages that may import only the ones listed (besides themselves)."""
FLOW = ("engine", "refs", "admission", "webhook")
"""The data flow of docs/architecture.md, bottom first: no layer imports one to its right."""


@dataclass(frozen=True)
class Import:
    """One import of a module of the package."""

    source: str
    """The importing module, e.g. ``kinitiras_py.engine.overriding``."""
    target: str
    """The imported module (for ``from a import b``: ``a.b`` when that is a module, else ``a``)."""
    line: int
    at_import_time: bool
    """False inside a function or an ``if TYPE_CHECKING:`` block."""


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, eager: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, False
                yield from _walk(stmt, False)
            for stmt in child.orelse:
                yield stmt, eager
                yield from _walk(stmt, eager)
        else:
            yield child, eager
            yield from _walk(child, eager)


def imports(root: Path) -> list[Import]:
    """Every import of a module of the package rooted at ``root`` by one of its modules."""
    package = root.name
    modules = {_module_name(root, p) for p in root.rglob("*.py")}
    found: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        source = _module_name(root, path)
        is_package = path.name == "__init__.py"
        for node, eager in _walk(ast.parse(path.read_text(), str(path)), True):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = source.split(".")[: len(source.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found.append(Import(source, target, node.lineno, eager))  # type: ignore[attr-defined]
    return found


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def contract_violations(root: Path) -> list[str]:
    """What breaks the allowed imports and the data flow, one line per import."""
    problems: list[str] = []
    for imp in imports(root):
        src, dst = _subpackage(imp.source), _subpackage(imp.target)
        if src == dst:
            continue
        where = f"{imp.source}:{imp.line} imports {imp.target}"
        if src in ALLOWED and dst not in ALLOWED[src]:
            problems.append(f"{where}: {src} may import only {sorted(ALLOWED[src]) or 'nothing of ours'}")
        if src in FLOW and dst in FLOW and FLOW.index(dst) > FLOW.index(src):
            problems.append(f"{where}: data flows {' → '.join(reversed(FLOW))}, never back")
    return problems


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one node (Tarjan, iterative)."""
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
    return found


def cycle_violations(root: Path) -> list[str]:
    """Import cycles between subpackages (any import) and between modules (import-time imports)."""
    packages: dict[str, set[str]] = {}
    modules: dict[str, set[str]] = {}
    for imp in imports(root):
        src, dst = _subpackage(imp.source), _subpackage(imp.target)
        if src and dst and src != dst:
            packages.setdefault(src, set()).add(dst)
        if imp.at_import_time and imp.source != imp.target:
            modules.setdefault(imp.source, set()).add(imp.target)
    return ([f"subpackages import each other: {' ↔ '.join(c)}" for c in _cycles(packages)]
            + [f"modules import each other: {' ↔ '.join(c)}" for c in _cycles(modules)])


def test_the_package_keeps_the_layering_contracts() -> None:
    assert contract_violations(ROOT / PACKAGE) == []


def test_the_package_has_no_import_cycles() -> None:
    assert cycle_violations(ROOT / PACKAGE) == []


def test_the_walk_sees_the_package() -> None:
    edges = {(_subpackage(i.source), _subpackage(i.target)) for i in imports(ROOT / PACKAGE)}
    # Known edges of the data flow: a walker that found nothing would pass the contracts.
    assert {("webhook", "admission"), ("admission", "engine"), ("admission", "refs"), ("engine", "api")} <= edges


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fakepkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for directory in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (directory / "__init__.py").touch()
    return root


@pytest.mark.parametrize(("source", "text", "message"), [
    ("engine/rules.py", "from fakepkg.webhook import app\n", "engine may import only ['api', 'base']"),
    ("engine/rules.py", "def f():\n    from fakepkg.cluster import client\n", "engine may import only"),
    ("engine/rules.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fakepkg.runtime import x\n",
     "engine may import only"),
    ("engine/rules.py", "from ..refs import resolver\n", "engine may import only"),
    ("api/models.py", "import fakepkg.engine.rules\n", "api may import only ['base']"),
    ("refs/resolver.py", "from fakepkg.admission import pipeline\n", "data flows webhook → admission → refs → engine"),
    ("admission/pipeline.py", "from fakepkg.webhook.codec import decode\n", "never back"),
])
def test_a_synthetic_violation_is_reported(tmp_path: Path, source: str, text: str, message: str) -> None:
    root = _package(tmp_path, {source: text, "webhook/app.py": "", "webhook/codec.py": "", "cluster/client.py": "",
                               "runtime/x.py": "", "refs/resolver.py": "", "admission/pipeline.py": "",
                               "engine/rules.py": ""} | {source: text})
    problems = contract_violations(root)
    assert any(message in problem for problem in problems), problems
    assert all(p.startswith(f"fakepkg.{source.removesuffix('.py').replace('/', '.')}:") for p in problems)


def test_synthetic_cycles_are_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "cluster/a.py": "from fakepkg.certs import b\n",
        "certs/b.py": "def f():\n    from fakepkg.cluster import a\n",
        "dev/c.py": "from fakepkg.dev import d\n",
        "dev/d.py": "import fakepkg.dev.c\n",
        "dev/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fakepkg.dev import c\n",
    })
    assert cycle_violations(root) == ["subpackages import each other: certs ↔ cluster",
                                      "modules import each other: fakepkg.dev.c ↔ fakepkg.dev.d"]
