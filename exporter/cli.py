"""The `topology-hints-exporter` command line: evaluate, explain, serve."""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from exporter import __version__
from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.problems import PROBLEM_ORDER, ProblemId
from exporter.engine.profile import (
    Gate,
    Profile,
    ProfileError,
    ProfileFlags,
    parse_gates,
    parse_minor,
)
from exporter.engine.whatif.scenario import MAX_SCENARIO_COUNT
from exporter.live.oneshot import evaluate_snapshot
from exporter.report.document import formatted_evaluation_document, service_document
from exporter.report.overview import (
    ALL_PROBLEMS,
    NODES,
    SERVICES,
    exit_status,
    missing_error,
    missing_kinds,
    missing_warnings,
    select,
    summary_document,
    summary_text,
    with_problems,
)
from exporter.runtime import tune_garbage_collector
from exporter.sources.quantity import parse_quantity
from exporter.sources.snapshot import Snapshot, load_snapshot
from exporter.sources.snapshot_input import DEFAULT_MAX_INPUT_BYTES, SnapshotError
from exporter.terminal import json_printable, printable

if TYPE_CHECKING:
    from exporter.engine.whatif.scenario import ScenarioStep
    from exporter.live.serve import ServeOptions

# `serve` and its sources (the `kubernetes` client, prometheus_client) are imported by the
# commands that need them only: evaluate and explain on a snapshot start in a fraction of
# the time without them.

PROG = "topology-hints-exporter"
# The console script kubectl finds as the plugin `kubectl topology-hints`.
KUBECTL_PLUGIN = "kubectl-topology_hints"
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


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """A snapshot file, or the cluster itself (read once, like kubectl get)."""
    source = parser.add_argument_group(
        "input (default: the cluster of the current kubeconfig context, or in-cluster config)"
    )
    _add_snapshot_argument(source, required=False)
    source.add_argument(
        "--kubeconfig", metavar="PATH", help="read the cluster of this kubeconfig file"
    )
    source.add_argument("--context", metavar="NAME", help="kubeconfig context to use")


def _add_scope_arguments(explain: argparse.ArgumentParser) -> None:
    explain.add_argument(
        "service",
        nargs="?",
        metavar="[NAMESPACE/]NAME",
        help="only this Service (NAME: in the namespace of -n, default 'default')",
    )
    explain.add_argument("-n", "--namespace", metavar="NAMESPACE", help="only this namespace")
    explain.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (the default without -n; overrides -n, as in kubectl)",
    )
    explain.add_argument(
        "--summary", action="store_true", help="one line per Service, problems first, and counts"
    )
    explain.add_argument(
        "--problems",
        action="store_true",
        help="only the entries with a problem: " + ", ".join(PROBLEM_ORDER),
    )
    explain.add_argument(
        "--fail-on",
        metavar="ID[,ID]",
        type=parse_fail_on,
        default=ALL_PROBLEMS,
        help="problems that make the exit status 1 (default: any; 'none' never fails): "
        + ", ".join(PROBLEM_ORDER),
    )


def parse_fail_on(value: str) -> frozenset[ProblemId]:
    """`--fail-on`: comma-separated problem ids, `any` (every one) or `none`."""
    ids = [part.strip() for part in value.split(",") if part.strip()]
    if ids == ["any"]:
        return ALL_PROBLEMS
    if ids == ["none"]:
        return frozenset()
    known = {str(problem): problem for problem in ProblemId}
    unknown = [problem for problem in ids if problem not in known]
    if unknown or not ids:
        raise argparse.ArgumentTypeError(
            f"unknown problem {', '.join(map(repr, unknown)) or repr(value)} "
            f"(choose from any, none, {', '.join(PROBLEM_ORDER)})"
        )
    return frozenset(known[problem] for problem in ids)


def _add_dataplane_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--dataplane",
        action="append",
        metavar="ID[,ID]",
        help="data planes whose routing to compute (behaviour §10; default kube-proxy): "
        + ", ".join(DataPlane)
        + "; serve also takes auto (detect from kube-system, docs/dataplanes.md)",
    )


