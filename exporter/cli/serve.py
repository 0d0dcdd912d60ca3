"""The `serve` command: its flags (spelled as kube-state-metrics and the exporter toolkit
spell them), their checks, and the options the live exporter starts with."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.run.serve import ServeOptions

from exporter.cli.arguments import (
    CommandError,
    add_dataplane_argument,
    add_profile_arguments,
    add_snapshot_argument,
    parse_count,
    parse_dataplanes,
    parse_number,
    parse_profile_flags,
)


def add_serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_snapshot_argument(source, required=False)
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
        "--total-shards", default="1", metavar="N", help="number of shards (default 1)"
    )
    add_dataplane_argument(scope)
    add_profile_arguments(serve)
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


def serve_options(args: argparse.Namespace) -> ServeOptions:
    from exporter.http.server import parse_listen_address  # noqa: PLC0415
    from exporter.run.serve import ServeOptions, resolve_shard, split_list  # noqa: PLC0415
    from exporter.sources.informer import InformerSettings  # noqa: PLC0415
    from exporter.web.links import parse_external_url  # noqa: PLC0415

    if args.kubeconfig and args.snapshot:
        raise CommandError("--snapshot and --kubeconfig are exclusive: serve one source")
    if args.metric_allowlist and args.metric_denylist:
        raise CommandError("--metric-allowlist and --metric-denylist are exclusive")
    _check_tls_flags(args)
    total_shards = parse_count(args.total_shards, "--total-shards", minimum=1)
    dataplane_ids = _dataplane_ids(args.dataplane)
    if AUTO_DATAPLANE in dataplane_ids and args.snapshot is not None:
        # Detection reads kube-system's DaemonSets: a snapshot has none to read.
        raise CommandError(
            "--dataplane auto detects the data planes of a cluster, not of a --snapshot: "
            "name them (e.g. --dataplane kube-proxy)"
        )
    try:
        shard = (
            resolve_shard("auto") if args.shard == "auto" else parse_count(args.shard, "--shard")
        )
        parse_listen_address(args.listen_address)
        external_url = parse_external_url(args.external_url) if args.external_url else None
        allow, deny = split_list(args.metric_allowlist), split_list(args.metric_denylist)
        for pattern in (*allow, *deny):
            re.compile(pattern)
    except re.error as error:
        raise CommandError(f"bad metric regular expression {error.pattern!r}: {error}") from None
    except ValueError as error:
        raise CommandError(str(error)) from None
    if not 0 <= shard < total_shards:
        raise CommandError(f"shard {shard} is outside 0..{total_shards - 1}")
    profile_flags = parse_profile_flags(
        args,
        kube_proxy_detected=AUTO_DATAPLANE in dataplane_ids and args.snapshot is None,
    )
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
        total_shards=total_shards,
        log_level=args.log_level,
        log_format=args.log_format,
        dataplanes=parse_dataplanes(_without_auto(args.dataplane)),
        detect_dataplanes=AUTO_DATAPLANE in dataplane_ids,
        informer=InformerSettings(use_apiserver_cache=args.use_apiserver_cache),
        profile_flags=profile_flags,
        cross_zone_price_per_gib=price,
    )


def _price(value: str | None) -> float | None:
    """--cross-zone-price-per-gib: a finite number, 0 or more; None when not given."""
    if value is None:
        return None
    return parse_number(value, "--cross-zone-price-per-gib", "0.01")


# `serve --dataplane auto`: detect the data planes at start (the other ids are the fallback).
AUTO_DATAPLANE = "auto"


def _dataplane_ids(values: Sequence[str] | None) -> list[str]:
    return [value for group in values or () for value in group.split(",") if value]


def _without_auto(values: Sequence[str] | None) -> list[str]:
    return [value for value in _dataplane_ids(values) if value != AUTO_DATAPLANE]


def run_serve(args: argparse.Namespace) -> int:
    from exporter.http.webconfig import WebConfigError  # noqa: PLC0415
    from exporter.run import serve  # noqa: PLC0415
    from exporter.sources.kubeapi import ConfigError  # noqa: PLC0415

    options = serve_options(args)
    try:
        return serve.run(options)
    except (ConfigError, WebConfigError) as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(
            f"cannot serve on {options.listen_address}: {error.strerror or error}"
        ) from None
