"""`serve`: sources -> store -> evaluator -> collector -> HTTP, and a clean stop."""

from __future__ import annotations

import gc
import hashlib
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from exporter import __version__
from exporter.engine import DEFAULT_DATAPLANES, DataPlane
from exporter.engine.profile import ProfileFlags
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.http.auth import BasicAuth
from exporter.http.routes import default_routes, make_app
from exporter.http.server import MetricsServer
from exporter.http.slots import ScrapeCosts
from exporter.http.webconfig import WebConfig, load_web_config, tls_from_flags
from exporter.logs import LogFormat, configure_logging
from exporter.metrics.collector import (
    ExportOptions,
    FamilyFilter,
    FilteringCollector,
    HintsCollector,
)
from exporter.metrics.endpoint import MetricsEndpoint
from exporter.metrics.escaped import EscapedRenderer
from exporter.metrics.exposition import ExpositionRenderer
from exporter.metrics.families import SAME_ON_EVERY_SHARD
from exporter.metrics.instruments import RESOURCES, ExporterMetrics, StatusCollector
from exporter.pipeline.evaluator import Evaluator
from exporter.run.profile import ProfileReader, flags_profile
from exporter.run.readiness import ago, describe_watch_failure
from exporter.runtime import pause_collector, release_free_memory, resume_collector
from exporter.sources.cluster import ENDPOINT_SLICES, EVENTS, NODES, SERVICES, sinks
from exporter.sources.dataplanes import FLAG, detect_dataplanes
from exporter.sources.informer import Informer, InformerSettings
from exporter.sources.kubeapi import ConfigError, KubeTransport, api_client
from exporter.sources.snapshot import load_snapshot
from exporter.sources.snapshot_input import DEFAULT_MAX_INPUT_BYTES
from exporter.state.store import ClusterStore
from exporter.vocabulary import EventTypeLabel, Resource, RestartCause
from exporter.web.app import StatusPages
from exporter.web.render import WatchHealth

logger = structlog.get_logger("exporter")

# ASCII digits: \d would read "exporter-\u0661" as ordinal 1.
SHARD_FROM_POD_NAME = re.compile(r"-([0-9]{1,9})$")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Everything `serve` was asked for on its command line, resolved to values."""

    listen_address: str = ":9808"
    snapshot: str | None = None
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    kubeconfig: str | None = None
    context: str | None = None
    all_services: bool = False
    namespaces: tuple[str, ...] = ()
    namespaces_exclude: tuple[str, ...] = ()
    metric_allowlist: tuple[str, ...] = ()
    metric_denylist: tuple[str, ...] = ()
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # Mutual TLS: only clients with a certificate signed by this CA are served.
    tls_client_ca_file: str | None = None
    # exporter-toolkit's web configuration (TLS, basic auth); exclusive with the tls flags.
    web_config_file: str | None = None
    # Where users reach the exporter (behind a proxy, with its path): the pages' links.
    external_url: str | None = None
    shard: int = 0
    total_shards: int = 1
    log_level: str = "info"
    log_format: LogFormat | None = None
    informer: InformerSettings = field(default_factory=InformerSettings)
    # behaviour §10: the data planes whose routing the live state carries.
    dataplanes: tuple[DataPlane, ...] = DEFAULT_DATAPLANES
    # behaviour §13: exported as topology_hints_cross_zone_price_per_gib when given.
    cross_zone_price_per_gib: float | None = None
    # --dataplane auto: detect them from kube-system at start, `dataplanes` the fallback.
    detect_dataplanes: bool = False
    # behaviour §12: --kubernetes-version, --kube-proxy-version and --feature-gates.
    profile_flags: ProfileFlags = field(default_factory=ProfileFlags)


def shard_of(namespace: str, name: str, total_shards: int) -> int:
    """A stable shard for a Service: the same in every process and every release."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % total_shards


def shard_from_pod_name(pod_name: str) -> int:
    """A StatefulSet pod's ordinal, as kube-state-metrics derives its shard."""
    match = SHARD_FROM_POD_NAME.search(pod_name)
    if match is None:
        raise ValueError(f"cannot derive a shard ordinal from pod name {pod_name!r}")
    return int(match.group(1))