def _add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """behaviour §12: the Kubernetes versions and gates to evaluate under."""
    profile = parser.add_argument_group(
        "Kubernetes profile (default: the API server's /version when reading a cluster, "
        "else the newest semantics)"
    )
    profile.add_argument(
        "--kubernetes-version",
        metavar="1.MINOR",
        help="the control plane's version, e.g. 1.33 (older than 1.29 is evaluated as 1.29)",
    )
    profile.add_argument(
        "--kube-proxy-version",
        metavar="1.MINOR",
        help="kube-proxy's version when it lags the control plane (default: the control "
        "plane's, or the kube-proxy DaemonSet's image tag with serve --dataplane auto)",
    )
    profile.add_argument(
        "--feature-gates",
        action="append",
        metavar="NAME=BOOL[,...]",
        help="override both components' gate defaults, as their own flag does: "
        + ", ".join(f"{gate}=true|false" for gate in Gate),
    )


def parse_profile_flags(args: argparse.Namespace) -> ProfileFlags:
    """The profile flags, checked as far as they go alone; CommandError on a bad one."""
    try:
        flags = ProfileFlags(
            kubernetes_minor=(
                parse_minor(args.kubernetes_version) if args.kubernetes_version else None
            ),
            kube_proxy_minor=(
                parse_minor(args.kube_proxy_version, "--kube-proxy-version")
                if args.kube_proxy_version
                else None
            ),
            gates=parse_gates(",".join(args.feature_gates or ())),
        )
        # A gate locked by the flags' own versions is refused now, before reading anything.
        flags.profile()
    except ProfileError as error:
        raise CommandError(str(error)) from None
    return flags


def _profile(flags: ProfileFlags, server_minor: int | None) -> Profile:
    try:
        return flags.profile(server_minor)
    except ProfileError as error:
        raise CommandError(str(error)) from None


def parse_dataplanes(values: Sequence[str] | None) -> tuple[DataPlane, ...]:
    """The --dataplane ids in the order given, each once; CommandError names the valid ones."""
    ids = [value for group in values or () for value in group.split(",") if value]
    if not ids:
        return DEFAULT_DATAPLANES
    unknown = [value for value in ids if value not in DataPlane.__members__.values()]
    if unknown:
        raise CommandError(
            f"unknown --dataplane {unknown[0]!r}: valid ids are {', '.join(DataPlane)}"
        )
    return tuple(dict.fromkeys(DataPlane(value) for value in ids))


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Tells whether Kubernetes topology-aware routing works, and why not.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    evaluate = commands.add_parser(
        "evaluate", help="print the verdicts for a snapshot or a cluster as one JSON document"
    )
    _add_input_arguments(evaluate)
    _add_dataplane_argument(evaluate)
    _add_profile_arguments(evaluate)

    explain = commands.add_parser(
        "explain", help="explain the verdicts for a snapshot or a cluster, Service by Service"
    )
    _add_input_arguments(explain)
    _add_dataplane_argument(explain)
    _add_profile_arguments(explain)
    _add_scope_arguments(explain)
    explain.add_argument(
        "--output",
        "-o",
        choices=("text", "json", "wide"),
        default="text",
        help="text (default), json, or wide (the --summary table with more columns)",
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
    _add_input_arguments(what_if)
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
        help="set the Service's ready endpoints to N, at most "
        f"{MAX_SCENARIO_COUNT:,} (repeatable; steps apply in order)",
    )
    what_if.add_argument(
        "--rollout",
        metavar="NAMESPACE/NAME",
        help="check a rolling update of this Service's workload after the steps",
    )
    what_if.add_argument(
        "--max-surge",
        metavar="S",
        help="the rollout's maxSurge: a count or a percentage (25%%), "
        f"at most {MAX_SCENARIO_COUNT:,} endpoints",
    )
    what_if.add_argument(
        "--max-unavailable",
        metavar="U",
        help="the rollout's maxUnavailable: a count or a percentage (25%%), "
        f"at most {MAX_SCENARIO_COUNT:,} endpoints",
    )
    what_if.add_argument(
        "--all", action="store_true", help="also print the Services that do not change"
    )
    what_if.add_argument(
        "--output", "-o", choices=("text", "json"), default="text", help="text (default) or json"
    )
    _add_profile_arguments(what_if)
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
    source.add_argument(
        "--use-apiserver-cache",
        type=_flag_value,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="list from the API server's watch cache (resourceVersion=0) rather than with "
        "consistent reads from etcd (default true; =false for consistent reads)",
    )
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
    http.add_argument(
        "--external-url",
        metavar="URL",
        help="the URL users reach the exporter at (behind a proxy: with its path); "
        "the status page's links are built from it",
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
    _add_dataplane_argument(scope)
    _add_profile_arguments(serve)
    scope.add_argument(
        "--cross-zone-price-per-gib",
        metavar="PRICE",
        help="price of one GiB of cross-zone traffic (e.g. 0.01), exported as "
        "topology_hints_cross_zone_price_per_gib for cost queries (default: not exported)",
    )
    logs = serve.add_argument_group("logging")
    logs.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    logs.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="json (default when stdout is not a terminal) or console",
    )


