"""behaviour §12 for the live exporter: the Kubernetes profile from the flags and the API
server's /version, read at start and again before each relist of Nodes but the first.

`serve` reads /version in its start-up thread, after the HTTP server serves (the probes
never wait for it). A gate setting the server's version refuses stops `serve` at start (one
line, exit 2); at a relist (the cluster was upgraded under a running exporter) or when the
version cannot be read, the refused setting is dropped instead, and the log says so.
"""

from __future__ import annotations

from typing import Any

import structlog

from exporter.engine.profile import Profile, ProfileError, ProfileFlags
from exporter.engine.versions import ServerVersion
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.cluster import StoreSink
from exporter.sources.kubeapi import ConfigError, KubeTransport, Timeouts
from exporter.sources.version import read_server_version

logger = structlog.get_logger("exporter")


def flags_profile(
    flags: ProfileFlags,
    kube_proxy_minor: int | None,
    server: ServerVersion | None = None,
    *,
    lenient: bool,
) -> Profile:
    """The profile of the flags (and the server's version); ConfigError (one line) when a
    gate setting is refused, as a bad flag is."""
    try:
        return flags.profile(server, kube_proxy_minor, lenient=lenient)
    except ProfileError as error:
        raise ConfigError(str(error)) from None


class ProfileReader:
    """Keeps the evaluator's profile in step with the API server's /version."""

    def __init__(
        self,
        flags: ProfileFlags,
        kube_proxy_minor: int | None,
        evaluator: Evaluator,
        timeouts: Timeouts,
    ) -> None:
        self._flags = flags
        self._kube_proxy_minor = kube_proxy_minor
        self._evaluator = evaluator
        self._timeouts = timeouts

    def read(self, transport: KubeTransport, *, lenient: bool) -> None:
        """The profile with the API server's /version; the flags' version wins over it."""
        server = None
        if self._flags.kubernetes_minor is None:
            server, problem = read_server_version(transport, self._timeouts)
            if problem:
                logger.warning(
                    "evaluating with the newest semantics; pass --kubernetes-version",
                    problem=problem,
                )
                # The version is a guess: a gate setting is not refused against it.
                lenient = True
        current = self._evaluator.profile
        try:
            profile = flags_profile(self._flags, self._kube_proxy_minor, server, lenient=False)
        except ConfigError as error:
            if not lenient:
                raise
            profile = flags_profile(self._flags, self._kube_proxy_minor, server, lenient=True)
            if profile != current:
                logger.warning("a --feature-gates value is ignored", problem=str(error))
        if profile != current:
            for note in profile.notes():
                logger.warning(note)
            logger.info(
                "kubernetes profile",
                kubernetes_version=profile.control_plane.version,
                binary_version=profile.control_plane.binary_version,
                source=str(profile.control_plane.source),
                kube_proxy_version=profile.kube_proxy.version,
                kube_proxy_source=str(profile.kube_proxy.source),
            )
        self._evaluator.set_profile(profile)

    def relisting(self, sink: StoreSink[Any], transport: KubeTransport) -> StoreSink[Any]:
        """The Nodes sink, reading /version again before each complete list is applied but
        the first (read just before the informers started)."""
        first = [True]

        def replace(nodes: list[Any]) -> None:
            if not first[0]:
                try:
                    self.read(transport, lenient=True)
                except Exception:
                    # The profile keeps its last value; the nodes must still be applied.
                    logger.exception("reading the Kubernetes version failed")
            first[0] = False
            sink.replace(nodes)

        return StoreSink(replace, sink.upsert, sink.delete)
