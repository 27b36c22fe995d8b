"""kinitiras-py: a Kubernetes admission policy controller.

Policies (``policy.kcloudlabs.io/v1alpha1``) override and validate the objects entering a
cluster. The public surfaces are the ``kinitiras-py`` command line, the CRDs in ``api/``, the
models in :mod:`kinitiras_py.api.policies` and, from Python, the names in ``__all__``:
:class:`Engine` runs policies against requests (:class:`Request`, answered with a
:class:`Decision`) or single objects (answered with an :class:`ObjectResult` holding a
:class:`RuleResult` per matched rule); a refused policy raises :class:`PolicyErrors`.

They are imported when first used, so ``import kinitiras_py`` stays light (the command line
imports only what each command needs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinitiras_py.admission.engine import Engine
    from kinitiras_py.admission.pipeline import Decision, Request
    from kinitiras_py.admission.results import ObjectResult, RuleResult
    from kinitiras_py.base.errors import PolicyErrors

__version__ = "0.1.0"
__all__ = ["Decision", "Engine", "ObjectResult", "PolicyErrors", "Request", "RuleResult", "__version__"]

_HOMES = {
    "Engine": "kinitiras_py.admission.engine",
    "Decision": "kinitiras_py.admission.pipeline",
    "Request": "kinitiras_py.admission.pipeline",
    "ObjectResult": "kinitiras_py.admission.results",
    "RuleResult": "kinitiras_py.admission.results",
    "PolicyErrors": "kinitiras_py.base.errors",
}
"""Where each public name lives."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once; later reads do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
