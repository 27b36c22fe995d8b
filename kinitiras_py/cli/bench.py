"""``kinitiras-py bench``: engine time per admission request for growing policy sets."""

from __future__ import annotations

import argparse
import platform
import sys

import orjson

from kinitiras_py import __version__


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated counts, e.g. 1,100,1000; got {text!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"counts must be at least 1; got {text!r}")
    return sizes


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command."""
    p = sub.add_parser(
        "bench", help="time the engine per admission request for 1, 100, 1000 policies",
        description="Time Pipeline.admit (selection, references, mutation, validation, patch) on one Pod, "
                    "request after request on one core. Run 1: one policy matches the Pod (resourcesOversell + "
                    "labels) and the rest target other kinds or namespaces, which the policy index skips. "
                    "Run 2: every policy matches, giving the cost per matching policy. Run 3: as run 2, but "
                    "an UPDATE of the Pod as stored, which the rules leave as it is. Run 4: every policy is a "
                    "ClusterValidatePolicy with two CEL checks, all passing.")
    p.add_argument("--policies", type=_sizes, default=[1, 100, 1000], metavar="N,N,...",
                   help="policy counts of run 1 (default 1,100,1000)")
    p.add_argument("--requests", type=_positive, default=2000, help="timed requests per count (default 2000)")
    p.add_argument("--warmup", type=int, default=None, help="untimed requests first (default requests/10)")
    p.add_argument("--all-match", type=_sizes, default=None, metavar="N,N,...",
                   help="policy counts of runs 2-4 (default: those of --policies up to 100)")
    p.add_argument("--all-match-requests", type=_positive, default=None,
                   help="timed requests per count in runs 2-4 (default requests/20, at least 20)")
    p.add_argument("--webhook", action="store_true",
                   help="time the HTTPS webhook instead: the app in a child process on one core, AdmissionReviews "
                        "offered open-loop at --rates from another (policies: --policies, the largest count)")
    p.add_argument("--rates", type=_sizes, default=[100, 200, 400], metavar="N,N,...",
                   help="with --webhook: requests per second to offer (default 100,200,400)")
    p.add_argument("--seconds", type=float, default=10.0, help="with --webhook: seconds per rate (default 10)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.set_defaults(handler=_bench)


def _bench_webhook(args: argparse.Namespace) -> int:
    from kinitiras_py.bench import report, webhook, workload

    policies = workload.one_matching(max(args.policies))
    table = args.output == "table"
    if table:
        print(f"kinitiras-py {__version__} bench --webhook: Python {platform.python_version()}; POST /mutate over "
              f"TLS with {len(policies)} policies (one matching the Pod), {webhook.CONNECTIONS} keep-alive "
              f"connections, {args.seconds:g} s per rate, latency from each request's scheduled start", flush=True)
    stats = webhook.run(policies, workload.pod(), args.rates, args.seconds)
    if table:
        print(report.webhook_table(stats))
    else:
        sys.stdout.write(orjson.dumps(report.as_json({"webhook": stats}), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.webhook:
        return _bench_webhook(args)
    from kinitiras_py.bench import report, runner, workload

    warmup = args.warmup if args.warmup is not None else max(1, args.requests // 10)
    all_sizes = args.all_match or [n for n in args.policies if n <= 100] or [min(args.policies)]
    all_requests = args.all_match_requests or max(20, args.requests // 20)
    pod = workload.pod()
    table = args.output == "table"
    if table:
        print(f"kinitiras-py {__version__} bench: Python {platform.python_version()} on {platform.machine()}; "
              f"one request at a time, times per request (Pipeline.admit); batches of the sizes interleaved")
        print(f"\nrun 1: one matching OverridePolicy (resourcesOversell + labels), the rest for other "
              f"kinds/namespaces; {args.requests} requests after {warmup} warm-up", flush=True)
    index = runner.run([runner.Setup(workload.one_matching(n), 1) for n in args.policies], pod,
                       args.requests, warmup)
    if table:
        print(report.index_table(index))
        print(f"\nrun 2: every policy matches; {all_requests} requests after {max(1, all_requests // 10)} warm-up",
              flush=True)
    runs = {
        "all_matching": [runner.Setup(workload.all_matching(n), n) for n in all_sizes],
        "unchanged_update": [runner.Setup(workload.all_matching(n, ("CREATE", "UPDATE")), n, update=True)
                             for n in all_sizes],
        "all_validating": [runner.Setup(workload.all_validating(n), n) for n in all_sizes],
    }
    titles = {"unchanged_update": "run 3: every policy matches, UPDATE of the Pod as stored (nothing left to change)",
              "all_validating": "run 4: every policy is a ClusterValidatePolicy (two CEL rules) and passes"}
    results: dict[str, list[runner.Stats]] = {"one_matching": index}
    for name, setups in runs.items():
        if table and name in titles:
            print(f"\n{titles[name]}", flush=True)
        results[name] = runner.run(setups, pod, all_requests, max(1, all_requests // 10))
        if table:
            print(report.all_match_table(results[name]))
    if not table:
        sys.stdout.write(orjson.dumps(report.as_json(results), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
