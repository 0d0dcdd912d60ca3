"""The exporter's identity as the project ships it, installed on a real control plane.

`kubectl kustomize deploy/` (the real kubectl) and the Helm chart (rendered by the real Helm
v4 SDK, tests/test_helm.py) each give a ServiceAccount, a ClusterRole and a
ClusterRoleBinding; `install` applies those with `kubectl apply` (and the Namespace, which
Helm's `--create-namespace` would make), never the workload: there is no kubelet to run
it. The exporter then runs here, outside the cluster, as that ServiceAccount: a token from
the TokenRequest API written to a file the way a kubelet projects one, and a kubeconfig
whose user reads it (`tokenFile`), as the in-cluster configuration reads its token file.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import PROJECT_ROOT, require_binary
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane

Json = dict[str, Any]

KUSTOMIZE = "kustomize"
HELM = "helm"
SOURCES = (KUSTOMIZE, HELM)
# The chart is installed under a release and namespace of its own, so that both installs
# live side by side on the session's control plane.
HELM_RELEASE = "hints"
HELM_NAMESPACE = "monitoring"
IDENTITY_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")
TOKEN_SECONDS = 3600


def rendered(source: str, components: tuple[str, ...] = ()) -> tuple[Json, ...]:
    """Every object the source renders with its default values (kustomize: with these
    components of the repository, as a user's kustomization adds them)."""
    # Imported here: both modules are test modules of their own (collected by pytest).
    if source == KUSTOMIZE:
        from tests.test_deploy import PLAIN, _render_cached, render  # noqa: PLC0415

        if not components:
            return render(PLAIN)
        folder = Path(tempfile.mkdtemp(prefix="kustomization-"))
        try:
            root = Path(os.path.relpath(PROJECT_ROOT, folder))
            (folder / "kustomization.yaml").write_text(
                yaml.safe_dump(
                    {
                        "resources": [str(root / PLAIN)],
                        "components": [str(root / component) for component in components],
                    }
                )
            )
            return _render_cached(require_binary("kubectl"), str(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if source == HELM:
        from tests.test_helm import render_chart  # noqa: PLC0415

        return render_chart({}, release=HELM_RELEASE, namespace=HELM_NAMESPACE)
    raise ValueError(f"unknown source {source!r}")


@dataclass(frozen=True)
class Install:
    """The identity objects of one source, and who the exporter is once they are applied."""

    source: str
    objects: tuple[Json, ...]

    def _only(self, kind: str) -> Json:
        (found,) = (doc for doc in self.objects if doc["kind"] == kind)
        return found

    @property
    def namespace(self) -> str:
        return str(self._only("ServiceAccount")["metadata"]["namespace"])

    @property
    def service_account(self) -> str:
        return str(self._only("ServiceAccount")["metadata"]["name"])

    @property
    def cluster_role_binding(self) -> Json:
        return self._only("ClusterRoleBinding")

    @property
    def cluster_role(self) -> Json:
        return self._only("ClusterRole")

    @property
    def username(self) -> str:
        """The user the API server authenticates the exporter's tokens as."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def identity(source: str) -> Install:
    """The ServiceAccount, ClusterRole and ClusterRoleBinding (and Namespace) of `source`."""
    objects = tuple(doc for doc in rendered(source) if doc["kind"] in IDENTITY_KINDS)
    install = Install(source, objects)
    # The binding names the ServiceAccount the same source creates.
    (subject,) = install.cluster_role_binding["subjects"]
    assert (subject["namespace"], subject["name"]) == (install.namespace, install.service_account)
    return install


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None) -> str:
    """The real kubectl as the suite's admin; its stdout (fails with its stderr)."""
    completed = subprocess.run(
        [require_binary("kubectl"), "--kubeconfig", str(plane.admin_kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, f"kubectl {' '.join(args)}: {completed.stderr}"
    return completed.stdout


def apply(plane: ControlPlane, objects: Iterable[Json]) -> None:
    """`kubectl apply -f -` of these objects, as an operator installs them."""
    kubectl(plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(list(objects)))


def install(cluster: RealCluster, source: str) -> Install:
    """Apply the identity of `source` (its namespace first: Helm would create it)."""
    found = identity(source)
    cluster.create_namespace(found.namespace)
    apply(cluster.plane, found.objects)
    return found


def mint_token(cluster: RealCluster, install: Install, seconds: int = TOKEN_SECONDS) -> str:
    """A token for the exporter's ServiceAccount from the TokenRequest API, as a kubelet
    asks for the token it projects into the pod."""
    answer = cluster.core.create_namespaced_service_account_token(
        install.service_account, install.namespace, {"spec": {"expirationSeconds": seconds}}
    )
    return str(answer.status.token)


class ProjectedToken:
    """A token file as a kubelet's projected volume keeps it: `token` is a symlink through
    `..data`, and a new token is written into a new folder that `..data` is then swapped to
    in one rename (the kubelet's AtomicWriter), so a reader never sees half a token."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._writes = 0

    @property
    def path(self) -> Path:
        return self.folder / "token"

    def read(self) -> str:
        """The token the file holds now."""
        return self.path.read_text()

    def write(self, token: str) -> None:
        self._writes += 1
        version = self.folder / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{self._writes}"
        version.mkdir()
        (version / "token").write_text(token)
        staged = self.folder / "..data_tmp"
        staged.unlink(missing_ok=True)
        staged.symlink_to(version.name)
        staged.replace(self.folder / "..data")
        if not self.path.is_symlink():
            self.path.symlink_to(Path("..data") / "token")


def token_kubeconfig(plane: ControlPlane, path: Path, token_file: Path, user: str) -> Path:
    """A kubeconfig for this API server whose user reads its token from `token_file`."""
    plane.write_kubeconfig(path, "unused", user)
    config = yaml.safe_load(path.read_text())
    (entry,) = config["users"]
    entry["user"] = {"tokenFile": str(token_file)}
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True)
class Credentials:
    """What the exporter runs with: its install, its token file and its kubeconfig."""

    install: Install
    token: ProjectedToken
    kubeconfig: Path


def credentials(cluster: RealCluster, source: str | Install, folder: Path) -> Credentials:
    """Install `source`'s identity (or this one), project a fresh token for it, and write a
    kubeconfig."""
    if isinstance(source, Install):
        found = source
        cluster.create_namespace(found.namespace)
        apply(cluster.plane, found.objects)
    else:
        found = install(cluster, source)
    token = ProjectedToken(folder / "serviceaccount")
    token.write(mint_token(cluster, found))
    kubeconfig = token_kubeconfig(
        cluster.plane, folder / "exporter.kubeconfig", token.path, found.service_account
    )
    return Credentials(found, token, kubeconfig)


def renamed(install: Install, name: str, *, without: str | None = None) -> Install:
    """The same identity under `name` (ServiceAccount, ClusterRole and binding), its
    ClusterRole without the resource `without`: an operator who left a permission out."""
    objects = []
    for doc in copy.deepcopy(install.objects):
        kind = doc["kind"]
        if kind == "Namespace":
            objects.append(doc)
            continue
        doc["metadata"]["name"] = name
        if kind == "ClusterRoleBinding":
            doc["roleRef"]["name"] = name
            for subject in doc["subjects"]:
                subject["name"] = name
        if kind == "ClusterRole" and without is not None:
            rules = [
                {**rule, "resources": [r for r in rule["resources"] if r != without]}
                for rule in doc["rules"]
            ]
            doc["rules"] = [rule for rule in rules if rule["resources"]]
        objects.append(doc)
    return Install(install.source, tuple(objects))


def grant_as_shipped(cluster: RealCluster, install: Install) -> None:
    """Give `install`'s ClusterRole the rules of the shipped one (its missing permission)."""
    role = copy.deepcopy(identity(install.source).cluster_role)
    role["metadata"]["name"] = install.cluster_role["metadata"]["name"]
    apply(cluster.plane, [role])
