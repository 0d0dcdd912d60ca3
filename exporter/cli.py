"""The `topology-hints-exporter` command line: evaluate, explain, serve."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from exporter import __version__
from exporter.document import evaluation_document, service_document
from exporter.quantity import parse_quantity
from exporter.runtime import tune_garbage_collector
from exporter.snapshot import DEFAULT_MAX_INPUT_BYTES, SnapshotError, load_snapshot

if TYPE_CHECKING:
    from exporter.engine.whatif import ScenarioStep
    from exporter.serve import ServeOptions

# `serve` and its sources (the `kubernetes` client, prometheus_client) are imported by the
# serve command only: evaluate and explain start in a fraction of the time without them.

PROG = "topology-hints-exporter"
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure to report as one line on stderr with exit code 2."""


def _byte_count(text: str) -> int:
    try:
        value = parse_quantity(text)
    except ValueError:
        value = None
    if value is None or value < 1 or value.denominator != 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes, e.g. 512Mi")
    return int(value)


def _add_snapshot_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, required: bool
) -> None:
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        required=required,
        help="a Kubernetes List of Nodes, Services and EndpointSlices (JSON or YAML); - for stdin",
    )
    parser.add_argument(
        "--max-input-bytes",
        metavar="SIZE",
        type=_byte_count,
        default=DEFAULT_MAX_INPUT_BYTES,
        help="refuse a larger snapshot (default 1Gi; a quantity such as 512Mi or a number)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Tells whether Kubernetes topology-aware routing works, and why not.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    evaluate = commands.add_parser(
        "evaluate", help="print the verdicts for a snapshot as one JSON document"
    )
    _add_snapshot_argument(evaluate, required=True)

    explain = commands.add_parser(
        "explain", help="explain the verdicts for a snapshot, Service by Service"
    )
    _add_snapshot_argument(explain, required=True)
    explain.add_argument("service", nargs="?", metavar="NAMESPACE/NAME", help="only this Service")
    explain.add_argument(
        "--output", "-o", choices=("text", "json"), default="text", help="text (default) or json"
    )
    explain.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the verdicts: auto (only on a terminal), always or never",
    )
    _add_what_if_parser(commands)
    _add_serve_parser(commands)
    return parser


