"""The layering of kinitiras_py, checked by import-linter (contracts in pyproject.toml).

* import-linter runs here as in ``make lint``, so pytest fails on a broken contract too;
* each contract is shown to catch a deliberate violation, on a copy of the package;
* the layers name every top-level package and module (and the contract is ``exhaustive``);
* there is no import circle, between modules or between packages, counting function-level and
  ``TYPE_CHECKING`` imports (hack/import-cycles.py, and import-linter's ``acyclic`` contract).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kinitiras_py"
CONFIG = ROOT / "pyproject.toml"


def _cycles_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "hack" / "import-cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


CYCLES = _cycles_script()


def _lint_imports(workdir: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the package found first on ``workdir``'s path, with the contracts of CONFIG."""
    script = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", script, "--no-cache", "--no-logo", str(CONFIG)],
                          cwd=workdir, env={"PYTHONPATH": str(workdir), "PATH": "/usr/bin:/bin",
                                            "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=120, check=False)


def _contracts() -> dict[str, dict[str, object]]:
    contracts = tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"]
    return {c["id"]: c for c in contracts}


def test_the_package_keeps_every_contract() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in done.stdout, done.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pristine copy of the package, outside the repository."""
    root = tmp_path_factory.mktemp("layering")
    shutil.copytree(PACKAGE, root / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.mark.parametrize(("module", "text", "broken"), [
    ("engine/rules_probe.py", "from kinitiras_py.webhook import app\n",
     "The engine knows no transport and no cluster"),
    ("engine/rules_probe.py", "def f() -> None:\n    import aiohttp.web\n",
     "The engine knows no transport and no cluster"),
    ("certs/probe.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kinitiras_py.webhook import app\n",
     "certs and webhook are independent"),
    ("webhook/probe.py", "from kinitiras_py.certs import tls\n", "certs and webhook are independent"),
    ("base/probe.py", "from kinitiras_py.api import models\n", "Layers"),
    ("admission/probe.py", "from kinitiras_py.cluster import client\n", "Layers"),  # independent siblings
    ("surprise/__init__.py", "", "Layers"),  # a new top-level package with no place in the layers
    ("engine/objects/probe.py", "from kinitiras_py.engine.evaluation import cel\n", "The engine's rooms"),
    ("engine/surprise/__init__.py", "", "The engine's rooms"),  # a new room with no place in the order
    ("engine/objects/probe.py", "def f() -> None:\n    from kinitiras_py.engine.running import overriding\n",
     "No import circles"),  # running imports objects
    ("engine/evaluation/probe.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kinitiras_py.engine.policies import compiled\n",
     "No import circles"),  # policies import evaluation
])
def test_a_deliberate_violation_is_caught(copy: Path, tmp_path: Path, module: str, text: str, broken: str) -> None:
    work = tmp_path / "work"
    shutil.copytree(copy, work)
    (work / PACKAGE.name / module).parent.mkdir(exist_ok=True)
    (work / PACKAGE.name / module).write_text(textwrap.dedent(text))
    done = _lint_imports(work)
    assert done.returncode == 1, done.stdout + done.stderr
    assert any(line.startswith(broken) and line.rstrip().endswith("BROKEN")
               for line in done.stdout.splitlines()), done.stdout


def _top_level() -> set[str]:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def test_the_layers_name_every_top_level_package() -> None:
    layers = _contracts()["layers"]
    named = [name.strip() for layer in layers["layers"] for name in str(layer).replace(":", "|").split("|")]
    assert layers["exhaustive"] is True
    assert sorted(named) == sorted(_top_level())
    assert {"engine", "webhook", "cli", "base"} <= set(named)  # the listing saw the package


def test_there_is_no_import_circle() -> None:
    assert [(c.level, c.members) for c in CYCLES.circles(PACKAGE)] == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fakepkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for directory in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (directory / "__init__.py").touch()
    return root


def test_the_cycle_script_sees_every_kind_of_import(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "cluster/a.py": "from fakepkg.certs import b\n",
        "certs/b.py": "def f():\n    from fakepkg.cluster import a\n",
        "dev/c.py": "from fakepkg.dev import d\n",
        "dev/d.py": "from . import c\n",
        "dev/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fakepkg.dev import f\n",
        "dev/f.py": "import fakepkg.dev.e\n",
    })
    every = [(c.level, c.members) for c in CYCLES.circles(root)]
    assert every == [
        ("module", ["fakepkg.certs.b", "fakepkg.cluster.a"]),
        ("module", ["fakepkg.dev.c", "fakepkg.dev.d"]),
        ("module", ["fakepkg.dev.e", "fakepkg.dev.f"]),
        ("package", ["fakepkg.certs", "fakepkg.cluster"]),
    ]
    assert [(c.level, c.members) for c in CYCLES.circles(root, ("import-time",))] == [
        ("module", ["fakepkg.dev.c", "fakepkg.dev.d"])]
    kinds = {(i.source, i.kind) for c in CYCLES.circles(root) for i in c.imports}
    assert {("fakepkg.certs.b", "function"), ("fakepkg.dev.e", "TYPE_CHECKING")} <= kinds
