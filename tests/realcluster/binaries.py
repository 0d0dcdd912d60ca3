"""Where the pinned upstream binaries are: `make kube-binaries` (tools/kube/build.py)
builds them, and this module finds them the same way (KUBE_BINARIES_DIR, else
build/kube/VERSION)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.kube.build import BINARIES, output_dir, pinned

KUBERNETES_MODULE = "k8s.io/kubernetes"


@dataclass(frozen=True)
class KubeBinaries:
    """The folder of one pinned release's etcd, kube-apiserver, kube-controller-manager and
    kube-proxy."""

    folder: Path
    version: str  # v1.37.2

    @property
    def etcd(self) -> Path:
        return self.folder / "etcd"

    @property
    def kube_apiserver(self) -> Path:
        return self.folder / "kube-apiserver"

    @property
    def kube_controller_manager(self) -> Path:
        return self.folder / "kube-controller-manager"

    @property
    def kube_proxy(self) -> Path:
        return self.folder / "kube-proxy"

    @property
    def minor(self) -> int:
        return int(self.version.removeprefix("v").split(".")[1])

    def missing(self) -> list[str]:
        return [name for name in BINARIES if not (self.folder / name).is_file()]


def kube_binaries() -> KubeBinaries:
    """The pinned release's binaries (they may be missing: check `missing()`)."""
    version = pinned(KUBERNETES_MODULE)
    return KubeBinaries(output_dir(version), version)