def _flag_value(value: str) -> bool:
    """A boolean flag's value as Go's flag package (and kube-state-metrics) spells it."""
    spelled = value.strip().lower()
    if spelled in {"1", "t", "true"}:
        return True
    if spelled in {"0", "f", "false"}:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {value!r}: use true or false")


def _check_tls_flags(args: argparse.Namespace) -> None:
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CommandError("--tls-cert-file and --tls-key-file go together")
    if args.tls_client_ca_file and not args.tls_cert_file:
        raise CommandError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
    if args.web_config_file and args.tls_cert_file:
        raise CommandError("--web.config.file and --tls-cert-file are exclusive: use one")


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    from exporter.http.server import parse_listen_address  # noqa: PLC0415
    from exporter.live.serve import ServeOptions, resolve_shard, split_list  # noqa: PLC0415
    from exporter.sources.informer import InformerSettings  # noqa: PLC0415
    from exporter.web.links import parse_external_url  # noqa: PLC0415

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
        external_url = parse_external_url(args.external_url) if args.external_url else None
        allow, deny = split_list(args.metric_allowlist), split_list(args.metric_denylist)
        for pattern in (*allow, *deny):
            re.compile(pattern)
    except re.error as error:
        raise CommandError(f"bad metric regular expression {error.pattern!r}: {error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    if not 0 <= shard < args.total_shards:
        raise CommandError(f"shard {shard} is outside 0..{args.total_shards - 1}")
    profile_flags = parse_profile_flags(args)
    price = _price(args.cross_zone_price_per_gib)
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
        external_url=external_url,
        shard=shard,
        total_shards=args.total_shards,
        log_level=args.log_level,
        log_format=args.log_format,
        dataplanes=parse_dataplanes(_without_auto(args.dataplane)),
        detect_dataplanes=AUTO_DATAPLANE in _dataplane_ids(args.dataplane),
        informer=InformerSettings(use_apiserver_cache=args.use_apiserver_cache),
        profile_flags=profile_flags,
        cross_zone_price_per_gib=price,
    )


def _price(value: str | None) -> float | None:
    """--cross-zone-price-per-gib: a finite number, 0 or more; None when not given."""
    if value is None:
        return None
    try:
        price = float(value)
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise CommandError(
            f"--cross-zone-price-per-gib must be a number, 0 or more (e.g. 0.01), got {value!r}"
        )
    return price


# `serve --dataplane auto`: detect the data planes at start (the other ids are the fallback).
AUTO_DATAPLANE = "auto"


def _dataplane_ids(values: Sequence[str] | None) -> list[str]:
    return [value for group in values or () for value in group.split(",") if value]


def _without_auto(values: Sequence[str] | None) -> list[str]:
    return [value for value in _dataplane_ids(values) if value != AUTO_DATAPLANE]


def _run_serve(args: argparse.Namespace) -> int:
    from exporter.http.webconfig import WebConfigError  # noqa: PLC0415
    from exporter.live import serve  # noqa: PLC0415
    from exporter.sources.kubeapi import ConfigError  # noqa: PLC0415

    options = _serve_options(args)
    try:
        return serve.run(options)
    except (ConfigError, WebConfigError) as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(
            f"cannot serve on {options.listen_address}: {error.strerror or error}"
        ) from None


