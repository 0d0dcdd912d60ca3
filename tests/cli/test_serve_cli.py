"""`serve` through the real command: bad flags fail fast with one line; TLS serves HTTPS."""

from __future__ import annotations

import errno
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.http.server import parse_listen_address
from exporter.run.serve import ServeOptions
from tests.conftest import EXAMPLES_DIR, exporter_command, require_binary
from tests.processes import serving
from tests.scrape import parse

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")


def _serve(*args: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), "serve", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def default_port_taken() -> Iterator[int]:
    """The default port held, as `make run` holds it while `make test` runs (the Quick start).

    The one test that binds a fixed port, on purpose; when something else already holds it,
    that is the same situation.
    """
    _, port = parse_listen_address(ServeOptions().listen_address)
    with socket.socket() as listener:
        try:
            listener.bind(("127.0.0.1", port))
            listener.listen()
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
        yield port


@pytest.mark.usefixtures("default_port_taken")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--kubeconfig", "/nonexistent/kubeconfig"], "cannot load cluster configuration"),
        ([], "cannot load cluster configuration from ~/.kube/config"),
        (["--snapshot", "/nonexistent.json"], "/nonexistent.json: cannot read"),
        (["--snapshot", DEMO, "--listen-address", "nope"], "is not HOST:PORT"),
        (["--snapshot", DEMO, "--shard", "3", "--total-shards", "2"], "shard 3 is outside 0..1"),
        (["--snapshot", DEMO, "--shard", "auto", "--total-shards", "2"], "cannot derive a shard"),
        (["--snapshot", DEMO, "--metric-denylist", "("], "bad metric regular expression"),
        (["--snapshot", DEMO, "--metric-allowlist", "a", "--metric-denylist", "b"], "exclusive"),
        (["--snapshot", DEMO, "--tls-cert-file", "cert.pem"], "go together"),
        (["--snapshot", DEMO, "--kubeconfig", "k"], "exclusive"),
        (["--snapshot", DEMO, "--cross-zone-price-per-gib", "-1"], "decimal number, 0 or more"),
        (["--snapshot", DEMO, "--cross-zone-price-per-gib", "nan"], "decimal number, 0 or more"),
    ],
    ids=[
        "kubeconfig", "no-config", "snapshot", "address", "shard", "shard-auto", "regex",
        "allow-and-deny", "tls-half", "two-sources", "negative-price", "nan-price",
    ],
)  # fmt: skip
def test_bad_serve_flags_exit_2_with_one_line(args: list[str], words: str) -> None:
    """Each unusable configuration stops at once: exit 2, one stderr line, no traceback.

    With the default port taken: the configuration is read before the port is bound, so its
    own problem is named, not a port conflict.
    """
    completed = _serve(*args)
    assert completed.returncode == 2, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("topology-hints-exporter: error: ")
    assert words in lines[0]
    assert "Traceback" not in completed.stderr + completed.stdout


def test_port_in_use_exits_2(busy_port: int) -> None:
    """An address already taken is one clear line, not a hang or a traceback."""
    completed = _serve("--snapshot", DEMO, "--listen-address", f"127.0.0.1:{busy_port}")
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f"topology-hints-exporter: error: cannot serve on 127.0.0.1:{busy_port}: "
        "Address already in use"
    )


@pytest.mark.server
def test_tls_serves_metrics_over_https(tmp_path: Path) -> None:
    """With a certificate and key, /metrics is served over HTTPS and plain HTTP is refused."""
    openssl = require_binary("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(cafile=str(cert))
    with serving(
        "--snapshot", DEMO, "--tls-cert-file", str(cert), "--tls-key-file", str(key), tls=context
    ) as exporter:
        # Ready: /readyz answered 200 over HTTPS.
        address = exporter.address
        with urllib.request.urlopen(f"https://{address}/metrics", context=context) as response:
            scrape = parse(response.read().decode())
        assert scrape.value("topology_hints_sufficient_node_info") == 1
        with pytest.raises(OSError):  # noqa: PT011 - a reset or a bad status line, either way
            urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read()


@pytest.mark.parametrize(
    "content",
    ["apiVersion: v1\nclusters: [\n  - {name: x\n", "- just\n- a list\n", "42\n"],
    ids=["yaml-syntax", "a-list", "a-number"],
)
@pytest.mark.parametrize("command", ["serve", "explain"])
def test_a_broken_kubeconfig_is_one_line(content: str, command: str, tmp_path: Path) -> None:
    """A kubeconfig that is not YAML, or not a mapping, is named in one line (no traceback)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(content)
    extra = ["--listen-address", "127.0.0.1:0"] if command == "serve" else []
    completed = subprocess.run(
        [*exporter_command(), command, "--kubeconfig", str(kubeconfig), *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 2, completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    prefix = "topology-hints-exporter: error: cannot load cluster configuration from"
    assert line.startswith(f"{prefix} {kubeconfig}")
