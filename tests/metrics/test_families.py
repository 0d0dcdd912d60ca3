"""The family table: one declaration per family, named constants, scopes and samplers."""

from __future__ import annotations

from exporter.metrics import families
from exporter.metrics.collector import HintsCollector
from exporter.metrics.families import FAMILIES, HINT_FAMILIES
from exporter.metrics.family import (
    PREFIX,
    Family,
    MetricType,
    PerScrape,
    PerService,
    Scope,
    constant_name,
)
from exporter.state.result import ClusterResult


def test_every_family_is_a_constant_named_after_its_metric() -> None:
    """`families.ZONE_LOAD_FACTOR` is topology_hints_zone_load_factor; no family is left out."""
    constants = {name: value for name, value in vars(families).items() if isinstance(value, Family)}
    assert {name: family.name for name, family in constants.items()} == {
        constant_name(family): family.name for family in FAMILIES
    }
    assert families.ZONE_LOAD_FACTOR.name == "topology_hints_zone_load_factor"
    assert families.SERVICE_EXPECTED_ENABLED.name == "topology_hints_service_expected_enabled"
    assert families.WATCH_UP.name == "topology_hints_watch_up"


def test_names_are_unique_prefixed_and_typed_by_suffix() -> None:
    """Names are unique, carry the prefix, and counters (only they) end in _total."""
    names = [family.name for family in FAMILIES]
    assert len(set(names)) == len(names)
    for family in FAMILIES:
        assert family.name.startswith(PREFIX)
        assert family.name.endswith("_total") == (family.type is MetricType.COUNTER), family.name


def test_labels_start_with_the_scope_identity() -> None:
    """A Service entry family starts with namespace, service, address_type, and so on."""
    for family in FAMILIES:
        identity = family.scope.identity_labels
        assert family.labels[: len(identity)] == identity, family.name
        assert len(set(family.labels)) == len(family.labels), family.name


def test_every_hint_family_has_a_sampler_and_only_exporter_families_lack_one() -> None:
    """The six families the old table lacked samplers for now have one."""
    for family in FAMILIES:
        assert (family.samples is None) == (family.scope is Scope.EXPORTER), family.name
    assert tuple(f for f in FAMILIES if f.scope is not Scope.EXPORTER) == HINT_FAMILIES
    for family in (
        families.SERVICE_PROXY_NODES,
        families.SERVICE_INFO,
        families.SERVICE_CONFIG_ISSUE,
    ):
        assert isinstance(family.samples, PerService), family.name
    for family in (
        families.NODE_PROXY_SERVICES,
        families.SERVICE_LAST_EVENT_TIMESTAMP_SECONDS,
        families.CONTROLLER_EVENTS_TOTAL,
    ):
        assert isinstance(family.samples, PerScrape), family.name


def test_collector_describes_the_hint_families_in_table_order() -> None:
    """The prometheus_client collector lists the table's hint families in the table's order."""
    collector = HintsCollector(ClusterResult, ready=lambda: True)
    described = [metric.name for metric in collector.describe()]
    assert described == [family.name.removesuffix("_total") for family in HINT_FAMILIES]
