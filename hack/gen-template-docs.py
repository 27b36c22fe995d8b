#!/usr/bin/env python3
"""Regenerate docs/templates.md from the acceptance cases in tests/data/cases.

Every policy, object, rendered CEL and result shown in the page is produced here by running
``kinitiras-py render --cel`` and ``kinitiras-py apply`` on the files of a case directory, so
the page shows what the code does today. ``tests/unit/offline/test_docs.py`` fails when the
page is stale.

Usage: python3 hack/gen-template-docs.py [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "cases"
OUTPUT = ROOT / "docs" / "templates.md"

sys.path.insert(0, str(ROOT))

from kinitiras_py.cli.main import main as cli  # noqa: E402
from kinitiras_py.offline import testcases  # noqa: E402


@dataclass(frozen=True)
class Section:
    """One overrider or template type, shown with the cases that demonstrate it."""

    title: str
    case_dir: str
    cases: tuple[str, ...]
    prose: str


@dataclass(frozen=True)
class Difference:
    """A kinitiras bug (behaviour spec §12) and what kinitiras-py does instead."""

    topic: str
    kinitiras: str
    ours: str
    case: tuple[str, str] | None = None
    """(case dir, case name) demonstrating it; the page says "not yet" if that case fails."""


SECTIONS = (
    Section("annotations", "override-anno", ("UPDATE runs every rule in order, owner and k8s values from the context",),
            "Sets, replaces or removes one annotation, or writes every pair of a `stringMap`. The value is a "
            "constant or is read through `valueRef` from the object itself (`current`), the previous object "
            "(`old`), its owner (`owner`), another object (`k8s`) or an HTTP answer (`http`). Offline, owner "
            "and k8s references are answered from the `--context` files. The `path` of the template is the "
            "annotation key itself, so keys with dots or slashes work."),
    Section("labels", "override-labels", ("UPDATE removes xxx-id, sets owned-by and copies restartPolicy",),
            "The same operations as annotations, on `metadata.labels`. A value read through `valueRef` is "
            "written as a string."),
    Section("resources", "override-resources", ("every container gets the limits and loses its requests",
                                                 "quantities are kept as written (millicores stay millicores) "
                                                 "and extended resource names work"),
            "Sets (`add`, `replace`) or removes (`remove`, only the names matter) requests and limits in every "
            "container and init container of a Pod or of any built-in workload's pod template; "
            "`containerNames` narrows the containers. Quantities are written in canonical form, never rounded."),
    Section("resourcesOversell", "override-resourcesoversell",
            ("every container's requests are derived from its own limits",),
            "Derives each container's requests from its own limits: cpu times `cpuFactor` (rounded down to a "
            "millicore), memory times `memoryFactor` and ephemeral-storage times `diskFactor` (rounded down to a "
            "byte). Factors must be greater than 0 and at most 1. A resource without a limit keeps its "
            "request. `remove` deletes the requests the factors would set."),
    Section("tolerations", "override-tolerations",
            ("a Pod with the default not-ready/unreachable tolerations keeps them and gets the two",),
            "`add` appends the policy's tolerations that are not present yet (same key, operator, value and "
            "effect); `replace` puts the policy's toleration in place of any with the same key and effect and "
            "adds the rest; `remove` drops the matching ones. Works on Pods and on pod templates."),
    Section("affinity", "override-affinity", ("a Pod without affinity gets both rules' terms",),
            "Per sub-affinity (node, pod, pod-anti) and per field (required, preferred): `add` appends the "
            "policy's terms that are not present, `replace` sets the field to the policy's terms, `remove` "
            "drops the policy's terms; fields and sub-affinities left empty disappear."),
    Section("condition", "validate-multi", ("the approver's reject answer denies the deletion",
                                            "with no annotations and the approver's consent the deletion is "
                                            "allowed"),
            "The validate template. `dataRef` names the value under test; `cond` compares it with `value` or "
            "`valueRef` (Equal, NotEqual, Gt, Gte, Lt, Lte, In, NotIn, Regex) or checks that it exists "
            "(Exist, NotExist). With `affectMode: reject` (the default) a true condition denies the request "
            "with `message`; with `allow` a false one does. Numeric strings compare as numbers. Offline, the "
            "`http` reference is answered by `kind: HTTPResponse` documents among the `--context` files."),
    Section("origin", "origin", ("every origin entry applies, in order",),
            "Typed overriders applied as written, without CEL: annotations, labels, nodeSelector, hostNetwork, "
            "schedulerName, affinity, topologySpreadConstraints, resourceRequirements, resourceOversell "
            "(scales the container's current values) and tolerations. Entries apply in order, each on the "
            "result of the previous one. The plaintext operation of this rule runs first. Nothing is "
            "rendered, so `render --cel` prints nothing for this policy."),
    Section("plaintext", "addanno-op", ("a Pod with annotations gets added-by=op",),
            "Raw JSON-patch operations (`add`, `replace`, `remove`) applied as written. `replace` of a missing "
            "map key acts as `add`, and `remove` of a missing path does nothing. Nothing is rendered."),
)

DIFFERENCES = (
    Difference("OverridePolicy scope", "applied to objects in every namespace",
               "applies only in its own namespace", ("addanno-op", "a Pod in another namespace is left alone")),
    Difference('`"*"` in targetOperations', "matched no operation", "matches every operation"),
    Difference("plaintext with origin", "plaintext skipped when origin is set",
               "every overrider runs: rendered, cel, plaintext, origin",
               ("origin", "every origin entry applies, in order")),
    Difference("rule and policy order", "unstable sort of override rules, random validate policy order",
               "cluster policies, then namespaced, by name, rules in order; the first denial wins"),
    Difference("affectMode allow", "denied with an empty reason", "denied with the condition's message"),
    Difference("containers", "only `containers[0]` got resources and oversell",
               "every container and init container (`containerNames` narrows)",
               ("override-resourcesoversell", "every container's requests are derived from its own limits")),
    Difference("workload kinds", "every non-Pod assumed to have `/spec/template/spec`; tolerations and affinity "
               "Pod-only", "the pod spec of each built-in workload kind; other kinds are left alone",
               ("override-tolerations", "add works on a Deployment's pod template")),
    Difference("resources quantities", '`500m` became `"1"` (rounded up to whole units)', "kept as written",
               ("override-resources", "quantities are kept as written (millicores stay millicores) and extended "
                                       "resource names work")),
    Difference("resource names with `/`", "`nvidia.com/gpu` broke the patch path", "escaped in the JSON pointer",
               ("override-resources", "quantities are kept as written (millicores stay millicores) and extended "
                                      "resource names work")),
    Difference("oversell without a cpu limit", 'request set to `"0m"`', "request left as it is",
               ("override-resourcesoversell", "every container's requests are derived from its own limits")),
    Difference("oversell without a memory limit", "the request was denied", "request left as it is",
               ("override-resourcesoversell", "every container's requests are derived from its own limits")),
    Difference("oversell units", "`k`, `P`, `E`, `Pi`, `Ei` and decimals gave 0; memory written as a bare "
               "number", "every Kubernetes quantity; results are quantity strings",
               ("override-resourcesoversell", "every container's requests are derived from its own limits")),
    Difference("oversell factors", "any factor used once one was valid (≥ 1 included)",
               "each factor must be > 0 and ≤ 1, checked when the policy is admitted",
               ("override-resourcesoversell", "a factor above 1 is refused when the policy is admitted")),
    Difference("tolerations add", "two or more tolerations did not render; no de-duplication",
               "any number; those present are skipped",
               ("override-tolerations", "add with two tolerations works and skips those already present")),
    Difference("tolerations replace", "policy tolerations without a match were not added",
               "replaced by key and effect, the others added",
               ("override-tolerations", "a Pod with the default not-ready/unreachable tolerations keeps them "
                                        "and gets the two")),
    Difference("tolerations remove", "denied on a Pod without tolerations; stale indexes removed the wrong items",
               "removes exactly the matching items; nothing to remove is fine",
               ("override-tolerations", "remove drops every matching toleration")),
    Difference("affinity replace/remove", "both required and preferred in one sub-affinity did not render",
               "works", ("override-affinity", "replace sets both node-affinity fields and keeps the rest")),
    Difference("affinity add", "pod-affinity preferences guarded by the node-affinity list; terms added again "
               "on every UPDATE", "appends missing terms only",
               ("override-affinity", "UPDATE of an already patched Pod changes nothing (kinitiras prepended "
                                     "the terms again)")),
    Difference("affinity remove", "a field absent from the Pod failed the request", "skipped",
               ("override-affinity", "remove drops matching terms and skips fields the Pod does not have")),
    Difference("keys with `/` or dots", "`example.com/team` mangled into `example.com.team`",
               "used as the key", ("override-labels", "a label key with a slash is written as that key")),
    Difference("user strings", "values and messages pasted into CUE unescaped",
               "every string reaches CEL as an escaped literal"),
    Difference("condition dataRef from owner", "never bound: evaluation always failed", "resolved like valueRef"),
    Difference("In / NotIn", "a scalar value gave an empty list; valueRef and Regex did not render",
               "a scalar is refused with its field path; valueRef and Regex render"),
    Difference("numbers in annotations", 'the string `"13"` never equalled the integer 13', "numeric strings "
               "compare as numbers", ("validate-multi", "an integer annotation in the integer list denies the "
                                                        "deletion")),
    Difference("validate-multi http rule", "path lacked `body.`, so it never matched",
               "answers are read from the body unless the path starts with `body` or `header`",
               ("validate-multi", "the approver's reject answer denies the deletion")),
    Difference("validate-multi k8s rule", "every Namespace deletion failed with a mapping error",
               "a placeholder with nothing to read gives no value, so the rule does not reject",
               ("validate-multi", "with no annotations and the approver's consent the deletion is allowed")),
    Difference("addanno-op on a Pod without annotations", "the CREATE was denied (500)",
               "the annotations map is created", ("addanno-op", "a Pod without annotations also gets added-by=op")),
    Difference("validate-pab", "stored, then never run", "refused with the field path",
               ("validate-pab", "the policy is refused with the field path")),
    Difference("CUE rules", "evaluated by CUE", "compiled to CEL (`cueCel`) when the policy is admitted, with the "
               "same results; a program outside the subset of docs/cue.md is refused with line and column",
               ("addanno-cop", "the CUE original gives the same result as its CEL version")),
    Difference("errors", "every lookup or patch error denied the request", "per-rule `failurePolicy`: `Ignore` "
               "skips the rule with a warning"),
    Difference("DELETE", "override rules targeting DELETE could fail the deletion", "override policies do not "
               "run on DELETE or CONNECT", ("addanno-cop", "DELETE changes nothing")),
    Difference("placeholders", "one `{{path}}` per string; a non-string field was an error",
               "any number; numbers and booleans are written as text"),
    Difference("policy admission", "no check of plaintext, selectors or templates; renderedCue only for labelled "
               "policies", "every policy is checked (all problems, with field paths) and rendered"),
    Difference("origin snapshot", "entries computed from one snapshot: the last of a type won",
               "each entry sees the previous one's result", ("origin", "every origin entry applies, in order")),
    Difference("origin kinds", "only Pod and Deployment for pod fields", "every built-in workload kind",
               ("origin", "every origin entry applies, in order")),
    Difference("origin oversell factor", "an unparsable factor crashed the process", "refused at admission"),
)


def rel(path: Path) -> str:
    """``path`` relative to the repository root, normalised (no ``..``)."""
    return os.path.relpath(os.path.normpath(path), ROOT)


def run_cli(args: list[str]) -> tuple[int, str]:
    """Run ``kinitiras-py`` in-process; return the exit code and stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli(args)
    return code, out.getvalue()