def _read_input(args: argparse.Namespace) -> tuple[Snapshot, dict[str, str], str, Profile]:
    """The snapshot, or the cluster listed now; kinds it lacks and why; where it came from;
    and the Kubernetes profile to evaluate it under (behaviour §12)."""
    flags = parse_profile_flags(args)
    if args.snapshot is not None:
        if args.kubeconfig or args.context:
            raise CommandError("--snapshot and --kubeconfig/--context are exclusive: read one")
        snapshot = load_snapshot(args.snapshot, args.max_input_bytes)
        missing = {
            kind: f"the snapshot holds no {kind} (kubectl get nodes,services,endpointslices "
            "-A -o json dumps all three)"
            for kind in _missing_kinds(snapshot)
        }
        return snapshot, missing, "the snapshot", _profile(flags, None)
    from exporter.sources.kubeapi import ConfigError  # noqa: PLC0415
    from exporter.sources.listing import ClusterReadError, read_cluster  # noqa: PLC0415

    try:
        listed = read_cluster(args.kubeconfig, args.context)
    except ConfigError as error:
        raise CommandError(f"{error} (or pass --snapshot FILE)") from None
    except ClusterReadError as error:
        raise CommandError(str(error)) from None
    for skipped in listed.skipped:
        _warn(f"skipped an object that does not decode: {skipped}")
    missing = dict(listed.unreadable)
    for kind in _missing_kinds(listed.snapshot):
        missing.setdefault(kind, f"the cluster returned no {kind}")
    if listed.version_problem and flags.kubernetes_minor is None:
        _warn(
            f"{listed.version_problem}: evaluating with the newest semantics "
            "(pass --kubernetes-version)"
        )
    return listed.snapshot, missing, "the cluster", _profile(flags, listed.server_minor)


def _missing_kinds(snapshot: Snapshot) -> list[str]:
    return missing_kinds(len(snapshot.nodes), len(snapshot.services), len(snapshot.endpoint_slices))


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {printable(message, newlines=False)}", file=sys.stderr)  # noqa: T201


def _run_evaluate(args: argparse.Namespace) -> int:
    dataplanes = parse_dataplanes(args.dataplane)
    snapshot, missing, _where, profile = _read_input(args)
    for warning in missing_warnings(missing):
        _warn(warning)
    for note in profile.notes():
        _warn(note)
    result = evaluate_snapshot(snapshot, dataplanes, profile)
    # Written piece by piece: the whole document would be the command's peak memory.
    document = formatted_evaluation_document(result, nodes_known=NODES not in missing)
    sys.stdout.buffer.writelines(map(json_printable, document))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()
    return 0


