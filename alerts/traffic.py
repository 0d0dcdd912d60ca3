"""Measured traffic, normalised, and what the expected cross-zone share costs (SPEC section 13).

Three kinds of recording groups, shipped in the alerts' rule file and the mixin:

- one group per traffic source, each turning that source's byte counters into the one shape
  `topology_hints:service_bytes:rate5m{cluster, namespace, service, zone, locality}` (bytes per
  second, both directions, `zone` the client's zone where the source knows it, `locality`
  `same-zone`, `cross-zone` or `unknown`). A source is switched off in `MonitoringConfig`
  (`istio_ztunnel_traffic`, `linkerd_traffic`; the mixin's `_config`), and users of the plain
  rule file drop its group (docs/traffic.md);
- one group of answers built from that shape and the exporter's cross-zone families: the
  measured cross-zone share per Service, the expected one next to it, and the avoidable bytes
  and cost per hour and per day.

Every aggregation keeps the cluster label. The rules name no traffic source's scrape job: the
metric names and their labels select them (docs/traffic.md says how to narrow them).
"""

from __future__ import annotations

from typing import Any

from exporter.metrics import families as f
from exporter.metrics.monitoring import MonitoringConfig

ISTIO_GROUP = "topology-hints-traffic-istio"
LINKERD_GROUP = "topology-hints-traffic-linkerd"
CROSS_ZONE_GROUP = "topology-hints-cross-zone"
# Each source group and the MonitoringConfig switch that includes it.
SOURCE_SWITCHES = {ISTIO_GROUP: "istio_ztunnel_traffic", LINKERD_GROUP: "linkerd_traffic"}

# The normalised shape every source records.
SERVICE_BYTES = "topology_hints:service_bytes:rate5m"
# Istio's intermediate: bytes per (Service, client zone `source_zone`, server zone
# `destination_zone`), read by the Istio group's locality rules only.
ZONE_PAIR_BYTES = "topology_hints:service_zone_pair_bytes:rate5m"
SAME_ZONE, CROSS_ZONE, UNKNOWN = "same-zone", "cross-zone", "unknown"
LOCALITIES = (SAME_ZONE, CROSS_ZONE, UNKNOWN)
ATTRIBUTED = f'locality=~"{SAME_ZONE}|{CROSS_ZONE}"'
# The answers.
MEASURED_SHARE = "topology_hints:service_cross_zone_bytes:ratio_rate5m"
MEASURED_ZONE_SHARE = "topology_hints:service_zone_cross_zone_bytes:ratio_rate5m"
EXPECTED_SHARE = "topology_hints:service_cross_zone_ratio:max"
EXPECTED_ZONE_SHARE = "topology_hints:service_zone_cross_zone_ratio:max"
AVOIDABLE_BYTES_RATE = "topology_hints:service_avoidable_cross_zone_bytes:rate5m"
AVOIDABLE_BYTES_PER_HOUR = "topology_hints:service_avoidable_cross_zone_bytes:per_hour"
AVOIDABLE_BYTES_PER_DAY = "topology_hints:service_avoidable_cross_zone_bytes:per_day"
AVOIDABLE_COST_PER_HOUR = "topology_hints:service_avoidable_cross_zone_cost:per_hour"
AVOIDABLE_COST_PER_DAY = "topology_hints:service_avoidable_cross_zone_cost:per_day"
# `basis`: the avoidable share is `effective - floor` (the model's) or `measured - floor`.
BASES = ("expected", "measured")
SCENARIOS = ("effective", "floor")
# Labels these rules add (the dashboards select and group on them); `scenario` is the
# cross-zone family's own.
RULE_LABELS = frozenset({"locality", "basis", "scenario"})

RATE_WINDOW = "5m"
GIB = 2**30


def _both(c: MonitoringConfig, sent: str, received: str, matchers: str, by: tuple[str, ...]) -> str:
    """Bytes per second of both counters, summed by `by` (and the cluster label). rate() drops
    the names, so each side gets a `counter` label first: the two never collide."""
    return (
        f"sum by {c.labels(*by)} (\n"
        f'    label_replace(rate({sent}{{{matchers}}}[{RATE_WINDOW}]), "counter", "sent", "", "")\n'
        f"  or\n"
        f'    label_replace(rate({received}{{{matchers}}}[{RATE_WINDOW}]), "counter", "received",'
        ' "", "")\n'
        f"  )"
    )