def service_filter(options: ServeOptions) -> Callable[[str, str], bool]:
    included = frozenset(options.namespaces)
    excluded = frozenset(options.namespaces_exclude)

    def accepts(namespace: str, name: str) -> bool:
        if included and namespace not in included:
            return False
        if namespace in excluded:
            return False
        return options.total_shards <= 1 or (
            shard_of(namespace, name, options.total_shards) == options.shard
        )

    return accepts


def _dataplanes(
    options: ServeOptions, transport: KubeTransport | None
) -> tuple[tuple[DataPlane, ...], str, int | None]:
    """The data planes to evaluate, where they came from (flag, or detected at start), and
    kube-proxy's minor version when detection read it."""
    if not options.detect_dataplanes or transport is None:
        return options.dataplanes, FLAG, None
    return detect_dataplanes(transport, options.informer.timeouts, options.dataplanes)


# The event of the line `serve` logs once its first evaluation is published, just before
# /readyz says ready (the benchmark times a start to it).
READY_EVENT = "ready"

# The longest a start keeps the cyclic collector paused (see `run`): a start that has not
# published its first evaluation by then waits on the API server, not on decoding, and
# whatever cyclic garbage its retries and probes leave must be collected.
COLLECTOR_PAUSE_LIMIT = 60.0


