"""The `topology-hints-exporter` command line: evaluate, explain, serve."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from exporter import __version__
from exporter.document import evaluation_document, service_document
from exporter.snapshot import SnapshotError, load_snapshot

PROG = "topology-hints-exporter"
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure to report as one line on stderr with exit code 2."""


def _add_snapshot_argument(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        required=required,
        help="a Kubernetes List of Nodes, Services and EndpointSlices (JSON or YAML); - for stdin",
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
    return parser


def _run_evaluate(args: argparse.Namespace) -> int:
    evaluation = load_snapshot(args.snapshot).evaluate()
    json.dump(evaluation_document(evaluation), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _run_explain(args: argparse.Namespace) -> int:
    from exporter.explain import ExplainOptions, explain_text, select_verdicts  # noqa: PLC0415

    evaluation = load_snapshot(args.snapshot).evaluate()
    try:
        verdicts = select_verdicts(evaluation, args.service)
    except LookupError as error:
        raise CommandError(str(error.args[0])) from None
    if args.output == "json":
        document = [service_document(verdict) for verdict in verdicts]
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    sys.stdout.write(explain_text(evaluation, verdicts, ExplainOptions(color=color)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runners = {"evaluate": _run_evaluate, "explain": _run_explain}
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