def _find(case_dir: str, name: str) -> testcases.CaseSpec:
    for spec in testcases.load_file(CASES / case_dir / testcases.TEST_FILE):
        if spec.name == name:
            return spec
    raise SystemExit(f"no case {name!r} in {case_dir}")


def _block(lang: str, text: str) -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


def _apply_args(spec: testcases.CaseSpec, relative: bool) -> list[str]:
    def name(p: Path) -> str:
        return rel(p) if relative else str(p)

    args = ["apply"]
    for p in spec.policies:
        args += ["--policy", name(p)]
    args += ["--resource", name(spec.resource)]
    if spec.operation != "CREATE":
        args += ["--operation", spec.operation]
    if spec.old_resource:
        args += ["--old-resource", name(spec.old_resource)]
    for p in spec.context:
        args += ["--context", name(p)]
    return args


def _sorted_yaml(obj: object) -> list[str]:
    # Key order of merged maps and of patch operations varies between runs; sorted keys do not.
    text: str = yaml.safe_dump(obj, sort_keys=True, width=120)
    return text.splitlines(keepends=True)


def section(sec: Section) -> str:
    """The markdown of one section."""
    out = [f"## {sec.title}\n", sec.prose + "\n"]
    specs = [_find(sec.case_dir, name) for name in sec.cases]
    shown: set[Path] = set()
    for i, spec in enumerate(specs):
        for policy in spec.policies:
            if policy in shown:
                continue
            shown.add(policy)
            out.append(f"Policy `{rel(policy)}`:\n")
            out.append(_block("yaml", policy.read_text()))
            code, cel = run_cli(["render", "--cel", str(policy)])
            if code != 0:
                raise SystemExit(f"render failed for {policy}")
            out.append(f"Rendered CEL (`kinitiras-py render --cel {rel(policy)}`):\n")
            out.append(_block("", cel) if cel.strip() else "Nothing: this policy has no templates.\n")
        for ctx in spec.context:
            if ctx not in shown:
                shown.add(ctx)
                out.append(f"Context `{rel(ctx)}` (what references find offline):\n")
                out.append(_block("yaml", ctx.read_text()))
        title = f"### Example {i + 1}: {spec.name}\n" if len(specs) > 1 else f"### Example: {spec.name}\n"
        out.append(title)
        if spec.description:
            out.append(spec.description + "\n")
        out.append(f"Before (`{rel(spec.resource)}`):\n")
        out.append(_block("yaml", spec.resource.read_text()))
        code, result = run_cli([*_apply_args(spec, relative=False), "-o", "json"])
        decision = json.loads(result)
        verdict = {k: decision[k] for k in ("allowed", "message", "warnings")}
        out.append("Result (`kinitiras-py " + " ".join(_apply_args(spec, relative=True)) + f"`, exit {code}):\n")
        out.append(_block("yaml", yaml.safe_dump(verdict, sort_keys=False, width=1000)))
        before = yaml.safe_load(spec.resource.read_text())
        if decision["object"] == before:
            out.append("The object is unchanged.\n")
            continue
        diff = difflib.unified_diff(_sorted_yaml(before), _sorted_yaml(decision["object"]), "before", "after")
        out.append("Change (keys sorted; the webhook returns it as a JSON patch):\n")
        out.append(_block("diff", "".join(diff)))
        out.append("After (`object`, keys sorted):\n")
        out.append(_block("yaml", "".join(_sorted_yaml(decision["object"]))))
    return "\n".join(out)