class Exporter:
    """The running exporter; `start()` returns once the HTTP server listens.

    `collector_paused`: the caller paused the cyclic collector (`pause_collector`); the
    exporter resumes it once its first evaluation is published, or COLLECTOR_PAUSE_LIMIT
    seconds after `start()` at the latest.
    """

    def __init__(self, options: ServeOptions, *, collector_paused: bool = False) -> None:
        self.options = options
        self._collector_paused = collector_paused
        # The whole configuration is read before the port is bound (at the end): a broken
        # web configuration, kubeconfig or snapshot is reported as itself, never as a
        # conflict with whatever else holds the port.
        web = self._web_config()
        tls = web.tls.context() if web.tls is not None else None
        self._transport: KubeTransport | None = None
        if options.snapshot is None:
            self._transport = KubeTransport(api_client(options.kubeconfig, options.context))
        self.store = ClusterStore(accepts_service=service_filter(options))
        dataplanes, source, kube_proxy_minor = _dataplanes(options, self._transport)
        # _created series double every counter's cardinality and no alert or dashboard uses
        # them (kube-state-metrics does not expose them either).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        own = CollectorRegistry(auto_describe=False)
        self.metrics = ExporterMetrics(
            own,
            version=__version__,
            shard=options.shard,
            total_shards=options.total_shards,
            # A snapshot has no watches: no watch_up series rather than a false "down".
            resources=() if options.snapshot is not None else RESOURCES,
            dataplanes=((str(dataplane), source) for dataplane in dataplanes),
            external_url=options.external_url,
            cross_zone_price_per_gib=options.cross_zone_price_per_gib,
        )
        self.evaluator = Evaluator(
            self.store,
            observe=self.metrics.evaluation,
            dataplanes=dataplanes,
            # The flags alone; a live exporter adds the API server's /version at start and
            # at each list, and checks the gate settings against it then (not before: the
            # version they are checked against is the server's).
            profile=flags_profile(
                options.profile_flags,
                kube_proxy_minor,
                lenient=self._transport is not None
                and options.profile_flags.kubernetes_minor is None,
            ),
        )
        # Flips are counted from the state /readyz first serves (published_as_ready).
        self.evaluator.count_flips_once_ready()
        self._profiles = ProfileReader(
            options.profile_flags, kube_proxy_minor, self.evaluator, options.informer.timeouts
        )
        for note in self.evaluator.profile.notes():
            logger.warning(note)
        self._stop = threading.Event()
        self._ready = threading.Event()
        # Set once the informers run (after /version is read, off the probes' path).
        self._informing = threading.Event()
        # What stopped the exporter at start (a gate the server's version refuses): raised
        # by wait(), so serve exits 2 with its one line.
        self._fatal: ConfigError | None = None
        self._threads: list[threading.Thread] = []
        # Threads that end by design (the start-up one): not a liveness failure.
        self._finite: list[threading.Thread] = []
        # Held while informers are created, so that stop() sees every one of them.
        self._informers_lock = threading.Lock()
        self._started_at = time.time()
        # resource -> when it stopped being readable (wall clock, shown by /readyz).
        self._down_since: dict[str, float] = {}
        self.informers: list[Informer[Any, Any]] = []
        family_filter = FamilyFilter(
            options.metric_allowlist,
            options.metric_denylist,
            # One copy of the Node-only families per sharded install: shard 0's.
            withheld=SAME_ON_EVERY_SHARD if options.shard != 0 else (),
        )
        export = ExportOptions(all_services=options.all_services)
        hints = HintsCollector(
            lambda: self.evaluator.state, ready=self._ready.is_set, options=export
        )
        status = StatusCollector(
            self.store.counts, lambda: self.evaluator.state, self._ready.is_set
        )
        ProcessCollector(registry=own)
        # The exporter's own figures, rendered by prometheus_client on each scrape (small).
        own_filtered = CollectorRegistry(auto_describe=False)
        own_collectors: tuple[Collector, ...] = (status, own)
        for collector in own_collectors:
            own_filtered.register(FilteringCollector(collector, family_filter))
        # Everything through prometheus_client, for `name[]`-filtered scrapes: registering
        # reads each collector's describe(), which name[] filtering relies on.
        self.registry = CollectorRegistry(auto_describe=True)
        filtered_hints = FilteringCollector(hints, family_filter)
        self.registry.register(filtered_hints)
        for collector in own_collectors:
            self.registry.register(FilteringCollector(collector, family_filter))
        self.renderer = ExpositionRenderer(
            lambda: self.evaluator.state,
            ready=self._ready.is_set,
            options=export,
            family_filter=family_filter,
        )
        # Each published state names the Services it changed: the renderer updates only those.
        self.evaluator.add_listener(self.renderer.observe)
        escaped = EscapedRenderer(
            filtered_hints, lambda: self.evaluator.state, ready=self._ready.is_set
        )
        metrics = MetricsEndpoint(self.renderer, own_filtered, self.registry, escaped)
        self.pages = StatusPages(
            lambda: self.evaluator.state,
            readiness=self.readiness,
            watches=self.watch_health,
            # The file's name, not its path: the page answers anyone who reaches the port,
            # and folders name users and layouts (docs/cli.md, the status page).
            source=f"snapshot {Path(options.snapshot).name}"
            if options.snapshot
            else "Kubernetes API",
            external_url=options.external_url,
            shard=options.shard,
            total_shards=options.total_shards,
        )
        self.routes = default_routes(metrics, ready=self.readiness, healthy=self.liveness)
        # The status pages answer every path the table does not name: /, /services/...,
        # /api/v1/... and their static files.
        self.routes["/*"] = self.pages
        if options.snapshot is not None:
            self._load_snapshot(options.snapshot)
        self.server = MetricsServer(
            make_app(self.routes),
            options.listen_address,
            tls=tls,
            headers=web.headers,
            costs=ScrapeCosts(expensive=metrics.expensive, prepared=metrics.prepared),
            auth=BasicAuth(web.basic_auth_users) if web.basic_auth_users else None,
        )

    def _web_config(self) -> WebConfig:
        """TLS and auth settings; an unusable one raises WebConfigError (one line)."""
        options = self.options
        if options.web_config_file is not None:
            return load_web_config(options.web_config_file)
        return WebConfig(
            tls=tls_from_flags(
                options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file
            )
        )

    # -- probes ------------------------------------------------------------------------------

    def readiness(self) -> tuple[bool, str]:
        """What is wrong, since when and what to check, for people.

        Never a library's exception text, a host, a URL or an identity: the probe answers
        anyone who can reach the port. The details are in the log.
        """
        now = time.time()
        troubled = [
            describe_watch_failure(informer.spec.resource, informer.problem, self._down_since, now)
            for informer in self.informers
            if informer.problem is not None
        ]
        if self._ready.is_set():
            if not troubled:
                return True, "ready"
            return True, "ready, but some data cannot be read:\n" + "\n".join(troubled)
        listing = [
            informer.spec.resource
            for informer in self.informers
            if informer.spec.required and not informer.synced.is_set() and informer.problem is None
        ]
        lines = [*troubled]
        if listing:
            lines.append(
                f"- {', '.join(listing)}: reading the first complete list from the API server "
                f"(started {ago(self._started_at, now)})"
            )
        if self._transport is not None and not self._informing.is_set():
            lines.append(
                "- reading the API server's /version before listing "
                f"(started {ago(self._started_at, now)})"
            )
        if not lines:
            lines.append("- evaluating the first snapshot")
        return False, "not ready:\n" + "\n".join(lines)

    def watch_health(self) -> tuple[WatchHealth, ...]:
        """Each watch's state in words, for the status page."""
        health = []
        for informer in self.informers:
            synced = informer.synced.is_set()
            if informer.problem is not None:
                # The same words as /readyz: never the library's text, hosts or URLs.
                words = describe_watch_failure(
                    informer.spec.resource, informer.problem, self._down_since, time.time()
                ).removeprefix(f"- {informer.spec.resource}: ")
                tone = "warn" if synced else "bad"
            else:
                words, tone = ("watching", "good") if synced else ("listing", "warn")
            health.append(WatchHealth(informer.spec.resource, words, tone))
        return tuple(health)

    def liveness(self) -> tuple[bool, str]:
        dead = [thread.name for thread in self._threads if not thread.is_alive()]
        if dead and not self._stop.is_set():
            return False, "stopped threads: " + ", ".join(dead)
        return True, "ok"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        # The probes are served from the start: nothing read from the API server (its
        # /version first) stands before them.
        self.server.start()
        if self._transport is not None:
            transport = self._transport
            starting = threading.Thread(
                target=lambda: self._start_informers(transport), name="start-up", daemon=True
            )
            self._finite.append(starting)
            starting.start()
        else:
            self._informing.set()
        self._spawn("evaluator", self._evaluate_loop)
        logger.info(
            "serving",
            url=self.server.url,
            source=self.options.snapshot or "kubernetes api",
            shard=self.options.shard,
            total_shards=self.options.total_shards,
        )

    def stop(self) -> None:
        self._stop.set()
        with self._informers_lock:
            for informer in self.informers:
                informer.stop()
        self.server.stop()
        # One deadline for all: a thread blocked in a request that stop() cannot cut (a
        # connect, a stalled response) must not hold SIGTERM for 5 s per thread.
        deadline = time.monotonic() + 2
        for thread in (*self._finite, *self._threads):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._transport is not None:
            self._transport.close()

    def wait(self) -> None:
        """Until a stop is requested; raises what stopped the exporter at start, if anything."""
        self._stop.wait()
        if self._fatal is not None:
            raise self._fatal

    def request_stop(self) -> None:
        self._stop.set()

    # -- internals ---------------------------------------------------------------------------

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        # Started before it is listed: the probes run meanwhile (informers are spawned after
        # /version is read), and a listed thread that is not alive is a liveness failure.
        thread.start()
        self._threads.append(thread)

    def _load_snapshot(self, source: str) -> None:
        load_snapshot(source, self.options.max_input_bytes).write_to(self.store)

    def _start_informers(self, transport: KubeTransport) -> None:
        """/version, then the informers: in its own thread, off the probes' path."""
        try:
            self._profiles.read(transport, lenient=False)
        except ConfigError as error:
            self._fatal = error
            self.request_stop()
            return
        except Exception:
            # The flags' profile stands; the informers must start all the same.
            logger.exception("reading the Kubernetes version failed")
        with self._informers_lock:
            if not self._stop.is_set():
                self._spawn_informers(transport)

    def _spawn_informers(self, transport: KubeTransport) -> None:
        resource_sinks = sinks(self.store)
        resource_sinks[NODES.resource] = self._profiles.relisting(
            resource_sinks[NODES.resource], transport
        )
        for spec in (NODES, SERVICES, ENDPOINT_SLICES, EVENTS):
            informer: Informer[Any, Any] = Informer(
                spec,
                transport,
                resource_sinks[spec.resource],
                _DownSince(self.metrics, self._down_since),
                self.options.informer,
            )
            self.informers.append(informer)
            self._spawn(f"informer-{spec.resource}", informer.run)
        self._informing.set()

    def _synced(self) -> bool:
        return self._informing.is_set() and all(
            informer.synced.is_set() for informer in self.informers if informer.spec.required
        )

    def _evaluate_loop(self) -> None:
        # Nothing is evaluated before every required resource is listed: a partial cluster
        # (Services before Nodes) would give false refusals and count false state flips.
        collect_by = time.monotonic() + COLLECTOR_PAUSE_LIMIT
        while not self._synced():
            if self._stop.wait(0.01):
                return
            self._collect_after(collect_by)
        while not self._stop.is_set():
            self._collect_after(collect_by)
            try:
                self.evaluator.step()
            except Exception:
                # One bad evaluation must not kill the exporter; the next change retries.
                logger.exception("evaluation failed")
            if not self._ready.is_set():
                # The status page's rows are built by its first visitor, not here: /readyz
                # says the metrics can be served, and 10,000 rows cost 0.15-0.25 s of CPU.
                #
                # The initial snapshot lives as long as the process: keep later collections
                # from rescanning it.
                if self._collector_paused:
                    self._resume_collector(freeze=True)
                else:
                    gc.freeze()
                if self._transport is not None:
                    # The LIST pages (143 MB of JSON at 5,000 nodes) are decoded and their
                    # buffers freed: give those pages back to the system (10-20 ms).
                    release_free_memory()
                # Logged before /readyz says so: whoever waits for readiness finds the
                # lines written (and a test that then captures the log does not reconfigure
                # structlog under a line being written).
                logger.info(READY_EVENT, **self.store.counts())
                if self.evaluator.state.zone_loss_skipped:
                    logger.warning(
                        "zone-loss forecast not made: too many zone labels",
                        zones=self.evaluator.state.zone_loss_skipped,
                        cap=MAX_ZONE_LOSS_ZONES,
                    )
                self._ready.set()
                self.evaluator.published_as_ready()
                try:
                    self.pages.preload()
                except Exception:
                    # The pages then answer 500 and log why; the metrics go on.
                    logger.exception("compiling the status page templates failed")
            self.store.wait_for_changes(0.5)

    def _collect_after(self, deadline: float) -> None:
        """Resume a paused collector once the deadline has passed without a first publication."""
        if self._collector_paused and time.monotonic() > deadline:
            # Nothing frozen: what a start that never finished holds may yet become garbage.
            self._resume_collector(freeze=False)
            logger.info("collector resumed before the first evaluation was published")

    def _resume_collector(self, *, freeze: bool) -> None:
        self._collector_paused = False
        resume_collector(freeze=freeze)


