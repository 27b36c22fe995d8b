"""The KubeMod ``select`` kind: a plaintext operation with ``select`` or ``valueTemplate``, which fans
out over the items its selection finds (:mod:`..kubemod.fanout`), compiled to one CEL program."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from kinitiras_py.api.overrides import PlaintextOverrider as PlaintextOperation
from kinitiras_py.base.errors import PolicyError
from kinitiras_py.base.typedefs import Obj, Patch
from kinitiras_py.engine.checking.checker import Checker, compile_cel
from kinitiras_py.engine.evaluation import cel
from kinitiras_py.engine.kubemod import fanout


class Selected(NamedTuple):
    """One fanned-out plaintext operation: its program and its fan-out depth (a pair, as readers
    of every program a rule holds take it)."""

    program: cel.Program
    depth: int

    def operations(self, inputs: Any, op: Obj) -> Patch:
        """The operations ``op`` fans out to on the object in ``inputs``."""
        return fanout.operations(self.program.evaluate(inputs), op, self.depth)


def selects(op: PlaintextOperation) -> bool:
    """Whether a plaintext operation fans out (has ``select`` or ``valueTemplate``)."""
    return op.select is not None or op.value_template is not None


def compile_select(checker: Checker, errors: list[PolicyError], op: PlaintextOperation, index: int, j: int,
                   where: str, refs: Iterable[str]) -> Selected | None:
    """The fanned-out operation ``op`` (``plaintext[j]`` of rule ``index``, at ``where``) rendered,
    compiled and checked; its CEL is written back as ``renderedCel``. None when refused."""
    made = checker.collect(errors, fanout.render, op, where)
    program = made and checker.collect(errors, compile_cel, made.source, where)
    if made is None or program is None:
        return None
    checker.check_cel(errors, program, where, refs)
    checker.rendered_fields.append(
        (f"/spec/overrideRules/{index}/overriders/plaintext/{j}/renderedCel", sys.intern(made.source)))
    return Selected(program, made.depth)