def _rename(expr: str, renames: dict[str, str]) -> str:
    """`expr` with each label of `renames` copied to its new name."""
    for new, old in renames.items():
        expr = f'label_replace({expr}, "{new}", "$1", "{old}", "(.*)")'
    return expr


# --- Istio ambient: ztunnel ------------------------------------------------------------------
ZTUNNEL_SENT = "istio_tcp_sent_bytes_total"
ZTUNNEL_RECEIVED = "istio_tcp_received_bytes_total"
ZTUNNEL_SERVICE = {
    "namespace": "destination_service_namespace",
    "service": "destination_service_name",
}
# The destination's ztunnel reports every connection, from the mesh or not (a source ztunnel
# reports the same bytes again); traffic to no Service (a pod IP) is no Service's.
ZTUNNEL_MATCHERS = 'reporter="destination", destination_service_name!~"|unknown"'
# Clients outside the mesh have no known zone: their bytes are `unknown`, never counted in a share.
UNKNOWN_SOURCE = 'source_zone=~"|unknown"'
KNOWN_SOURCE = 'source_zone!~"|unknown"'


def istio_rules(c: MonitoringConfig) -> list[dict[str, Any]]:
    # The counters are read once, into one series per (Service, client zone, server zone); the
    # locality rules then read that small set.
    pairs = _rename(
        _both(
            c,
            ZTUNNEL_SENT,
            ZTUNNEL_RECEIVED,
            ZTUNNEL_MATCHERS,
            (*ZTUNNEL_SERVICE.values(), "source_zone", "destination_zone"),
        ),
        ZTUNNEL_SERVICE,
    )
    keep = c.labels("namespace", "service", "source_zone", "destination_zone")
    known = f"{ZONE_PAIR_BYTES}{{{KNOWN_SOURCE}}}"
    by_client = f'label_replace({known}, "zone", "$1", "source_zone", "(.+)")'
    by_server = f'label_replace({known}, "zone", "$1", "destination_zone", "(.+)")'
    # PromQL cannot compare two labels; a one-to-one match can: the pair with `zone` set from
    # the client matches the pair with `zone` set from the server exactly where they are equal.
    # A server without a zone (ztunnel's "unknown") is another zone (section 13).
    rules: list[dict[str, Any]] = [
        {"record": ZONE_PAIR_BYTES, "expr": f"sum by {keep} (\n  {pairs}\n)\n"}
    ]
    rules += [
        {
            "record": SERVICE_BYTES,
            "expr": (
                f"sum by {c.labels('namespace', 'service', 'zone')} (\n"
                f"  {by_client}\n  {operator}\n  {by_server}\n)\n"
            ),
            "labels": {"locality": locality},
        }
        for locality, operator in ((SAME_ZONE, "and"), (CROSS_ZONE, "unless"))
    ]
    rules.append(
        {
            "record": SERVICE_BYTES,
            "expr": (
                f"sum by {c.labels('namespace', 'service')} "
                f"({ZONE_PAIR_BYTES}{{{UNKNOWN_SOURCE}}})\n"
            ),
            "labels": {"locality": UNKNOWN},
        }
    )
    return rules


# --- Linkerd 2.17+ ----------------------------------------------------------------------------
LINKERD_SENT = "tcp_write_bytes_total"
LINKERD_RECEIVED = "tcp_read_bytes_total"
LINKERD_SERVICE = {"namespace": "dst_namespace", "service": "dst_service"}
# The client's proxy labels each endpoint's bytes by the endpoint's zone relative to the
# client's node (the destination controller's `zone_locality`); it does not say which zone the
# client is in, so Linkerd's series carry no `zone`.
LINKERD_LOCALITIES = {"local": SAME_ZONE, "remote": CROSS_ZONE, "unknown|": UNKNOWN}
# peer="dst": the proxy's connection to the endpoint (as linkerd viz reads it), not the
# application's connection to the proxy, which carries the same bytes.
LINKERD_MATCHERS = 'direction="outbound", peer="dst", dst_service!=""'


def linkerd_rules(c: MonitoringConfig) -> list[dict[str, Any]]:
    expr = _both(
        c,
        LINKERD_SENT,
        LINKERD_RECEIVED,
        LINKERD_MATCHERS,
        ("dst_namespace", "dst_service", "dst_zone_locality"),
    )
    for value, locality in LINKERD_LOCALITIES.items():
        expr = (
            f'label_replace(\n  {expr},\n  "locality", "{locality}", "dst_zone_locality", '
            f'"{value}"\n)'
        )
    return [
        {
            "record": SERVICE_BYTES,
            "expr": (
                f"sum by {c.labels('namespace', 'service', 'locality')} (\n"
                + _rename(expr, LINKERD_SERVICE)
                + "\n)\n"
            ),
        }
    ]


