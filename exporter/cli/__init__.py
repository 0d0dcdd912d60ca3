"""The `topology-hints-exporter` command line: evaluate, explain, what-if and serve.

The parser and the one-shot commands live here; the arguments several commands share are in
`arguments`, the `serve` command's flags and options in `serve`."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from exporter import __version__
from exporter.cli.arguments import (
    EXIT_USAGE,
    KUBECTL_PLUGIN,
    PROG,
    CommandError,
    add_dataplane_argument,
    add_input_arguments,
    add_profile_arguments,
    add_scope_arguments,
    parse_dataplanes,
    parse_fail_on,
    parse_profile_flags,
    profile_of,
)
from exporter.cli.serve import add_serve_parser, run_serve
from exporter.engine.profile import (
    Profile,
)
from exporter.engine.whatif.scenario import MAX_SCENARIO_COUNT
from exporter.report.document import formatted_evaluation_document, service_document
from exporter.report.overview import (
    SERVICE_KIND,
    entries_status,
    missing_error,
    missing_kinds,
    missing_warnings,
    select,
    summary_document,
    summary_text,
    with_problems,
)
from exporter.run.oneshot import evaluate_snapshot
from exporter.runtime import tune_garbage_collector
from exporter.sources.snapshot import Snapshot, load_snapshot
from exporter.sources.snapshot_input import SnapshotError
from exporter.terminal import json_printable, printable

if TYPE_CHECKING:
    from exporter.engine.whatif.scenario import ScenarioStep

# `serve` and its sources (the `kubernetes` client, prometheus_client) are imported by the
# commands that need them only: evaluate and explain on a snapshot start in a fraction of
# the time without them.


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
    add_input_arguments(evaluate)
    add_dataplane_argument(evaluate)
    add_profile_arguments(evaluate)

    explain = commands.add_parser(
        "explain", help="explain the verdicts for a snapshot or a cluster, Service by Service"
    )
    add_input_arguments(explain)
    add_dataplane_argument(explain)
    add_profile_arguments(explain)
    add_scope_arguments(explain)
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
    add_serve_parser(commands)
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
    add_input_arguments(what_if)
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
    add_profile_arguments(what_if)
    what_if.set_defaults(steps=[])


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
        return snapshot, missing, "the snapshot", profile_of(flags, None)
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
    return listed.snapshot, missing, "the cluster", profile_of(flags, listed.server_version)


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
    # The document shows no forecast: none is made.
    result = evaluate_snapshot(snapshot, dataplanes, profile, forecasts=False)
    # Written piece by piece: the whole document would be the command's peak memory.
    document = formatted_evaluation_document(result)
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
    fail_on = parse_fail_on(args.fail_on)
    namespace, name = _scope(args)
    snapshot, missing, where, profile = _read_input(args)
    result = evaluate_snapshot(snapshot, dataplanes, profile)
    try:
        verdicts = select(result, namespace, name)
    except LookupError as error:
        raise CommandError(f"{error.args[0]} in {where}") from None
    if namespace is not None and not verdicts and SERVICE_KIND not in missing:
        _check_namespace(snapshot, namespace, where)
    if args.output == "json":
        # Text output carries the warnings itself; JSON must stay JSON.
        for warning in missing_warnings(missing):
            _warn(warning)
    status = entries_status(result, verdicts, missing, fail_on)
    if args.summary or args.output == "wide":
        if args.output == "json":
            _print_json(
                summary_document(
                    result, verdicts, missing, only_problems=args.problems, fail_on=fail_on
                )
            )
        else:
            wide = args.output == "wide"
            text = summary_text(result, verdicts, missing, only_problems=args.problems, wide=wide)
            sys.stdout.write(printable(text))
        return status
    scope = f" in namespace {namespace}" if namespace is not None else ""
    nothing = f"No Service with EndpointSlices{scope} in {where}."
    if args.problems:
        nothing = f"No Service with a problem among the {len(verdicts)} checked{scope}."
        verdicts = with_problems(result, verdicts)
    if args.output == "json":
        _print_json([service_document(verdict, result.problems(verdict)) for verdict in verdicts])
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
    from exporter.engine.whatif.scenario import ScenarioError  # noqa: PLC0415
    from exporter.report import whatif as report  # noqa: PLC0415
    from exporter.report.explain import ExplainOptions  # noqa: PLC0415
    from exporter.run.oneshot import what_if_snapshot  # noqa: PLC0415

    if (args.max_surge or args.max_unavailable) and not args.rollout:
        raise CommandError("--max-surge and --max-unavailable describe a --rollout")
    snapshot, missing, _where, profile = _read_input(args)
    if missing:
        # Every answer needs all three kinds (zone shares, Services, their endpoints): exit 2
        # with explain's sentence rather than answer from what is not there.
        raise CommandError(missing_error(missing))
    for note in profile.notes():
        _warn(note)
    try:
        steps = [_scenario_step(kind, value) for kind, value in args.steps]
        result = what_if_snapshot(snapshot, steps, profile)
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
        "serve": run_serve,
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