def _scope(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(namespace or None for all, name or None for all) as kubectl reads -n, -A and NAME."""
    namespace = None if args.all_namespaces else args.namespace
    if namespace == "":
        raise CommandError("-n/--namespace needs a namespace name")
    service: str | None = args.service
    if service is None:
        return namespace, None
    if "/" in service:
        service_namespace, _, name = service.partition("/")
        if not service_namespace or not name or "/" in name:
            raise CommandError(f"expected NAME or NAMESPACE/NAME, got {service!r}")
        if namespace is not None and namespace != service_namespace:
            raise CommandError(f"{service} is not in namespace {namespace} (given by -n)")
        return service_namespace, name
    if args.all_namespaces:
        raise CommandError(
            "a Service cannot be named across all namespaces (-A): use -n NAMESPACE NAME "
            "or NAMESPACE/NAME"
        )
    if namespace is None:
        from exporter.sources.kubeapi import default_namespace  # noqa: PLC0415

        namespace = (
            "default"
            if args.snapshot is not None
            else default_namespace(args.kubeconfig, args.context)
        )
    return namespace, service


def _check_namespace(snapshot: Snapshot, namespace: str, where: str) -> None:
    """A namespace without a single Service is bad input, not a pass: `-n shpo` in a CI
    gate would otherwise pass for ever (kubectl says "No resources found" and exits 0)."""
    known = {service.namespace for service in snapshot.services}
    if namespace in known:
        return
    close = difflib.get_close_matches(namespace, sorted(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise CommandError(f"no Service in namespace {namespace} in {where}{hint}")


def _run_explain(args: argparse.Namespace) -> int:
    from exporter.report.explain import ExplainOptions, explain_text  # noqa: PLC0415

    dataplanes = parse_dataplanes(args.dataplane)
    namespace, name = _scope(args)
    snapshot, missing, where, profile = _read_input(args)
    result = evaluate_snapshot(snapshot, dataplanes, profile)
    try:
        verdicts = select(result, namespace, name)
    except LookupError as error:
        raise CommandError(f"{error.args[0]} in {where}") from None
    if namespace is not None and not verdicts and SERVICES not in missing:
        _check_namespace(snapshot, namespace, where)
    if args.output == "json":
        # Text output carries the warnings itself; JSON must stay JSON.
        for warning in missing_warnings(missing):
            _warn(warning)
    status = exit_status(verdicts, missing, args.fail_on)
    nodes_known = NODES not in missing
    if args.summary or args.output == "wide":
        if args.output == "json":
            _print_json(
                summary_document(
                    verdicts, missing, only_problems=args.problems, fail_on=args.fail_on
                )
            )
        else:
            wide = args.output == "wide"
            text = summary_text(verdicts, missing, only_problems=args.problems, wide=wide)
            sys.stdout.write(printable(text))
        return status
    scope = f" in namespace {namespace}" if namespace is not None else ""
    nothing = f"No Service with EndpointSlices{scope} in {where}."
    if args.problems:
        nothing = f"No Service with a problem among the {len(verdicts)} checked{scope}."
        verdicts = with_problems(verdicts, nodes_known=nodes_known)
    if args.output == "json":
        _print_json([service_document(verdict, nodes_known=nodes_known) for verdict in verdicts])
        return status
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    options = ExplainOptions(
        color=color,
        missing=missing,
        zone_loss=None if missing else result.zone_loss(),
        zone_loss_skipped=result.zone_loss_skipped,
    )
    sys.stdout.write(printable(explain_text(result, verdicts, options, nothing), colour=color))
    return status


def _run_what_if(args: argparse.Namespace) -> int:
    from exporter.engine.whatif.outcome import what_if  # noqa: PLC0415
    from exporter.engine.whatif.scenario import Cluster, ScenarioError  # noqa: PLC0415
    from exporter.report import whatif as report  # noqa: PLC0415
    from exporter.report.explain import ExplainOptions  # noqa: PLC0415

    if (args.max_surge or args.max_unavailable) and not args.rollout:
        raise CommandError("--max-surge and --max-unavailable describe a --rollout")
    snapshot, missing, _where, profile = _read_input(args)
    if missing:
        # Every answer needs all three kinds (zone shares, Services, their endpoints): exit 2
        # with explain's sentence rather than answer from what is not there.
        raise CommandError(missing_error(missing))
    for note in profile.notes():
        _warn(note)
    cluster = Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices, profile=profile)
    try:
        steps = [_scenario_step(kind, value) for kind, value in args.steps]
        result = what_if(cluster, steps)
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
    except ScenarioError as error:
        raise CommandError(str(error)) from None
    if args.output == "json":
        _print_json(report.what_if_document(result, rollouts, show_all=args.all))
    else:
        text = report.what_if_text(result, rollouts, ExplainOptions(color=False), show_all=args.all)
        sys.stdout.write(printable(text))
    return report.exit_status(result, rollouts)


def _scenario_step(kind: str, value: str) -> ScenarioStep:
    from exporter.engine.whatif.scenario import LoseNodes, LoseZone  # noqa: PLC0415
    from exporter.report import whatif as report  # noqa: PLC0415

    if kind == "lose-zone":
        return LoseZone(value)
    if kind == "lose-node":
        return LoseNodes((value,))
    return report.parse_scale(value)


def _print_json(document: object) -> None:
    # msgspec's encoder: the stdlib's indenting encoder is pure Python and takes seconds
    # on a 10,000-Service document.
    encoded = msgspec.json.format(msgspec.json.encode(document), indent=2)
    sys.stdout.buffer.write(json_printable(encoded) + b"\n")
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    # Run as a kubectl plugin (`kubectl topology-hints ...`), usage lines say so.
    invoked_as = Path(sys.argv[0]).name
    prog = "kubectl topology-hints" if invoked_as == KUBECTL_PLUGIN else PROG
    args = build_parser(prog).parse_args(argv)
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
        print(f"{PROG}: error: {printable(str(error), newlines=False)}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE
    except BrokenPipeError:
        # `... | head` closed the pipe: not an error worth a traceback.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
