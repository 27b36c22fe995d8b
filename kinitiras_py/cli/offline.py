"""``kinitiras-py render | apply | test``: policies against files, no cluster needed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson
import yaml

from kinitiras_py.base.errors import PolicyErrors


def register(sub: argparse._SubParsersAction) -> None:
    """Add the offline commands."""
    p = sub.add_parser("render", help="print a policy with renderedCel filled in for each template")
    p.add_argument("policy", help="policy YAML file (- for stdin)")
    p.set_defaults(handler=_render)

    p = sub.add_parser("apply", help="run policies on a resource as the webhook would (mutate, then validate)")
    p.add_argument("--policy", action="append", required=True, help="policy file (repeatable)")
    p.add_argument("--resource", required=True, help="the object under admission (for DELETE: the object deleted)")
    p.add_argument("--old-resource", help="the previous object, for UPDATE")
    p.add_argument("--operation", default="CREATE", choices=["CREATE", "UPDATE", "DELETE", "CONNECT"])
    p.add_argument("--context", action="append", default=[],
                   help="objects for k8s/owner references and HTTPResponse documents (repeatable)")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    p.set_defaults(handler=_apply)

    p = sub.add_parser("test", help="run declarative test cases (kinitiras-test.yaml files) under DIR")
    p.add_argument("dir", type=Path)
    p.set_defaults(handler=_test)


def _render(args: argparse.Namespace) -> int:
    from kinitiras_py.engine.compiling import compile_policy
    from kinitiras_py.offline import loader
    from kinitiras_py.offline.render import with_rendered

    try:
        docs = loader.load_documents(args.policy)
        out = [with_rendered(doc, compile_policy(doc)) for doc in docs]
    except loader.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except PolicyErrors as e:
        print(f"error: invalid policy: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False, width=120))
    return 0


def _apply(args: argparse.Namespace) -> int:
    from kinitiras_py.offline import apply, loader

    try:
        case = apply.Case(
            policies=[d for f in args.policy for d in loader.load_documents(f)],
            resource=loader.load_one(args.resource),
            old_resource=loader.load_one(args.old_resource) if args.old_resource else None,
            operation=args.operation,
            context=[d for f in args.context for d in loader.load_documents(f)],
        )
        decision = apply.run(case)
    except loader.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = {"allowed": decision.allowed, "message": decision.message, "warnings": decision.warnings,
              "patch": decision.patch, "object": decision.object}
    if args.output == "json":
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(result, sort_keys=False, width=120))
    return 0 if decision.allowed else 1


def _test(args: argparse.Namespace) -> int:
    from kinitiras_py.offline import loader, testcases

    try:
        outcomes = testcases.run_dir(args.dir)
    except loader.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = [o for o in outcomes if o.problems]
    for o in outcomes:
        print(f"{'FAIL' if o.problems else 'ok  '} {o.file}: {o.name}")
        for problem in o.problems:
            print("     " + problem.replace("\n", "\n     "))
    print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0
