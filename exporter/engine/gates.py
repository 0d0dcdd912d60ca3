"""behaviour §12: the feature gates the rules read, as data.

One table gives each gate's versioned specs as upstream declares them
(`pkg/features/kube_features.go`: from which minor each default, stage and lock applies) and
the minor that removed it. Everything else reads the table by name: whether a component of a
version knows a gate, the gate's default and stage there, whether it is locked, and what the
feature does where the gate does not exist (off before it was added, on after it was removed:
the code no longer asks). A new gate is one more row, never a new boolean.

Emulation follows component-base's featuregate: a binary knows the gates of its own version;
their specs are read at the emulated version, and a gate whose first spec is newer than the
emulated version is not available there (PreAlpha: not listed, cannot be set).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.versions import ProfileError, shown


class Gate(StrEnum):
    """The gates the rules read, in the order they are reported."""

    TOPOLOGY_AWARE_HINTS = "TopologyAwareHints"
    SERVICE_TRAFFIC_DISTRIBUTION = "ServiceTrafficDistribution"
    PREFER_SAME_TRAFFIC_DISTRIBUTION = "PreferSameTrafficDistribution"


class Stage(StrEnum):
    """A gate's maturity, as the components' own `kubernetes_feature_enabled` labels it."""

    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = "GA"

    @property
    def label(self) -> str:
        """The `stage` label of `kubernetes_feature_enabled`: component-base's GA prerelease
        is the empty string, so a GA gate's series carries `stage=""` there (and ours)."""
        return "" if self is Stage.GA else self.value


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """One versioned spec: from `since` on (until the next spec), the gate is this."""

    since: int
    default: bool
    stage: Stage
    locked: bool = False


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One gate's history: its versioned specs (ascending) and the minor that removed it."""

    gate: Gate
    specs: tuple[FeatureSpec, ...]
    # The first minor whose components no longer know the gate; None: still known.
    removed_in: int | None = None

    @property
    def added_in(self) -> int:
        return self.specs[0].since

    @property
    def on_by_default_from(self) -> int:
        return next(spec.since for spec in self.specs if spec.default)

    @property
    def locked_from(self) -> int | None:
        return next((spec.since for spec in self.specs if spec.locked), None)

    def known_to(self, binary: int) -> bool:
        """A component binary of this minor has the gate (recognises it in --feature-gates)."""
        return self.added_in <= binary and (self.removed_in is None or binary < self.removed_in)

    def at(self, minor: int) -> FeatureSpec | None:
        """The spec in force at `minor` (the emulated version); None before the first."""
        found = None
        for spec in self.specs:
            if spec.since <= minor:
                found = spec
        return found

    def without_gate(self, binary: int) -> bool:
        """What the feature is in a binary that does not know the gate: on once removed."""
        return self.removed_in is not None and binary >= self.removed_in


_ALPHA, _BETA, _GA = Stage.ALPHA, Stage.BETA, Stage.GA

# kubernetes v1.37.2 pkg/features/kube_features.go (PreferSameTrafficDistribution), and the
# same file of 1.35 for the two gates 1.36 removed (kubernetes PR 136112).
GATES: Mapping[Gate, GateSpec] = MappingProxyType(
    {
        Gate.TOPOLOGY_AWARE_HINTS: GateSpec(
            Gate.TOPOLOGY_AWARE_HINTS,
            (
                FeatureSpec(21, default=False, stage=_ALPHA),
                FeatureSpec(23, default=False, stage=_BETA),
                FeatureSpec(24, default=True, stage=_BETA),
                FeatureSpec(33, default=True, stage=_GA, locked=True),
            ),
            removed_in=36,
        ),
        Gate.SERVICE_TRAFFIC_DISTRIBUTION: GateSpec(
            Gate.SERVICE_TRAFFIC_DISTRIBUTION,
            (
                FeatureSpec(30, default=False, stage=_ALPHA),
                FeatureSpec(31, default=True, stage=_BETA),
                FeatureSpec(33, default=True, stage=_GA, locked=True),
            ),
            removed_in=36,
        ),
        Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: GateSpec(
            Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION,
            (
                FeatureSpec(33, default=False, stage=_ALPHA),
                FeatureSpec(34, default=True, stage=_BETA),
                FeatureSpec(35, default=True, stage=_GA, locked=True),
            ),
        ),
    }
)

# strconv.ParseBool, which the components' --feature-gates uses.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_gates(text: str) -> Mapping[Gate, bool]:
    """`Name=BOOL[,...]` as component-base's featuregate reads it; later settings win.

    ProfileError for the syntax it refuses, and for a gate the rules do not read (a
    component may know it, but nothing here would change).
    """
    gates: dict[Gate, bool] = {}
    for item in text.split(","):
        if not item:
            continue
        name, equals, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not equals:
            raise ProfileError(f"--feature-gates: missing bool value for {shown(name)}")
        if value not in _TRUE | _FALSE:
            raise ProfileError(
                f"--feature-gates: invalid value of {shown(name)}={shown(value)} "
                "(expected true or false)"
            )
        if name not in Gate.__members__.values():
            raise ProfileError(
                f"--feature-gates: {shown(name)} is not a gate the rules read (they read "
                + ", ".join(Gate)
                + ")"
            )
        gates[Gate(name)] = value in _TRUE
    return MappingProxyType(gates)
