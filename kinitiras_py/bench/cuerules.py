"""``bench --cue``: a ``cue`` rule's compiled CEL (its ``cueCel``) against the same rule written in
``cel`` by hand, evaluated on the benchmark Pod.

Each pair gives the same result on the Pod (checked before timing). The programs are timed as the
webhook runs them, bindings and all, but with the result cache off: the bench repeats one Pod, and a
cached result would time the cache instead of the rule. Batches of the two are interleaved so that
machine drift affects both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kinitiras_py.base.typedefs import JSON
from kinitiras_py.bench import workload
from kinitiras_py.engine.cue import compile_cue
from kinitiras_py.engine.evaluation import cel

LIMIT = 1.2
"""The most a compiled ``cue`` rule may cost against its hand-written ``cel`` (issue 22)."""


@dataclass(frozen=True)
class Pair:
    """One rule written twice: ``kind`` (override or validate), in CUE and in CEL."""

    name: str
    kind: str
    cue: str
    cel: str


PAIRS = (
    Pair("override: label, pull policy per container", "override", """object: _ @tag(object)
patches: [
    if object.metadata.labels == _|_ {op: "add", path: "/metadata/labels", value: {}},
    {op: "add", path: "/metadata/labels/bench.example.com~1cue", value: "yes"},
    for i, c in object.spec.containers if c.imagePullPolicy == _|_ {
        op: "add", path: "/spec/containers/\\(i)/imagePullPolicy", value: "IfNotPresent"
    },
]""", """(has(object.metadata.labels) ? [] : [{"op": "add", "path": "/metadata/labels", "value": {}}]) +
[{"op": "add", "path": "/metadata/labels/bench.example.com~1cue", "value": "yes"}] +
object.spec.containers.enumerate().filter(e, !has(e.value.imagePullPolicy)).map(e, {"op": "add",
  "path": "/spec/containers/" + string(e.index) + "/imagePullPolicy", "value": "IfNotPresent"})"""),
    Pair("validate: no :latest images", "validate", """import "strings"
object: _ @tag(object)
_latest: [for c in object.spec.containers if c.image =~ ":latest$" {c.name}]
validate: {
    if len(_latest) > 0 {
        valid: false
        reason: "latest images: \\(strings.Join(_latest, ", "))"
    }
}""", """cel.bind(latest, object.spec.containers.filter(c, c.image.matches(":latest$")).map(c, c.name),
size(latest) > 0 ? {"valid": false, "reason": "latest images: " + latest.join(", ")}
  : {"valid": true, "reason": ""})"""),
)


@dataclass(frozen=True)
class Row:
    """One pair's medians (seconds per evaluation), their ratio and both cost estimates."""

    rule: str
    requests: int
    cue: float
    cel: float
    cue_cost: int
    cel_cost: int

    @property
    def ratio(self) -> float:
        """The compiled CUE's median over the hand-written CEL's."""
        return self.cue / self.cel if self.cel else 0.0


def programs(pair: Pair) -> tuple[cel.Program, cel.Program]:
    """The compiled ``cue`` rule and the hand-written ``cel`` one."""
    return cel.compile_program(compile_cue(pair.cue, pair.kind)), cel.compile_program(pair.cel)


def _times(program: cel.Program, variables: dict[str, JSON], count: int) -> list[float]:
    clock, out = time.perf_counter, []
    for _ in range(count):
        start = clock()
        program.evaluate(variables, remember=False)
        out.append(clock() - start)
    return out


def run(requests: int, rounds: int = 10, pairs: Sequence[Pair] = PAIRS) -> list[Row]:
    """Time ``requests`` evaluations of each program of each pair, in ``rounds`` interleaved batches."""
    variables: dict[str, JSON] = {"object": workload.pod()}
    rows = []
    for pair in pairs:
        compiled, written = programs(pair)
        if compiled.evaluate(variables, remember=False) != written.evaluate(variables, remember=False):
            raise RuntimeError(f"benchmark setup is wrong: the two forms of {pair.name!r} differ on the Pod")
        times: tuple[list[float], list[float]] = ([], [])
        batch = max(1, requests // rounds)
        for _ in range(rounds):
            for program, out in zip((compiled, written), times, strict=True):
                out += _times(program, variables, batch)
        rows.append(Row(pair.name, batch * rounds, statistics.median(times[0]), statistics.median(times[1]),
                        compiled.bound.cost, written.bound.cost))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as text, with each ratio against :data:`LIMIT`."""
    lines = [f"{'rule':<46} {'cue µs':>8} {'cel µs':>8} {'ratio':>6}  {'cost cue/cel':>14}"]
    for r in rows:
        verdict = "within" if r.ratio <= LIMIT else "beyond"
        lines.append(f"{r.rule:<46} {r.cue * 1e6:8.1f} {r.cel * 1e6:8.1f} {r.ratio:6.2f}  "
                     f"{r.cue_cost / r.cel_cost:14.2f}  {verdict} {LIMIT}x")
    return "\n".join(lines)


def main(requests: int, output: str) -> int:
    """``bench --cue``: the table, or JSON."""
    import platform
    import sys

    import orjson

    from kinitiras_py import __version__

    if output == "table":
        print(f"kinitiras-py {__version__} bench --cue: Python {platform.python_version()}; each rule's compiled "
              f"cue against the same rule in cel, on the benchmark Pod, result cache off, medians of {requests} "
              "evaluations in interleaved batches", flush=True)
    rows = run(requests)
    if output == "table":
        print(table(rows))
    else:
        body = [{**r.__dict__, "ratio": r.ratio} for r in rows]
        sys.stdout.write(orjson.dumps({"cue": body}, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