class _ScenarioStepAction(argparse.Action):
    """Collects --lose-zone, --lose-node and --scale into one list, in the order given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,  # noqa: ARG002 - argparse's signature
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,  # noqa: ARG002 - argparse's signature
    ) -> None:
        # A fresh list: argparse shares the default between parses.
        namespace.steps = [*(getattr(namespace, "steps", None) or []), (self.dest, values)]


def _add_what_if_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    what_if = commands.add_parser(
        "what-if",
        help="what a drain, a zone failure, a scale or a rollout would do to the hints",
        description="Apply a scenario to a snapshot and print the Services whose hints it "
        "changes. Exit status: 0 when no Service loses hints and no rollout passes a refused "
        "count, 1 when one does (gate a drain or a rollout on it), 2 on bad input.",
    )
    _add_snapshot_argument(what_if, required=True)
    what_if.add_argument(
        "--lose-zone",
        dest="lose-zone",
        metavar="ZONE",
        action=_ScenarioStepAction,
        help="every node of the zone goes, with the endpoints on them or in the zone",
    )
    what_if.add_argument(
        "--lose-node",
        dest="lose-node",
        metavar="NAME",
        action=_ScenarioStepAction,
        help="the node goes, with the endpoints on it (repeat for a pool or a drain)",
    )
    what_if.add_argument(
        "--scale",
        dest="scale",
        metavar="NAMESPACE/NAME=N",
        action=_ScenarioStepAction,
        help="set the Service's ready endpoints to N (repeatable; steps apply in order)",
    )
    what_if.add_argument(
        "--rollout",
        metavar="NAMESPACE/NAME",
        help="check a rolling update of this Service's workload after the steps",
    )
    what_if.add_argument(
        "--max-surge", metavar="S", help="the rollout's maxSurge: a count or a percentage (25%%)"
    )
    what_if.add_argument(
        "--max-unavailable",
        metavar="U",
        help="the rollout's maxUnavailable: a count or a percentage (25%%)",
    )
    what_if.add_argument(
        "--all", action="store_true", help="also print the Services that do not change"
    )
    what_if.add_argument(
        "--output", "-o", choices=("text", "json"), default="text", help="text (default) or json"
    )
    what_if.set_defaults(steps=[])


def _add_serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="watch the cluster (or serve a snapshot) and expose Prometheus metrics",
        description="Watch Nodes, Services, EndpointSlices and Events and serve /metrics, "
        "/healthz and /readyz. In a pod it uses the service account unless --kubeconfig is set.",
    )
    source = serve.add_argument_group("source")
    source.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)",
    )
    source.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    _add_snapshot_argument(source, required=False)
    http = serve.add_argument_group("http")
    http.add_argument(
        "--listen-address",
        "--web.listen-address",
        dest="listen_address",
        metavar="HOST:PORT",
        default=":9808",
        help="address to serve on (default :9808, every interface)",
    )
    http.add_argument("--tls-cert-file", metavar="PATH", help="serve HTTPS with this certificate")
    http.add_argument("--tls-key-file", metavar="PATH", help="private key for --tls-cert-file")
    http.add_argument(
        "--tls-client-ca-file",
        metavar="PATH",
        help="mutual TLS: serve only clients whose certificate this CA signed",
    )
    http.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="PATH",
        help="exporter-toolkit web configuration (TLS, basic auth), as Prometheus exporters read",
    )
    scope = serve.add_argument_group("what to export")
    scope.add_argument(
        "--all-services",
        action="store_true",
        help="export every Service, not only those with a hint mechanism, hints or config issues",
    )
    scope.add_argument(
        "--namespaces", action="append", metavar="NS[,NS]", help="only these namespaces"
    )
    scope.add_argument(
        "--namespaces-exclude", action="append", metavar="NS[,NS]", help="skip these namespaces"
    )
    scope.add_argument(
        "--metric-allowlist",
        action="append",
        metavar="REGEX[,REGEX]",
        help="export only metric families whose full name matches one of these",
    )
    scope.add_argument(
        "--metric-denylist",
        action="append",
        metavar="REGEX[,REGEX]",
        help="do not export metric families whose full name matches one of these",
    )
    scope.add_argument(
        "--shard",
        default="0",
        metavar="N|auto",
        help="this exporter's shard of the Services (auto: the ordinal at the end of $POD_NAME)",
    )
    scope.add_argument(
        "--total-shards", type=int, default=1, metavar="N", help="number of shards (default 1)"
    )
    logs = serve.add_argument_group("logging")
    logs.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    logs.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="json (default when stdout is not a terminal) or console",
    )


def _check_tls_flags(args: argparse.Namespace) -> None:
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CommandError("--tls-cert-file and --tls-key-file go together")
    if args.tls_client_ca_file and not args.tls_cert_file:
        raise CommandError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
    if args.web_config_file and args.tls_cert_file:
        raise CommandError("--web.config.file and --tls-cert-file are exclusive: use one")


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    from exporter.serve import ServeOptions, resolve_shard, split_list  # noqa: PLC0415
    from exporter.server import parse_listen_address  # noqa: PLC0415

    if args.kubeconfig and args.snapshot:
        raise CommandError("--snapshot and --kubeconfig are exclusive: serve one source")
    if args.metric_allowlist and args.metric_denylist:
        raise CommandError("--metric-allowlist and --metric-denylist are exclusive")
    _check_tls_flags(args)
    if args.total_shards < 1:
        raise CommandError("--total-shards must be at least 1")
    try:
        shard = resolve_shard(args.shard)
        parse_listen_address(args.listen_address)
        allow, deny = split_list(args.metric_allowlist), split_list(args.metric_denylist)
        for pattern in (*allow, *deny):
            re.compile(pattern)
    except re.error as error:
        raise CommandError(f"bad metric regular expression {error.pattern!r}: {error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    if not 0 <= shard < args.total_shards:
        raise CommandError(f"shard {shard} is outside 0..{args.total_shards - 1}")
    return ServeOptions(
        listen_address=args.listen_address,
        snapshot=args.snapshot,
        max_input_bytes=args.max_input_bytes,
        kubeconfig=args.kubeconfig,
        context=args.context,
        all_services=args.all_services,
        namespaces=split_list(args.namespaces),
        namespaces_exclude=split_list(args.namespaces_exclude),
        metric_allowlist=allow,
        metric_denylist=deny,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        tls_client_ca_file=args.tls_client_ca_file,
        web_config_file=args.web_config_file,
        shard=shard,
        total_shards=args.total_shards,
        log_level=args.log_level,
        log_format=args.log_format,
    )


def _run_serve(args: argparse.Namespace) -> int:
    from exporter import serve  # noqa: PLC0415
    from exporter.sources.kubeapi import ConfigError  # noqa: PLC0415
    from exporter.webconfig import WebConfigError  # noqa: PLC0415

    options = _serve_options(args)
    try:
        return serve.run(options)
    except (ConfigError, WebConfigError) as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(
            f"cannot serve on {options.listen_address}: {error.strerror or error}"
        ) from None


def _run_evaluate(args: argparse.Namespace) -> int:
    evaluation = load_snapshot(args.snapshot, args.max_input_bytes).evaluate()
    _print_json(evaluation_document(evaluation))
    return 0


def _run_explain(args: argparse.Namespace) -> int:
    from exporter.explain import ExplainOptions, explain_text, select_verdicts  # noqa: PLC0415

    evaluation = load_snapshot(args.snapshot, args.max_input_bytes).evaluate()
    try:
        verdicts = select_verdicts(evaluation, args.service)
    except LookupError as error:
        raise CommandError(str(error.args[0])) from None
    if args.output == "json":
        _print_json([service_document(verdict) for verdict in verdicts])
        return 0
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    sys.stdout.write(explain_text(evaluation, verdicts, ExplainOptions(color=color)))
    return 0


def _run_what_if(args: argparse.Namespace) -> int:
    from exporter import whatif_report as report  # noqa: PLC0415
    from exporter.engine import whatif  # noqa: PLC0415
    from exporter.explain import ExplainOptions  # noqa: PLC0415

    if (args.max_surge or args.max_unavailable) and not args.rollout:
        raise CommandError("--max-surge and --max-unavailable describe a --rollout")
    snapshot = load_snapshot(args.snapshot, args.max_input_bytes)
    cluster = whatif.Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices)
    try:
        steps = [_scenario_step(kind, value) for kind, value in args.steps]
        result = whatif.what_if(cluster, steps)
        requests = []
        if args.rollout:
            namespace, name = report.parse_service_name(args.rollout)
            requests.append(
                report.RolloutRequest(
                    namespace,
                    name,
                    args.max_surge or report.DEFAULT_MAX_SURGE,
                    args.max_unavailable or report.DEFAULT_MAX_UNAVAILABLE,
                )
            )
        rollouts = report.answer_rollouts(result, requests)
    except whatif.ScenarioError as error:
        raise CommandError(str(error)) from None
    if args.output == "json":
        _print_json(report.what_if_document(result, rollouts, show_all=args.all))
    else:
        sys.stdout.write(
            report.what_if_text(result, rollouts, ExplainOptions(color=False), show_all=args.all)
        )
    return report.exit_status(result, rollouts)


def _scenario_step(kind: str, value: str) -> ScenarioStep:
    from exporter import whatif_report as report  # noqa: PLC0415
    from exporter.engine import whatif  # noqa: PLC0415

    if kind == "lose-zone":
        return whatif.LoseZone(value)
    if kind == "lose-node":
        return whatif.LoseNodes((value,))
    return report.parse_scale(value)


def _print_json(document: object) -> None:
    # msgspec's encoder: the stdlib's indenting encoder is pure Python and takes seconds
    # on a 10,000-Service document.
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_garbage_collector()
    runners = {
        "evaluate": _run_evaluate,
        "explain": _run_explain,
        "what-if": _run_what_if,
        "serve": _run_serve,
    }
    try:
        return runners[args.command](args)
    except (SnapshotError, CommandError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    except BrokenPipeError:
        # `... | head` closed the pipe: not an error worth a traceback.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
