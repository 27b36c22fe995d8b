"""What the compilers of a policy and of its rules share: the :class:`Checker` that gathers a
policy's problems and warnings, CEL compilation with the checks every user expression gets, and
the checks of references (boundary, credentials) that override and validate rules both have."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from kinitiras_py.api.refs import ResourceRefer
from kinitiras_py.base.errors import CelCompileError, PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import Obj
from kinitiras_py.engine.checking import boundary, shapes
from kinitiras_py.engine.evaluation import cel, celshapes

REF_SOURCES_WITH_PARAMS = ("k8s", "owner", "http")


class Checker:
    """Collects semantic errors and warnings for one policy.

    ``tolerant`` is set when the model already found problems: the raw dicts may then have any
    shape, so a check that trips over one gives up quietly (the model errors say what is wrong).
    ``failed`` holds the paths of those problems.
    """

    def __init__(self, ref: str, tolerant: bool, failed: frozenset[str] = frozenset()) -> None:
        self.ref = ref
        self.tolerant = tolerant
        self.failed = failed
        self.errors: list[PolicyError] = []
        self.warnings: list[str] = []
        self.name = ""
        self.namespace: str | None = None
        self.rendered_fields: list[tuple[str, str]] = []
        """Rendered CEL other than the rules' renderedCel: (JSON pointer, source)."""
        self.http_refs: list[tuple[str, Obj]] = []
        """Every ``from: http`` reference: (field path of the reference, its ``http`` block)."""
        self.kinds = shapes.Kinds(None)
        """What the policy's resource selectors can select."""
        self.params: frozenset[str] = frozenset()
        """The names of the policy's own ``valueRefs`` (every rule's ``params`` holds them)."""

    def check_cel(self, errors: list[PolicyError], program: cel.Program | None, path: str,
                  rule_params: Iterable[str]) -> None:
        """Add to ``errors``, naming ``path``, why ``program`` can never succeed given what its
        variables hold (:mod:`.celshapes`); ``rule_params`` are the names of the rule's own
        references (``params`` holds the policy's valueRefs besides)."""
        if program is None:
            return
        declared = celshapes.Shapes(shapes.REQUEST_FIELDS, self.params | frozenset(rule_params),
                                    not self.kinds.without_namespace())
        errors += [PolicyError(path, f"invalid CEL: {problem}") for problem in celshapes.problems(program, declared)]

    def model_dropped(self, path: str) -> bool:
        """Whether the model found a problem with the field at ``path`` itself, which a partial
        model then leaves absent (a problem only inside it leaves the rest of it there)."""
        return path in self.failed

    def warn(self, path: str, message: str) -> None:
        """Record a warning naming the policy and the field."""
        self.warnings.append(f"{self.ref}: {path}: {message}")

    def run(self, fn: Any, *args: Any) -> Any:
        """Call ``fn``; its PolicyError(s) are recorded and None returned."""
        try:
            return fn(*args)
        except PolicyErrors as e:
            self.errors += e.errors
        except PolicyError as e:
            self.errors.append(e)
        except (AttributeError, TypeError, KeyError, ValueError, IndexError):
            if not self.tolerant:
                raise
        return None

    def collect(self, errors: list[PolicyError], fn: Any, *args: Any) -> Any:
        """Call ``fn``; its PolicyError(s) go to ``errors`` and None is returned."""
        try:
            return fn(*args)
        except PolicyErrors as e:
            errors += e.errors
        except PolicyError as e:
            errors.append(e)
        return None


@functools.lru_cache(maxsize=4096)
def compile_cel(source: str, path: str) -> cel.Program:
    """``source`` compiled (cached); PolicyErrors naming ``path`` when it is not valid CEL."""
    try:
        return cel.compile_program(source)
    except CelCompileError as e:
        raise PolicyErrors([PolicyError(path, f"invalid CEL: {e}")]) from None


def result_type(program: cel.Program) -> str:
    """The static result type the CEL checker gives ``program`` (``BOOL``, ``LIST<DYN>``, ``DYN``)."""
    return program.result_type


def user_cel(source: str, path: str, wanted: tuple[str, ...], what: str) -> cel.Program:
    """A user's CEL compiled; refused unless its static result type is one of ``wanted`` (``what`` says why)."""
    program = compile_cel(source, path)
    found = result_type(program)
    if found.split("<", 1)[0] not in wanted:
        raise PolicyError(path, f"invalid CEL: the expression evaluates to {found}; {what}")
    return program


def check_reference(checker: Checker, ref: ResourceRefer | None, path: str) -> None:
    """A value reference's checks beyond its model: what a namespaced policy may not read
    (refused), http references noted and inline credentials warned about (check_http_ref).
    None (a reference that is not even an object, in a partial model) has none."""
    if ref is None:
        return
    checker.errors += boundary.reference_problems(checker.namespace, ref, path)
    check_http_ref(checker, ref, path)


def check_http_ref(checker: Checker, ref: ResourceRefer, path: str) -> None:
    """Note an http reference at ``path`` (the operator's egress setting judges them when the policy
    is admitted); warn about credentials written into the policy instead of a Secret."""
    http = ref.http
    if http is None:
        return
    if ref.from_ == "http" and http.raw:
        checker.http_refs.append((path, http.raw))  # judged as written (:mod:`...admission.httprefs`)
    auth = http.auth
    secrets = (("password", auth.password), ("staticToken", auth.static_token)) if auth is not None else ()
    for name, secret in secrets:
        if secret:
            checker.warn(f"{path}.http.auth.{name}",
                         f"the {name} is written inline in the policy, where anyone allowed to read "
                         "policies can see it; store it in a Secret and reference it with secretRef")
    for header in http.header:
        if str(header).lower() in ("authorization", "proxy-authorization"):
            checker.warn(f"{path}.http.header.{header}",
                         "a credential header is written inline in the policy; use auth with secretRef")
