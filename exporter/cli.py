"""The `topology-hints-exporter` command line: evaluate, explain, serve."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

import msgspec

from exporter import __version__, serve
from exporter.document import evaluation_document, service_document
from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.runtime import tune_garbage_collector
from exporter.serve import ServeOptions, resolve_shard, split_list
from exporter.server import parse_listen_address
from exporter.snapshot import SnapshotError, load_snapshot
from exporter.sources.kubeapi import ConfigError

PROG = "topology-hints-exporter"
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure to report as one line on stderr with exit code 2."""


def _add_snapshot_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, required: bool
) -> None:
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        required=required,
        help="a Kubernetes List of Nodes, Services and EndpointSlices (JSON or YAML); - for stdin",
    )


def _add_dataplane_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--dataplane",
        action="append",
        metavar="ID[,ID]",
        help="data planes whose routing to compute (SPEC section 10; default kube-proxy): "
        + ", ".join(DataPlane),
    )


def parse_dataplanes(values: Sequence[str] | None) -> tuple[DataPlane, ...]:
    """The --dataplane ids in the order given, each once; CommandError names the valid ones."""
    ids = split_list(values)
    if not ids:
        return DEFAULT_DATAPLANES
    unknown = [value for value in ids if value not in DataPlane.__members__.values()]
    if unknown:
        raise CommandError(
            f"unknown --dataplane {unknown[0]!r}: valid ids are {', '.join(DataPlane)}"
        )
    return tuple(dict.fromkeys(DataPlane(value) for value in ids))


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
    _add_dataplane_argument(evaluate)

    explain = commands.add_parser(
        "explain", help="explain the verdicts for a snapshot, Service by Service"
    )
    _add_snapshot_argument(explain, required=True)
    _add_dataplane_argument(explain)
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
    _add_serve_parser(commands)
    return parser


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
        metavar="HOST:PORT",
        default=":9808",
        help="address to serve on (default :9808, every interface)",
    )
    http.add_argument("--tls-cert-file", metavar="PATH", help="serve HTTPS with this certificate")
    http.add_argument("--tls-key-file", metavar="PATH", help="private key for --tls-cert-file")
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
    _add_dataplane_argument(scope)
    logs = serve.add_argument_group("logging")
    logs.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    logs.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="json (default when stdout is not a terminal) or console",
    )


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    if args.kubeconfig and args.snapshot:
        raise CommandError("--snapshot and --kubeconfig are exclusive: serve one source")
    if args.metric_allowlist and args.metric_denylist:
        raise CommandError("--metric-allowlist and --metric-denylist are exclusive")
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CommandError("--tls-cert-file and --tls-key-file go together")
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
        kubeconfig=args.kubeconfig,
        context=args.context,
        all_services=args.all_services,
        namespaces=split_list(args.namespaces),
        namespaces_exclude=split_list(args.namespaces_exclude),
        metric_allowlist=allow,
        metric_denylist=deny,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        shard=shard,
        total_shards=args.total_shards,
        log_level=args.log_level,
        log_format=args.log_format,
        dataplanes=parse_dataplanes(args.dataplane),
    )


def _run_serve(args: argparse.Namespace) -> int:
    options = _serve_options(args)
    try:
        return serve.run(options)
    except ConfigError as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(
            f"cannot serve on {options.listen_address}: {error.strerror or error}"
        ) from None


def _run_evaluate(args: argparse.Namespace) -> int:
    dataplanes = parse_dataplanes(args.dataplane)
    evaluation = load_snapshot(args.snapshot).evaluate(dataplanes)
    _print_json(evaluation_document(evaluation))
    return 0


def _run_explain(args: argparse.Namespace) -> int:
    from exporter.explain import ExplainOptions, explain_text, select_verdicts  # noqa: PLC0415

    dataplanes = parse_dataplanes(args.dataplane)
    evaluation = load_snapshot(args.snapshot).evaluate(dataplanes)
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


def _print_json(document: object) -> None:
    # msgspec's encoder: the stdlib's indenting encoder is pure Python and takes seconds
    # on a 10,000-Service document.
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_garbage_collector()
    runners = {"evaluate": _run_evaluate, "explain": _run_explain, "serve": _run_serve}
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
