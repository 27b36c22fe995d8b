"""The CEL environment every program is compiled in, and variables as cel-expr-python takes them.

:mod:`.cel` compiles and evaluates programs here; :mod:`.celbindings` keeps a request's variables
converted with :func:`prepare` and :func:`projected`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

from kinitiras_py.base.typedefs import JSON
from kinitiras_py.engine.evaluation import bounds, celbridge, celext, celorder, celreads, celvalues

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject")
_KNOWN = frozenset(VARIABLES)

_TYPES: dict[celext.Kind, cel.Type] = {
    "dyn": cel.Type.DYN,
    "bool": cel.Type.BOOL,
    "int": cel.Type.INT,
    "double": cel.Type.DOUBLE,
    "string": cel.Type.STRING,
    "list": cel.Type.List(cel.Type.DYN),
}
_SCALARS = frozenset(("bool", "int", "double", "string"))
"""Kinds that hold no map (nothing to put in order) and no list (nothing to count)."""
# An "any" parameter becomes one overload per JSON kind. A dyn parameter would type-check but
# never match at runtime; google.protobuf.Any would match everything, optionals included, and
# cel-expr-python crashes converting an optional argument. With concrete kinds an optional
# argument is a compile error, or a "no matching overload" error when hidden behind dyn().
_ANY = (cel.Type.NULL, cel.Type.BOOL, cel.Type.INT, cel.Type.UINT, cel.Type.DOUBLE, cel.Type.STRING,
        cel.Type.BYTES, cel.Type.List(cel.Type.DYN), cel.Type.Map(cel.Type.DYN, cel.Type.DYN))


def _declaration(function: celext.Function) -> cel.FunctionDecl:
    overloads = []
    for o in function.overloads:
        scalars = all(p in _SCALARS for p in o.params)
        if scalars and o.result in _SCALARS:  # no list in, none out: only the time limit applies
            impl = celbridge.bridge(function.name, o.impl, scalars=True, before=bounds.in_time)
        else:
            impl = celbridge.bridge(function.name, bounds.bounded(function.name, o.impl), scalars=scalars)
        signatures = list(itertools.product(*(_ANY if p == "any" else (_TYPES[p],) for p in o.params)))
        for n, params in enumerate(signatures):
            overload_id = o.id if len(signatures) == 1 else f"{o.id}_{n}"
            overloads.append(cel.Overload(overload_id, _TYPES[o.result], list(params), is_member=o.member,
                                          impl=impl))
    return cel.FunctionDecl(function.name, overloads)


@functools.cache
def env() -> cel.Env:
    celbridge.probe_leaks()
    env = cel.NewEnv(
        variables={name: cel.Type.DYN for name in VARIABLES},
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath(),
                    ext_encoders.ExtEncoders(), ext_bindings.ExtBindings()],
        functions=[*(_declaration(f) for f in celext.FUNCTIONS), celorder.declaration()],
    )
    # The environment is configured lazily by the first compile; do it here so a clash in our
    # own declarations fails loudly instead of being reported as a broken policy.
    env.compile("true")
    return env


def projected(variables: Mapping[str, JSON], reads: celreads.Reads | None
               ) -> tuple[dict[str, JSON], dict[str, celreads.Taken]]:
    """:func:`celreads.project_all` of ``variables``, which must all be known."""
    if not _KNOWN.issuperset(variables):
        raise ValueError(f"unknown CEL variables {sorted(set(variables) - _KNOWN)}; expected some of {VARIABLES}")
    return celreads.project_all(variables, reads, VARIABLES)


def prepare(variables: Mapping[str, JSON]) -> dict[str, Any]:
    """``variables`` as cel-expr-python takes them; those a program does not read may be left out."""
    unknown = set(variables) - _KNOWN
    if unknown:
        raise ValueError(f"unknown CEL variables {sorted(unknown)}; expected some of {VARIABLES}")
    return {name: celvalues.to_input(name, value) for name, value in variables.items()}
