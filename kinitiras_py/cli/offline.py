"""``kinitiras-py render | apply | test``: policies against files, no cluster needed.

Exit codes: 0 success (``apply``: every object allowed; ``test``: every case passed), 1 a verdict
against (``apply``: an object denied; ``test``: a case failed), 2 bad input (missing file, malformed
YAML, a policy refused with its field paths, missing ``--old-resource`` for UPDATE, an option given
twice), 3 an internal error (a bug: one line on stderr instead of a traceback, so that it is never
mistaken for a denial). docs/testing.md describes both commands' outputs.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from kinitiras_py.base.errors import PolicyErrors
from kinitiras_py.base.typedefs import OPERATIONS
from kinitiras_py.cli import httpflags

RESULT_KEYS = ("allowed", "message", "warnings", "audit", "patch", "object")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the offline commands."""
    p = sub.add_parser("render", help="print a policy with renderedCel filled in for each template",
                       description="Check policies and print them with renderedCel set on every templated "
                                   "rule, as the webhook stores them. Exit 2 with the field paths when a "
                                   "policy is refused.")
    p.add_argument("policy", help="policy YAML file (- for stdin); several documents are allowed")
    p.add_argument("--cel", action="store_true",
                   help="print only the rendered CEL of each templated rule, under a comment naming it")
    p.add_argument("--context", action="append", default=[],
                   help="with --cel: ConfigMaps holding sidecar templates, whose CEL is printed too (repeatable)")
    httpflags.add(p)
    p.set_defaults(handler=guarded(_render))

    p = sub.add_parser("apply", help="run policies on resources as the webhook would (mutate, then validate)",
                       description="Run policies on objects as the webhook would: override policies, then "
                                   "validate policies on the result, each object on its own. Prints each "
                                   "object's result on stdout, and a summary per policy and rule on stderr. "
                                   "Exit 0 every object allowed, 1 one denied, 2 bad input.")
    p.add_argument("--policy", action="append", required=True, help="policy file (repeatable)")
    p.add_argument("--resource", action="append", required=True,
                   help="the objects under admission (for DELETE: the objects deleted): a file, several "
                        "documents or a List, a directory (its .yaml, .yml and .json files) or - (repeatable)")
    p.add_argument("--old-resource", action="append", default=[],
                   help="the previous objects, for UPDATE (repeatable); with several resources, each is "
                        "paired with the old one of the same kind, namespace and name")
    p.add_argument("--operation", default="CREATE", choices=list(OPERATIONS))
    p.add_argument("--namespace", help="the request's namespace (default: the resource's metadata.namespace); "
                                       "fills in a resource without one, refuses one that differs (exit 2), "
                                       "as the API server does")
    p.add_argument("--context", action="append", default=[],
                   help="objects for k8s/owner references and HTTPResponse documents (repeatable)")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml",
                   help="each object's result: one YAML document per object, or JSON (a list of them "
                        "when there are several objects)")
    p.add_argument("--results", metavar="FILE",
                   help="write every result as JSON (per object and rule, the summary and totals) to FILE; "
                        "- writes it on stdout instead of the objects' results")
    p.add_argument("--policy-report", metavar="FILE",
                   help="write the rules' results as PolicyReports (wgpolicyk8s.io/v1alpha2) YAML to FILE, one "
                        "per object with results (ClusterPolicyReport for an object without a namespace); - writes "
                        "them on stdout instead of the objects' results")
    httpflags.add(p)
    p.set_defaults(handler=guarded(_apply))

    p = sub.add_parser("test", help="run declarative test cases (kinitiras-test.yaml files) under DIR",
                       description="Run every kinitiras-test.yaml under DIR; print a unified diff for each "
                                   "object that differs. Exit 0 all passed, 1 a case failed, 2 bad input.")
    p.add_argument("dir", type=Path)
    p.add_argument("--junit", metavar="FILE", help="also write the outcomes as JUnit XML to FILE (- for stdout, "
                                                    "instead of the text)")
    p.add_argument("--json", metavar="FILE", help="also write the outcomes as JSON to FILE (- for stdout, "
                                                   "instead of the text)")
    httpflags.add(p)
    p.set_defaults(handler=guarded(_test))


INTERNAL_ERROR = 3


def guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``handler`` whose unexpected exceptions exit 3 with one line, not 1 with a traceback."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except Exception as e:  # every bug, whatever it is, must exit apart from a denial
            print(f"error: internal error, please report it with the input: {type(e).__name__}: {e}",
                  file=sys.stderr)
            return INTERNAL_ERROR

    return run


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _render(args: argparse.Namespace) -> int:
    from kinitiras_py.admission import httprefs
    from kinitiras_py.engine.policies.compiling import compile_policy
    from kinitiras_py.offline import loader
    from kinitiras_py.offline.apply import check_context
    from kinitiras_py.offline.dumper import dump_yaml_all
    from kinitiras_py.offline.policyfiles import load_policies
    from kinitiras_py.offline.render import configmap_sources, rendered_sources, with_rendered

    egress = httpflags.egress(args)
    if isinstance(egress, str):
        return _error(egress)
    try:
        docs = load_policies(args.policy)
        compiled = [compile_policy(doc) for doc in docs]
        for policy in compiled:
            httprefs.check(policy, egress)
        context = [d for f in args.context for d in loader.load_documents(f)]
        for index, obj in enumerate(context):
            check_context(obj, index)
        kept = [configmap_sources(policy, context) if context else [] for policy in compiled]
    except loader.InputError as e:
        return _error(str(e))
    except PolicyErrors as e:
        return _error(f"invalid policy: {e}")
    if not docs:
        return _error(f"{args.policy}: no policy found")
    for policy in compiled:
        for warning in policy.warnings:
            _warn(warning)
    if args.cel:
        for policy, from_configmaps in zip(compiled, kept, strict=True):
            for where, source in rendered_sources(policy) + from_configmaps:
                sys.stdout.write(f"// {policy.ref}: {where}\n{source}" + ("" if source.endswith("\n") else "\n"))
        return 0
    sys.stdout.write(dump_yaml_all(with_rendered(doc, c) for doc, c in zip(docs, compiled, strict=True)))
    return 0


def _apply(args: argparse.Namespace) -> int:
    from kinitiras_py.admission import results
    from kinitiras_py.offline import apply, loader
    from kinitiras_py.offline.dumper import dump_yaml, dump_yaml_all
    from kinitiras_py.offline.policyfiles import load_policies
    from kinitiras_py.reports import build

    if args.results == "-" and args.policy_report == "-":
        return _error("--results - and --policy-report - would both write on stdout: give one of them a file")
    egress = httpflags.egress(args)
    if isinstance(egress, str):
        return _error(egress)
    try:
        batch = apply.Batch(
            policies=[d for f in args.policy for d in load_policies(f)],
            resources=loader.load_objects(args.resource),
            old_resources=loader.load_objects(args.old_resource) if args.old_resource else [],
            operation=args.operation,
            context=[d for f in args.context for d in loader.load_documents(f)],
            namespace=args.namespace,
            egress=egress,
        )
        outcome = apply.run_batch(batch, on_warning=_warn)
    except loader.InputError as e:
        return _error(str(e))
    shown = [dict(zip(RESULT_KEYS, (o.decision.allowed, o.decision.message, o.decision.warnings, o.decision.audit,
                                    o.decision.patch, o.decision.object), strict=True)) for o in outcome.objects]
    if args.results:
        text = orjson.dumps(results.to_json(outcome.policies, outcome.objects), option=orjson.OPT_INDENT_2).decode()
        if args.results == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(args.results).write_text(text + "\n")
    if args.policy_report:
        reports = dump_yaml_all(build.offline_reports(outcome.objects, time.time()))
        if args.policy_report == "-":
            sys.stdout.write(reports)
        else:
            try:
                Path(args.policy_report).write_text(reports)
            except OSError as e:
                return _error(f"--policy-report {args.policy_report}: {e.strerror or e}")
    on_stdout = "-" in (args.results, args.policy_report)
    if not on_stdout and args.output == "json":
        value = shown[0] if len(shown) == 1 else shown
        sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif not on_stdout:
        sys.stdout.write(dump_yaml(shown[0]) if len(shown) == 1 else dump_yaml_all(shown))
    sys.stderr.write(results.summary_text(outcome.policies, outcome.objects))
    return 0 if all(o.decision.allowed for o in outcome.objects) else 1


def _test(args: argparse.Namespace) -> int:
    from kinitiras_py.offline import loader, testcases, testreport

    if args.junit == "-" and args.json == "-":
        return _error("--junit - and --json - would both write on stdout: give one of them a file")
    egress = httpflags.egress(args)
    if isinstance(egress, str):
        return _error(egress)
    try:
        outcomes = testcases.run_dir(args.dir, egress)
    except loader.InputError as e:
        return _error(str(e))
    failed = [o for o in outcomes if o.problems]
    for target, text in ((args.junit, lambda: testreport.junit_xml(outcomes)),
                         (args.json, lambda: orjson.dumps(testreport.to_json(outcomes),
                                                          option=orjson.OPT_INDENT_2).decode() + "\n")):
        if target == "-":
            sys.stdout.write(text())
        elif target:
            Path(target).write_text(text())
    lines = sys.stderr if "-" in (args.junit, args.json) else sys.stdout
    for o in outcomes:
        print(f"{'FAIL' if o.problems else 'ok  '} {o.file}: {o.name}", file=lines)
        for problem in o.problems:
            print("     " + problem.replace("\n", "\n     "), file=lines)
    print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed", file=lines)
    return 1 if failed else 0