# --- The answers ------------------------------------------------------------------------------
def _share(c: MonitoringConfig, *by: str) -> str:
    """Cross-zone bytes over attributed bytes, 0 (not absent) for a Service without any; per
    `by` label, over the series that have it."""
    labels = c.labels("namespace", "service", *by)
    having = "".join(f', {label}!=""' for label in by)
    return (
        f'(\n  sum by {labels} ({SERVICE_BYTES}{{locality="{CROSS_ZONE}"{having}}})\n'
        f'  or\n  0 * sum by {labels} ({SERVICE_BYTES}{{locality="{SAME_ZONE}"{having}}})\n)\n'
        f"/\n(sum by {labels} ({SERVICE_BYTES}{{{ATTRIBUTED}{having}}}) > 0)\n"
    )


def attributed_bytes(c: MonitoringConfig) -> str:
    """A Service's bytes per second whose locality is known."""
    return f"sum by {c.labels('namespace', 'service')} ({SERVICE_BYTES}{{{ATTRIBUTED}}})"


def answer_rules(c: MonitoringConfig) -> list[dict[str, Any]]:
    service = c.labels("namespace", "service")
    # Over address types and data planes: with one --dataplane, that data plane's share.
    expected = f'{EXPECTED_SHARE}{{scenario="%s"}}'
    avoidable = {
        "expected": (
            f"{attributed_bytes(c)}\n"
            f"* on {service}\n"
            f"(\n  {expected % 'effective'}\n  - ignoring (scenario)\n  {expected % 'floor'}\n)\n"
        ),
        "measured": (
            f"{attributed_bytes(c)}\n"
            f"* on {service}\n"
            f"clamp_min(\n  {MEASURED_SHARE}\n  - on {service}\n  {expected % 'floor'},\n  0\n)\n"
        ),
    }
    price = f"max by {c.labels()} ({c.series(f.CROSS_ZONE_PRICE_PER_GIB.name)})"
    rules: list[dict[str, Any]] = [
        {"record": MEASURED_SHARE, "expr": _share(c)},
        {"record": MEASURED_ZONE_SHARE, "expr": _share(c, "zone")},
        {
            "record": EXPECTED_SHARE,
            "expr": (
                f"max by {c.labels('namespace', 'service', 'scenario')} "
                f"({c.series(f.SERVICE_CROSS_ZONE_RATIO.name)})\n"
            ),
        },
        {
            "record": EXPECTED_ZONE_SHARE,
            "expr": (
                f"max by {c.labels('namespace', 'service', 'zone')} "
                f"({c.series(f.SERVICE_ZONE_CROSS_ZONE_RATIO.name)})\n"
            ),
        },
    ]
    rules += [
        {"record": AVOIDABLE_BYTES_RATE, "expr": avoidable[basis], "labels": {"basis": basis}}
        for basis in BASES
    ]
    for (bytes_name, cost_name), seconds in zip(
        ((AVOIDABLE_BYTES_PER_HOUR, AVOIDABLE_COST_PER_HOUR),
         (AVOIDABLE_BYTES_PER_DAY, AVOIDABLE_COST_PER_DAY)),
        (3600, 86400),
        strict=True,
    ):  # fmt: skip
        rules += [
            {"record": bytes_name, "expr": f"{AVOIDABLE_BYTES_RATE} * {seconds}\n"},
            {
                "record": cost_name,
                "expr": (
                    f"{AVOIDABLE_BYTES_RATE} * {seconds} / {GIB}\n"
                    f"* on {c.labels()} group_left ()\n{price}\n"
                ),
            },
        ]
    return rules


def traffic_groups(c: MonitoringConfig) -> list[dict[str, Any]]:
    """The enabled sources' groups, then the answers."""
    sources = {ISTIO_GROUP: istio_rules, LINKERD_GROUP: linkerd_rules}
    groups = [
        {"name": name, "rules": build(c)}
        for name, build in sources.items()
        if getattr(c, SOURCE_SWITCHES[name])
    ]
    groups.append({"name": CROSS_ZONE_GROUP, "rules": answer_rules(c)})
    return groups
