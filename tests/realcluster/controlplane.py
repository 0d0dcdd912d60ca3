"""A real control plane on 127.0.0.1: etcd, kube-apiserver and kube-controller-manager.

As envtest and kwok start them: one etcd member with its data in a temporary folder; the
API server with RBAC, service-account signing keys, a static token for the suite's admin
(in system:masters) and one for the controller manager, and an audit log at level
Metadata; the controller manager running only the EndpointSlice controller, under its own
service account's credentials (as kubeadm clusters run it), its metrics readable without
credentials so tests can tell when it has settled. Emulated versions and feature gates are
given to both components, as a cluster operator would.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.processes import free_port
from tests.realcluster.binaries import KubeBinaries
from tests.realcluster.processes import ServerProcess, StartError

START_TIMEOUT = 90.0
PORT_ATTEMPTS = 3
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
ADMIN_USER = "suite-admin"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
# Metadata for every request: who asked what, with which verb and answer, never bodies.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}

# The controller manager's self-signed serving certificate, read without verifying it. Made
# once: settle() reads its metrics ten times a second, and a default context loads every
# system CA (most of the CPU of each read).
_UNVERIFIED = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


@dataclass(frozen=True)
class ControlPlaneSettings:
    """How the control plane is started: which version it emulates, which gates it sets."""

    emulated_version: str | None = None  # "1.34": both components emulate that minor
    # (name, value) pairs, in flag order; a tuple so settings can key a session's planes.
    feature_gates: tuple[tuple[str, bool], ...] = ()
    extra_apiserver_args: tuple[str, ...] = ()
    # Gates given to kube-controller-manager only, after `feature_gates` (version skew during
    # an upgrade: the API server already newer than the controller manager).
    controller_manager_feature_gates: tuple[tuple[str, bool], ...] = ()

    @property
    def gate_flag(self) -> list[str]:
        return _gate_flag(self.feature_gates)

    @property
    def controller_manager_gate_flag(self) -> list[str]:
        return _gate_flag((*self.feature_gates, *self.controller_manager_feature_gates))

    @property
    def emulation_flag(self) -> list[str]:
        return [f"--emulated-version={self.emulated_version}"] if self.emulated_version else []


def _gate_flag(gates: tuple[tuple[str, bool], ...]) -> list[str]:
    if not gates:
        return []
    pairs = ",".join(f"{name}={str(on).lower()}" for name, on in gates)
    return [f"--feature-gates={pairs}"]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass
class ControlPlane:
    """A started control plane; `stop()` (or leaving `started(...)`) stops every process."""

    binaries: KubeBinaries
    settings: ControlPlaneSettings
    base: Path
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    controller_manager_token: str = field(default_factory=lambda: secrets.token_hex(16))
    etcd_client_port: int = 0
    apiserver_port: int = 0
    controller_manager_port: int = 0
    etcd: ServerProcess | None = None
    apiserver: ServerProcess | None = None
    controller_manager: ServerProcess | None = None

    # --- where things are ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"

    @property
    def controller_manager_url(self) -> str:
        return f"https://127.0.0.1:{self.controller_manager_port}"

    @property
    def ca_file(self) -> Path:
        """The API server's self-signed serving certificate, trusted as its own CA."""
        return self.base / "apiserver-certs" / "apiserver.crt"

    @property
    def audit_log(self) -> Path:
        return self.base / "audit.log"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.base / "admin.kubeconfig"

    def write_kubeconfig(self, path: Path, token: str, user: str = "user") -> Path:
        """A kubeconfig for this API server authenticating with a bearer `token`."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "real",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": user}}],
            "current-context": "real",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # --- requests the harness itself makes ------------------------------------------------

    def _tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def get(self, path: str, token: str | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
        """GET `path` on the API server as the admin (or `token`): (status, body)."""
        request = urllib.request.Request(  # noqa: S310 - https to our own server
            self.url + path, headers={"Authorization": f"Bearer {token or self.admin_token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._tls()) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def version(self) -> dict[str, str]:
        status, body = self.get("/version")
        assert status == 200, body
        answer: dict[str, str] = json.loads(body)
        return answer

    def controller_manager_metrics(self, timeout: float = 10.0) -> str:
        """The controller manager's own /metrics text (served without credentials here)."""
        with urllib.request.urlopen(  # noqa: S310
            self.controller_manager_url + "/metrics", timeout=timeout, context=_UNVERIFIED
        ) as response:
            return str(response.read().decode())

    # --- processes ----------------------------------------------------------------------

    def _prepare(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        _openssl("genrsa", "-out", str(self.base / "sa.key"), "2048")
        (self.base / "tokens.csv").write_text(
            f'{self.admin_token},{ADMIN_USER},uid-admin,"system:masters"\n'
            f"{self.controller_manager_token},{CONTROLLER_MANAGER_USER},uid-kcm\n"
        )
        (self.base / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))

    def _start_etcd(self) -> None:
        for _ in range(PORT_ATTEMPTS):
            self.etcd_client_port, peer = free_port(), free_port()
            data = self.base / "etcd-data"
            shutil.rmtree(data, ignore_errors=True)
            self.etcd = ServerProcess(
                "etcd",
                [
                    str(self.binaries.etcd),
                    "--name=suite",
                    f"--data-dir={data}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=suite=http://127.0.0.1:{peer}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
                self.base / "etcd.log",
            )
            self.etcd.start()
            try:
                self.etcd.wait_ready(self._etcd_healthy, START_TIMEOUT)
            except StartError:
                taken = self.etcd.port_was_taken()
                self.etcd.stop()
                if not taken:
                    raise
            else:
                return
        raise StartError("etcd: no free port after retries")

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as response:  # noqa: S310
            return bool(json.loads(response.read()).get("health") == "true")

    def apiserver_argv(self) -> list[str]:
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.base / 'apiserver-certs'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.base / 'sa.key'}",
            f"--service-account-signing-key-file={self.base / 'sa.key'}",
            "--authorization-mode=RBAC",
            f"--token-auth-file={self.base / 'tokens.csv'}",
            "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount",
            f"--audit-policy-file={self.base / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-maxsize=0",
            *self.settings.emulation_flag,
            *self.settings.gate_flag,
            *self.settings.extra_apiserver_args,
        ]

    def start_apiserver(self, *, new_port: bool = True) -> None:
        """Start (or start again) kube-apiserver; a restart keeps its port, so clients
        reconnect to the same address."""
        for _ in range(PORT_ATTEMPTS):
            if new_port or not self.apiserver_port:
                self.apiserver_port = free_port()
            self.apiserver = ServerProcess(
                "kube-apiserver", self.apiserver_argv(), self.base / "kube-apiserver.log"
            )
            self.apiserver.start()
            try:
                self.apiserver.wait_ready(self._apiserver_ready, START_TIMEOUT)
            except StartError:
                taken = self.apiserver.port_was_taken()
                self.apiserver.stop()
                if not taken:
                    raise
                new_port = True
            else:
                return
        raise StartError("kube-apiserver: no free port after retries")

    def _apiserver_ready(self) -> bool:
        if not self.ca_file.exists():
            return False
        status, body = self.get("/readyz", timeout=2)
        return status == 200 and body.strip() == b"ok"

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port (etcd keeps the data)."""
        assert self.apiserver is not None
        self.apiserver.stop()
        self.start_apiserver(new_port=False)

    def _start_controller_manager(self) -> None:
        kubeconfig = self.write_kubeconfig(
            self.base / "kcm.kubeconfig", self.controller_manager_token, "kcm"
        )
        for _ in range(PORT_ATTEMPTS):
            self.controller_manager_port = free_port()
            self.controller_manager = ServerProcess(
                "kube-controller-manager",
                [
                    str(self.binaries.kube_controller_manager),
                    f"--kubeconfig={kubeconfig}",
                    "--controllers=endpointslice-controller",
                    "--leader-elect=false",
                    "--use-service-account-credentials=true",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.controller_manager_port}",
                    f"--cert-dir={self.base / 'kcm-certs'}",
                    # Prometheus and the settle check read /metrics without credentials.
                    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                    *self.settings.emulation_flag,
                    *self.settings.controller_manager_gate_flag,
                ],
                self.base / "kube-controller-manager.log",
            )
            self.controller_manager.start()
            try:
                self.controller_manager.wait_ready(self._controller_manager_ready, START_TIMEOUT)
            except StartError:
                taken = self.controller_manager.port_was_taken()
                self.controller_manager.stop()
                if not taken:
                    raise
            else:
                return
        raise StartError("kube-controller-manager: no free port after retries")

    def _controller_manager_ready(self) -> bool:
        # Ready once its EndpointSlice controller syncs: its workqueue metrics exist.
        return 'workqueue_depth{name="endpoint_slice"}' in self.controller_manager_metrics(2)

    def start(self) -> None:
        self._prepare()
        self._start_etcd()
        self.start_apiserver()
        self.write_kubeconfig(self.admin_kubeconfig, self.admin_token, ADMIN_USER)
        self._start_controller_manager()

    def stop(self) -> None:
        for server in (self.controller_manager, self.apiserver, self.etcd):
            if server is not None:
                server.stop()


@contextlib.contextmanager
def started(
    binaries: KubeBinaries, settings: ControlPlaneSettings | None = None, base: Path | None = None
) -> Iterator[ControlPlane]:
    """A running control plane for the block; every process stopped and its folder removed."""
    folder = base or Path(tempfile.mkdtemp(prefix="real-control-plane-"))
    plane = ControlPlane(binaries, settings or ControlPlaneSettings(), folder)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
        if base is None:
            shutil.rmtree(folder, ignore_errors=True)
