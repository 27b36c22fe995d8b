"""``kinitiras-py bench``: engine time per admission request for growing policy sets."""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from kinitiras_py import __version__


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated counts, e.g. 1,100,1000; got {text!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"counts must be at least 1; got {text!r}")
    return list(dict.fromkeys(sizes))  # each once: results are keyed by the count (e.g. the floor's blocks)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command."""
    p = sub.add_parser(
        "bench", help="time the engine per admission request for 1, 100, 1000 policies",
        description="Time Engine.admit (selection, references, mutation, validation, patch) on one Pod, "
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
    p.add_argument("--seconds", type=float, default=None,
                   help="with --webhook: seconds per rate (default 10); with --floor: per server and round (default 5)")
    p.add_argument("--floor", action="store_true",
                   help="saturation of the webhook on one core beside the floor (a trivial webhook on the same "
                        "stack: decode, add one label, encode): closed-loop over --connections keep-alive "
                        "connections from another core, for the floor and ours with --matching of --total "
                        "policies matching the Pod, in --rounds interleaved rounds (medians)")
    p.add_argument("--e2e", action="store_true",
                   help="Pod CREATEs through a real API server at --concurrency, with no webhook, the floor "
                        "registered, and ours with --matching of --total policies matching, on one Pod over and "
                        "over (replicas) and on Pods all unlike each other beside the hand-written webhook "
                        "(the largest count) and a slow JavaScript neighbour (the smallest), targets marked")
    p.add_argument("--total", type=_positive, default=1000, help="with --floor/--e2e: policies loaded (default 1000)")
    p.add_argument("--matching", type=_sizes, default=[1, 20], metavar="N,N,...",
                   help="with --floor/--e2e: how many of them match the Pod, one server set-up each (default 1,20)")
    p.add_argument("--uncached", action="store_true",
                   help="with --floor/--e2e: also ours with its CEL result cache off, as if every Pod were unlike "
                        "the last (the bench sends one Pod over and over, as a Deployment's replicas look); "
                        "with --floor, the hand-written webhook too")
    p.add_argument("--connections", type=_positive, default=8, help="with --floor: keep-alive connections (default 8)")
    p.add_argument("--rounds", type=_positive, default=3, help="with --floor: interleaved rounds (default 3)")
    p.add_argument("--profile", metavar="DIR", default=None,
                   help="with --floor: run our servers under cProfile, statistics to DIR/ours-K-of-N.prof")
    p.add_argument("--pods", type=_positive, default=500,
                   help="with --e2e: Pods created per set-up and concurrency (default 500)")
    p.add_argument("--concurrency", type=_sizes, default=[1, 10], metavar="N,N,...",
                   help="with --e2e: concurrent clients (default 1,10)")
    p.add_argument("--runs", type=_positive, default=5,
                   help="with --e2e: rounds, each timing every set-up once (in an order rotated each round); "
                        "the figures are their medians (default 5)")
    p.add_argument("--kubeconfig", default=None,
                   help="with --e2e: a running control plane without webhooks (default: bring one up in a "
                        "temporary directory and stop it at the end)")
    p.add_argument("--scale", action="store_true",
                   help="engine time with one matching policy as non-matching ones of the same and other kinds "
                        "grow (counts: --policies, default here 10,10000), and the largest:smallest ratio")
    p.add_argument("--memory", action="store_true",
                   help="kinitiras-py serve against a real API server (--kubeconfig, else one brought up) with "
                        "--total policies (default here 10000): its RSS while serving and how fast a policy "
                        "change takes effect")
    p.add_argument("--scan", action="store_true",
                   help="the background scan in process over --scan-pods existing Pods and --scan-policies validate "
                        "policies: time to the first full report, memory added, CPU with --scan-changes Pod "
                        "changes/s for --seconds (default 30), and admission latency throughout")
    p.add_argument("--scan-pods", type=_positive, default=10_000, help="with --scan: existing Pods (default 10000)")
    p.add_argument("--scan-policies", type=_positive, default=50, help="with --scan: policies (default 50)")
    p.add_argument("--scan-changes", type=_positive, default=20,
                   help="with --scan: Pod changes per second (default 20)")
    p.add_argument("--cue", action="store_true",
                   help="a cue rule's compiled CEL against the same rule written in cel, --requests evaluations each")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.set_defaults(handler=_bench)


def _bench_webhook(args: argparse.Namespace) -> int:
    from kinitiras_py.bench import report, webhook, workload

    policies = workload.one_matching(max(args.policies))
    seconds = args.seconds or 10.0
    table = args.output == "table"
    if table:
        print(f"kinitiras-py {__version__} bench --webhook: Python {platform.python_version()}; POST /mutate over "
              f"TLS with {len(policies)} policies (one matching the Pod), {webhook.CONNECTIONS} keep-alive "
              f"connections, {seconds:g} s per rate, latency from each request's scheduled start; then the floor "
              f"(decode, add one label, encode) at the same rates", flush=True)
    stats = webhook.run(policies, workload.pod(), args.rates, seconds)
    floor = webhook.run(None, workload.pod(), args.rates, seconds)
    if table:
        print(report.webhook_table(stats, floor))
    else:
        runs = {"webhook": stats, "floor": floor}
        sys.stdout.write(orjson.dumps(report.as_json(runs), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _emit(args: argparse.Namespace, name: str, results: Sequence[Any], table: Callable[[Any], str]) -> None:
    from kinitiras_py.bench import report

    if args.output == "table":
        print(table(results))
    else:
        sys.stdout.write(orjson.dumps(report.as_json({name: results}), option=orjson.OPT_INDENT_2).decode() + "\n")


def _bench_floor(args: argparse.Namespace) -> int:
    from kinitiras_py.bench import report, saturation, workload

    seconds = args.seconds or 5.0
    if args.output == "table":
        print(f"kinitiras-py {__version__} bench --floor: Python {platform.python_version()}; POST /mutate over TLS, "
              f"each server in a child process on one core, closed-loop load from another over "
              f"{args.connections} keep-alive connections; {args.rounds} interleaved rounds of {seconds:g} s "
              f"(medians); a ~9.5 KB Pod AdmissionReview", flush=True)
    results = saturation.run(saturation.targets(args.total, args.matching, args.uncached), workload.server_pod(),
                             args.connections, seconds, args.rounds, warmup=min(1.0, seconds),
                             profile_dir=args.profile)
    _emit(args, "floor", results, report.saturation_table)
    if args.output == "table":
        print(_bottleneck_note(results))
    return 0


def _bottleneck_note(results: Sequence[Any]) -> str:
    """Say what limited the rates: the servers (as intended), the load, or neither."""
    server = min(r.server_busy for r in results)
    load = max(r.load_busy for r in results)
    text = (f"what set the rates: every server was on a CPU or waiting for one at least {server:.2f} of the time; "
            f"the load generator at most {load:.2f} of the time.")
    if server >= 0.9 and load < server:
        text += " The servers always had requests waiting: they, not the load, set the rates."
    elif load >= 0.9:
        text += " The load may have limited the rates: re-run with fewer --connections or on a quieter machine."
    else:
        text += (" Not every server always had a request to work on (the load, itself waiting for its core, "
                 "fell behind): that server's rate is below its saturation; re-run on a quieter machine.")
    if min(r.server_cpu for r in results) < 0.9:
        text += (" Other processes took turns on the servers' core (server cpu below busy): the rates are lower "
                 "than on an idle machine; cpu ms/review and its ratio do not depend on that.")
    return text


def _bench_e2e(args: argparse.Namespace) -> int:
    import asyncio
    import tempfile
    from pathlib import Path

    from kinitiras_py.bench import e2e, kube, report

    log = (lambda m: print(m, flush=True)) if args.output == "table" else (lambda m: print(m, file=sys.stderr))
    if args.output == "table":
        print(f"kinitiras-py {__version__} bench --e2e: Python {platform.python_version()}; {args.pods} Pod CREATEs "
              f"per set-up and concurrency through kube-apiserver, closed-loop from keep-alive connections; "
              f"ours: kinitiras-py serve at info level with {args.total} policies; the hand-written webhook: "
              f"aiohttp + orjson doing what {max(args.matching)} matching policies do", flush=True)
    def runs(access: kube.Access) -> list[list[e2e.Row]]:
        return asyncio.run(e2e.run(access, args.total, args.matching, args.pods, args.concurrency, log,
                                   args.uncached, args.runs))

    if args.kubeconfig:
        every = runs(kube.Access.from_kubeconfig(args.kubeconfig))
    else:
        from kinitiras_py.api import crds
        from kinitiras_py.dev import controlplane

        with tempfile.TemporaryDirectory(prefix="kinitiras-bench-e2e-") as tmp:
            run_dir = Path(tmp) / "run"
            log(f"bringing up a control plane in {run_dir}")
            state = controlplane.up(run_dir, log=lambda _m: None, crds=crds.build_crds())
            try:
                every = runs(kube.Access.from_kubeconfig(state.kubeconfig))
            finally:
                controlplane.down(run_dir)
    rows = e2e.medians(every)
    if args.output == "table":
        print(f"medians of {args.runs} round{'s' if args.runs > 1 else ''} (ratios: medians of each round's):")
    _emit(args, "e2e", rows, report.e2e_table)
    if args.output == "table":
        print(report.e2e_verdict(rows))
        fastest = max(rows, key=lambda r: r.rate)
        verdict = ("the API server and the webhooks, not the load, set the rates" if fastest.load_busy < 0.5 else
                   "the load may have held the rates back: re-run on a quieter machine")
        print(f"load generator: on a CPU {fastest.load_cpu:.2f} of the time (on one or waiting for one "
              f"{fastest.load_busy:.2f}) at the highest rate of the run ({fastest.setup}, concurrency "
              f"{fastest.concurrency}, {fastest.rate:.0f} pods/s): {verdict}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.scan:
        from kinitiras_py.bench import scanscale

        return scanscale.main(args.scan_pods, args.scan_policies, args.scan_changes, args.seconds or 30.0, args.output)
    if args.cue:
        from kinitiras_py.bench import cuerules

        return cuerules.main(args.requests, args.output)
    if args.scale or args.memory:
        from kinitiras_py.bench import memory, scale

        sizes = args.policies if args.policies != [1, 100, 1000] else list(scale.SIZES)
        return (scale.main(sizes, args.requests, args.output) if args.scale
                else memory.main(args.kubeconfig, args.total if args.total != 1000 else memory.TOTAL, 3, args.output))
    # The e2e set-ups hold their matching policies side by side, and the slow neighbour's (the
    # smallest count and its JavaScript rule); the floor's set-ups one at a time.
    matched = sum(args.matching) + min(args.matching) + 1 if args.e2e else max(args.matching)
    if (args.floor or args.e2e) and matched > args.total:
        print(f"kinitiras-py bench: --matching {','.join(map(str, args.matching))} needs {matched} policies, "
              f"more than --total {args.total}", file=sys.stderr)
        return 2
    if args.floor:
        return _bench_floor(args)
    if args.e2e:
        return _bench_e2e(args)
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
              f"one request at a time, times per request (Engine.admit); batches of the sizes interleaved")
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
