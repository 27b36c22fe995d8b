"""Every exception class kinitiras_py defines derives from ``base.errors.KinitirasError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable
from types import ModuleType

import kinitiras_py
from kinitiras_py.base import errors


def _modules() -> list[ModuleType]:
    """Every module of the package (``__main__`` would run the command line, so not that one)."""
    names = [m.name for m in pkgutil.walk_packages(kinitiras_py.__path__, "kinitiras_py.")
             if not m.name.endswith(".__main__")]
    return [kinitiras_py, *(importlib.import_module(name) for name in names)]


def exceptions(modules: Iterable[ModuleType]) -> dict[str, type[BaseException]]:
    """The exception classes defined (not merely imported) in ``modules``, by qualified name."""
    return {f"{module.__name__}.{name}": value
            for module in modules for name, value in vars(module).items()
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__}


def outside_the_tree(found: dict[str, type[BaseException]]) -> list[str]:
    """The names of the classes in ``found`` that do not derive from KinitirasError."""
    return sorted(name for name, cls in found.items() if not issubclass(cls, errors.KinitirasError))


def test_every_exception_of_the_package_is_in_the_tree() -> None:
    found = exceptions(_modules())
    assert outside_the_tree(found) == []
    # The walk saw exceptions from well beyond base/ (a walk that found nothing would pass).
    assert {"kinitiras_py.cluster.client.ApiException", "kinitiras_py.engine.checking.boundary.Crossing",
            "kinitiras_py.refs.resolver.LookupFailure", "kinitiras_py.base.errors.PolicyError"} <= set(found)


def test_builtin_bases_stay_for_the_callers_that_catch_them() -> None:
    from kinitiras_py.convert.gotemplate import Untranslatable
    from kinitiras_py.engine.checking.boundary import Crossing
    from kinitiras_py.refs.egress import EgressRefused
    from kinitiras_py.refs.outbound import GuardedAddress

    assert issubclass(Crossing, LookupError) and issubclass(EgressRefused, LookupError)
    assert issubclass(Untranslatable, ValueError) and issubclass(GuardedAddress, OSError)


def test_a_class_outside_the_tree_is_reported() -> None:
    stray = ModuleType("kinitiras_py.stray")
    stray.Stray = type("Stray", (LookupError,), {"__module__": stray.__name__})  # type: ignore[attr-defined]
    stray.Fine = type("Fine", (errors.KinitirasError, LookupError), {"__module__": stray.__name__})  # type: ignore[attr-defined]
    stray.Borrowed = KeyError  # type: ignore[attr-defined]  # imported, not defined here
    assert outside_the_tree(exceptions([stray])) == ["kinitiras_py.stray.Stray"]