class _DownSince:
    """The informers' metrics, also noting since when each resource cannot be read."""

    def __init__(self, metrics: ExporterMetrics, since: dict[str, float]) -> None:
        self._metrics = metrics
        self._since = since

    def watch_up(self, resource: Resource, *, up: bool) -> None:
        if up:
            self._since.pop(resource, None)
        else:
            self._since.setdefault(resource, time.time())
        self._metrics.watch_up(resource, up=up)

    def watch_restart(self, resource: Resource, cause: RestartCause) -> None:
        self._metrics.watch_restart(resource, cause)

    def watch_event(self, resource: Resource, event_type: EventTypeLabel) -> None:
        self._metrics.watch_event(resource, event_type)

    def invalid_object(self, resource: Resource) -> None:
        self._metrics.invalid_object(resource)


def run(options: ServeOptions) -> int:
    configure_logging(options.log_level, options.log_format)
    # Until the first evaluation is published: see pause_collector.
    pause_collector()
    exporter = Exporter(options, collector_paused=True)

    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # No logging here: the handler runs in the main thread between two bytecodes, maybe
        # while that thread holds the log writer's lock (it logs "serving"), and would wait
        # for it for ever. Only set the event; the main thread logs.
        received.append(signal.Signals(signum).name)
        exporter.request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        exporter.start()
        exporter.wait()
    finally:
        if received:
            logger.info("stopping", signal=received[0])
        exporter.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    logger.info("stopped")
    # The interpreter's final collections would walk every object left, the kubernetes
    # client's thousands of model classes included: 2 s of a SIGTERM's grace on a busy
    # machine. Frozen objects are skipped.
    gc.freeze()
    return 0


def resolve_shard(shard: str, environ: dict[str, str] | None = None) -> int:
    """`auto` takes the ordinal from POD_NAME (or HOSTNAME), as a StatefulSet names pods."""
    if shard != "auto":
        return int(shard)
    env = os.environ if environ is None else environ
    pod_name = env.get("POD_NAME") or env.get("HOSTNAME") or ""
    return shard_from_pod_name(pod_name)


def split_list(values: Sequence[str] | None) -> tuple[str, ...]:
    """Flags that take comma-separated lists, repeatable."""
    return tuple(
        item.strip() for value in values or () for item in value.split(",") if item.strip()
    )
