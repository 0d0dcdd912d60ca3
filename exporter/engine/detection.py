"""Which data planes of SPEC section 10 a cluster runs, from the few objects that tell.

`serve --dataplane auto` reads the `kube-proxy`, `cilium` and `calico-node` DaemonSets of
kube-system and Cilium's `cilium-config` ConfigMap (exporter.sources.dataplanes); this module
turns what it read into data plane ids. Absent objects are simply not in the facts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from exporter.engine.routing import DataPlane

KUBE_PROXY_DAEMONSET = "kube-proxy"
CILIUM_DAEMONSET = "cilium"
CALICO_DAEMONSET = "calico-node"
CILIUM_CONFIG = "cilium-config"
DAEMONSETS = (KUBE_PROXY_DAEMONSET, CILIUM_DAEMONSET, CALICO_DAEMONSET)

# cilium-config values that mean Cilium replaces kube-proxy (older releases said "strict").
_REPLACES_KUBE_PROXY = frozenset({"true", "strict"})
# The first release whose kube-proxy reads topology-mode and node hints the 1.31 way: older
# ones behave as `kube-proxy-1.29`.
_MODERN_KUBE_PROXY = (1, 30)
_CILIUM_FAILS_CLOSED = (1, 18, 0)
# ASCII digits, a few of them: a tag of other scripts' digits or of thousands of digits is
# not a version (int() refuses more than 4,300 digits).
_VERSION = re.compile(r"^v?([0-9]{1,6})\.([0-9]{1,6})(?:\.([0-9]{1,6}))?", re.ASCII)


@dataclass(frozen=True, slots=True)
class DaemonSetFacts:
    """What detection reads from one data plane's DaemonSet: its images (the version is in their
    tags) and its literal environment variables."""

    # The images of its pod template's containers, as written.
    images: tuple[str, ...] = ()
    # Environment variables with a literal value, over its containers.
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def version(self) -> tuple[int, ...] | None:
        """The first image tag that reads as a version (`v1.29.3`, `1.18.0-rc1`)."""
        for image in self.images:
            tag = image.rsplit("@", 1)[0].rsplit(":", 1)
            if len(tag) == 2 and "/" not in tag[1]:
                match = _VERSION.match(tag[1])
                if match:
                    return tuple(int(part) for part in match.groups() if part is not None)
        return None


@dataclass(frozen=True, slots=True)
class DataPlaneFacts:
    """Everything data-plane detection reads from kube-system: the DaemonSets that exist and
    cilium-config's data."""

    # DaemonSet name -> what it says; only the DaemonSets that exist.
    daemonsets: Mapping[str, DaemonSetFacts]
    # cilium-config's data; None when the ConfigMap does not exist.
    cilium_config: Mapping[str, str] | None = None


def kube_proxy_minor(facts: DataPlaneFacts) -> int | None:
    """The kube-proxy DaemonSet's minor version (its image tag), for the profile of
    behaviour §12; None without a DaemonSet or a readable 1.x tag."""
    kube_proxy = facts.daemonsets.get(KUBE_PROXY_DAEMONSET)
    version = kube_proxy.version() if kube_proxy is not None else None
    if version is None or len(version) < 2 or version[0] != 1:
        return None
    return version[1]


def detect(facts: DataPlaneFacts) -> tuple[DataPlane, ...]:
    """The data planes the facts show, most specific first; () when none is recognised."""
    found: list[DataPlane] = []
    cilium = facts.daemonsets.get(CILIUM_DAEMONSET)
    config = facts.cilium_config or {}
    cilium_replaces = (
        cilium is not None
        and config.get("kube-proxy-replacement", "false").lower() in _REPLACES_KUBE_PROXY
    )
    if cilium is not None and cilium_replaces:
        if config.get("enable-service-topology", "false").lower() != "true":
            found.append(DataPlane.CILIUM_NO_TOPOLOGY)
        elif cilium.version() == _CILIUM_FAILS_CLOSED:
            found.append(DataPlane.CILIUM_1_18_0)
        else:
            found.append(DataPlane.CILIUM)
    calico = facts.daemonsets.get(CALICO_DAEMONSET)
    calico_ebpf = calico is not None and calico.env.get("FELIX_BPFENABLED", "").lower() == "true"
    if calico_ebpf:
        found.append(DataPlane.CALICO_EBPF)
    kube_proxy = facts.daemonsets.get(KUBE_PROXY_DAEMONSET)
    # A kube-proxy DaemonSet left beside a replacement routes nothing the replacement handles.
    if kube_proxy is not None and not cilium_replaces and not calico_ebpf:
        version = kube_proxy.version()
        old = version is not None and version[:2] < _MODERN_KUBE_PROXY
        found.append(DataPlane.KUBE_PROXY_1_29 if old else DataPlane.KUBE_PROXY)
    return tuple(found)