def _status(diff: Difference) -> str:
    if diff.case is None:
        return diff.ours
    outcome = testcases.run_case(_find(*diff.case))
    if outcome.problems:
        return f"**not yet**: {diff.ours} (case fails)"
    return diff.ours


def differences() -> str:
    """The "Differences from kinitiras" section, with each claim checked against its case."""
    rows = ["| Topic | kinitiras | kinitiras-py | Case |", "|---|---|---|---|"]
    for d in DIFFERENCES:
        case = f"`{d.case[0]}`: {d.case[1]}" if d.case else ""
        rows.append(f"| {d.topic} | {d.kinitiras} | {_status(d)} | {case} |")
    return "\n".join([
        "## Differences from kinitiras\n",
        "The bugs and surprises of kinitiras (behaviour spec §12) that kinitiras-py does not reproduce. Where a "
        "case is named, the generator ran it while writing this page; a claim whose case fails is marked "
        "**not yet**. Runtime matters outside the templates (token refresh, informers, certificates) are "
        "not covered here.\n",
        "\n".join(rows) + "\n",
    ])


def generate() -> str:
    """The whole page."""
    toc = "\n".join(f"- [{s.title}](#{s.title.lower()})" for s in SECTIONS)
    head = (
        "# Templates and overriders, by example\n\n"
        "<!-- Generated by hack/gen-template-docs.py from tests/data/cases; do not edit by hand. -->\n\n"
        "Each section shows a policy, the CEL that kinitiras-py renders from its template (what the webhook "
        "writes to `renderedCel` when the policy is admitted), an object before admission and the result "
        "of `kinitiras-py apply` on it: the verdict, the change and the object after. `apply` also prints "
        "the JSON patch the webhook would return. The examples are acceptance cases; "
        "`kinitiras-py test tests/data/cases` runs them all.\n\n"
        f"{toc}\n- [Differences from kinitiras](#differences-from-kinitiras)\n"
    )
    return "\n".join([head, *(section(s) for s in SECTIONS), differences()])


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with ``--check`` report whether it is current (exit 1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 when the page is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{rel(OUTPUT)} is stale: run python3 hack/gen-template-docs.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {rel(OUTPUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
