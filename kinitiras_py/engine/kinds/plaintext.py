"""The ``plaintext`` kind: JSON patch operations written in the policy, applied after
``javascript`` and before ``origin``; an operation with a KubeMod ``select`` or ``valueTemplate``
fans out (:mod:`.select`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kinitiras_py.api.overrides import PlaintextOverrider as PlaintextOperation
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Patch
from kinitiras_py.engine.checking import shapes
from kinitiras_py.engine.checking.checker import Checker
from kinitiras_py.engine.kinds.base import EMPTY, OverrideStep, empty
from kinitiras_py.engine.kinds.select import Selected, compile_select, selects
from kinitiras_py.engine.objects import patching


@dataclass(frozen=True, slots=True)
class PlaintextOverrider:
    """An override rule's ``plaintext``, with its fanned-out operations by index."""

    ops: Patch
    fanout: Mapping[int, Selected] = field(default_factory=empty)

    def step(self, run: OverrideStep) -> None:
        """Apply the operations in order; a fanned-out one sees the object as those before it left it."""
        if not self.fanout:
            run.apply(self.ops)
            return
        for j, op in enumerate(self.ops):
            made = self.fanout.get(j)
            if made is None:
                run.apply([op])
                continue
            run.apply(made.operations(run.inputs(), op))


def compile_override(checker: Checker, errors: list[PolicyError], written: list[PlaintextOperation], index: int,
                     path: str, refs: Iterable[str]) -> PlaintextOverrider | None:
    """The ``plaintext`` at ``path`` checked, its selects compiled; None when absent (or empty).
    The operations are applied as written (their JSON, ``value`` included)."""
    errors += _check_plaintext(written, path, checker.kinds)
    fanned: dict[int, Selected] = {}
    for j, op in enumerate(written):
        if op is not None and selects(op):
            made = compile_select(checker, errors, op, index, j, f"{path}[{j}]", refs)
            if made is not None:
                fanned[j] = made
    return PlaintextOverrider([op.raw for op in written if op is not None], fanned or EMPTY) if written else None


def _check_plaintext(ops: list[PlaintextOperation], path: str, kinds: shapes.Kinds) -> list[PolicyError]:
    errors = []
    for i, op in enumerate(ops):
        if op is None:
            errors.append(PolicyError(f"{path}[{i}]", "must be an object"))
            continue
        if op.op not in ("add", "replace", "remove"):
            errors.append(PolicyError(f"{path}[{i}].op", f"must be add, replace or remove; got {op.op!r}"))
        target = op.path
        if not isinstance(target, str) or (target and not target.startswith("/")):
            errors.append(PolicyError(f"{path}[{i}].path", f"must be a JSON pointer starting with '/'; got {target!r}"))
        # A value written as null is one (add sets the field to null): only its key says it is there.
        if op.op in ("add", "replace") and "value" not in op.raw and op.value_template is None:
            errors.append(PolicyError(f"{path}[{i}].value", f"op {op.op} needs a value (or a valueTemplate)"))
        elif isinstance(target, str) and target.startswith("/"):
            errors += _plaintext_target(op, target[1:].split("/"), f"{path}[{i}]", kinds)
    return errors


def _plaintext_target(op: PlaintextOperation, tokens: list[str], path: str, kinds: shapes.Kinds) -> list[PolicyError]:
    """Where an operation that could never apply is refused: a path deeper than objects nest, a
    value that would nest too deep there, an index beyond any list's length (a remove of it is
    only a no-op)."""
    deep = patching.too_deep(len(tokens), None)
    if deep is not None:
        return [PolicyError(f"{path}.path", deep)]
    if op.op not in ("add", "replace"):
        return []
    if deep := patching.too_deep(len(tokens), op.value):
        return [PolicyError(f"{path}.value", deep)]
    beyond = None if op.lenient else shapes.impossible_index(tokens, kinds)
    return [PolicyError(f"{path}.path", beyond)] if beyond else []
