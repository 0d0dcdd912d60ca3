"""What the commands share: their names, bad-input error, and the arguments and flags
more than one command reads (input, scope, data planes, Kubernetes profile, the gate)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.gates import GATES, Gate, parse_gates
from exporter.engine.problems import PROBLEM_ORDER, ProblemId
from exporter.engine.profile import (
    Profile,
    ProfileError,
    ProfileFlags,
)
from exporter.engine.versions import NEWEST_MINOR, OLDEST_MINOR, ServerVersion, parse_version
from exporter.report.overview import (
    ALL_PROBLEMS,
)
from exporter.sources.quantity import parse_quantity
from exporter.sources.snapshot_input import DEFAULT_MAX_INPUT_BYTES

PROG = "topology-hints-exporter"
# The console script kubectl finds as the plugin `kubectl topology-hints`.
KUBECTL_PLUGIN = "kubectl-topology_hints"
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure to report as one line on stderr with exit code 2."""


# A number flag's value: ASCII digits with at most one point, no sign, exponent, `_`, `inf` or
# `nan` (each of which float() or int() would take), and not so long that it means nothing.
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)
_COUNT = re.compile(r"[0-9]{1,9}", re.ASCII)
MAX_NUMBER_LENGTH = 32


def parse_number(text: str, flag: str, example: str) -> float:
    """A number flag: a finite decimal, 0 or more, in ASCII digits; CommandError otherwise.

    Every fractional number flag reads through this one function. `-0`, `1_000`, `1e308`,
    `inf`, `nan`, `+1` and other scripts' digits (`\\u0661`) are refused, not read as numbers."""
    if len(text) > MAX_NUMBER_LENGTH or _DECIMAL.fullmatch(text) is None:
        raise CommandError(
            f"{flag} must be a decimal number, 0 or more, in ASCII digits "
            f"(e.g. {example}), got {text!r}"
        )
    return float(text)


def parse_count(text: str, flag: str, *, minimum: int = 0) -> int:
    """A whole-number flag: ASCII digits, at least `minimum`; CommandError otherwise."""
    if _COUNT.fullmatch(text) is None or int(text) < minimum:
        raise CommandError(f"{flag} must be a whole number, {minimum} or more, got {text!r}")
    return int(text)


def byte_count(text: str) -> int:
    try:
        value = parse_quantity(text)
    except ValueError:
        value = None
    if value is None or value < 1 or value.denominator != 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes, e.g. 512Mi")
    return int(value)


def add_snapshot_argument(
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
        type=byte_count,
        default=DEFAULT_MAX_INPUT_BYTES,
        help="refuse a larger snapshot (default 1Gi; a quantity such as 512Mi or a number)",
    )


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """A snapshot file, or the cluster itself (read once, like kubectl get)."""
    source = parser.add_argument_group(
        "input (default: the cluster of the current kubeconfig context, or in-cluster config)"
    )
    add_snapshot_argument(source, required=False)
    source.add_argument(
        "--kubeconfig", metavar="PATH", help="read the cluster of this kubeconfig file"
    )
    source.add_argument("--context", metavar="NAME", help="kubeconfig context to use")


def add_scope_arguments(explain: argparse.ArgumentParser) -> None:
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
        default="any",
        help="problems that make the exit status 1 (default: any; 'none' never fails): "
        + ", ".join(PROBLEM_ORDER),
    )


FAIL_ON_WORDS = ("any", "none")


def parse_fail_on(value: str) -> frozenset[ProblemId]:
    """`--fail-on`: comma-separated problem ids, or `any` (every one) or `none` alone."""
    ids = list(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if ids == ["any"]:
        return ALL_PROBLEMS
    if ids == ["none"]:
        return frozenset()
    words = [word for word in FAIL_ON_WORDS if word in ids]
    if words:
        # Known words, but not in a list: `any,none` would mean both every problem and none.
        raise CommandError(
            f"--fail-on {' and '.join(words)} cannot be listed with other ids: give any, "
            f"none, or problem ids (got {value!r})"
        )
    known = {str(problem): problem for problem in ProblemId}
    unknown = [problem for problem in ids if problem not in known]
    if unknown or not ids:
        raise CommandError(
            f"unknown problem {', '.join(map(repr, unknown)) or repr(value)} "
            f"(choose from any, none, {', '.join(PROBLEM_ORDER)})"
        )
    return frozenset(known[problem] for problem in ids)


def add_dataplane_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--dataplane",
        action="append",
        metavar="ID[,ID]",
        help="data planes whose routing to compute (behaviour §10; default kube-proxy): "
        + ", ".join(DataPlane)
        + "; serve also takes auto (detect from kube-system, docs/dataplanes.md)",
    )


def _gate_help(gate: Gate) -> str:
    spec = GATES[gate]
    last = f"-1.{spec.removed_in - 1}" if spec.removed_in is not None else "+"
    return f"{gate} (1.{spec.added_in}{last})"


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """behaviour §12: the Kubernetes versions and gates to evaluate under."""
    profile = parser.add_argument_group(
        "Kubernetes profile (default: the API server's /version when reading a cluster, "
        "else the newest semantics)"
    )
    profile.add_argument(
        "--kubernetes-version",
        metavar="1.MINOR",
        help="the control plane's version, emulated or not, e.g. 1.33 (supported: "
        f"1.{OLDEST_MINOR}-1.{NEWEST_MINOR}; others are evaluated at the nearer end)",
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
        help="override the gate defaults of each component whose version has the gate, as "
        "their own flag does: " + ", ".join(_gate_help(gate) for gate in Gate),
    )


def parse_profile_flags(
    args: argparse.Namespace, *, kube_proxy_detected: bool = False
) -> ProfileFlags:
    """The profile flags, checked as far as they go alone; CommandError on a bad one.

    An empty version is refused, not taken for "none given". `kube_proxy_detected`: serve
    may learn kube-proxy's version from its DaemonSet (then the gates are checked at start).
    """
    try:
        flags = ProfileFlags(
            kubernetes_minor=(
                parse_version(args.kubernetes_version)
                if args.kubernetes_version is not None
                else None
            ),
            kube_proxy_minor=(
                parse_version(args.kube_proxy_version, "--kube-proxy-version")
                if args.kube_proxy_version is not None
                else None
            ),
            gates=parse_gates(",".join(args.feature_gates or ())),
        )
        # With the control plane's version given, a setting its components refuse is
        # refused now, before reading anything; otherwise once the version is known.
        if flags.kubernetes_minor is not None and (
            flags.kube_proxy_minor is not None or not kube_proxy_detected
        ):
            flags.profile()
    except ProfileError as error:
        raise CommandError(str(error)) from None
    return flags


def profile_of(flags: ProfileFlags, server: ServerVersion | None) -> Profile:
    try:
        return flags.profile(server)
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
