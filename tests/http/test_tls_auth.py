"""Mutual TLS, the exporter-toolkit web configuration file and its errors, through the CLI."""

from __future__ import annotations

import base64
import os
import socket
import ssl
import subprocess
from pathlib import Path

import bcrypt
import pytest

from tests.conftest import exporter_command, require_binary
from tests.http.support import DEMO, Served, client_context, make_certificates, serve


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(require_binary("openssl"), tmp_path_factory.mktemp("tls"))


def rejected(served: Served, context: ssl.SSLContext) -> bool:
    """Whether the server refuses this client during (or right after) the TLS handshake."""
    try:
        with (
            socket.create_connection((served.host, served.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=served.host) as sock,
        ):
            # TLS 1.3 reports a refused client certificate on the first read.
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            return not sock.recv(1024)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


@pytest.mark.server
def test_mutual_tls_serves_clients_with_a_certificate_and_refuses_others(
    certificates: dict[str, Path],
) -> None:
    with serve(
        "--tls-cert-file", str(certificates["server"]),
        "--tls-key-file", str(certificates["server-key"]),
        "--tls-client-ca-file", str(certificates["ca"]),
        tls=client_context(certificates, with_certificate=True),
    ) as served:  # fmt: skip
        assert served.get("/healthz")[0] == 200
        assert rejected(served, client_context(certificates))
        # A refused client costs nothing: the next one is served.
        status, _, body = served.get("/metrics")
        assert status == 200
        assert b"topology_hints_" in body


def write_web_config(folder: Path, text: str) -> Path:
    path = folder / "web-config.yml"
    path.write_text(text)
    return path


@pytest.mark.server
def test_web_config_file_serves_tls_with_basic_auth(
    certificates: dict[str, Path], tmp_path: Path
) -> None:
    """exporter-toolkit's format: relative file names, bcrypt users, extra headers."""
    for name in ("server", "server-key"):
        (tmp_path / f"{name}.pem").write_bytes(certificates[name].read_bytes())
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode().replace("$2b$", "$2y$")
    config = write_web_config(
        tmp_path,
        f"""
tls_server_config:
  cert_file: server.pem
  key_file: server-key.pem
  min_version: TLS12
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
basic_auth_users:
  prometheus: {hashed}
""",
    )
    with serve("--web.config.file", str(config), tls=client_context(certificates)) as served:
        status, headers, body = served.get("/metrics")
        assert (status, body) == (401, b"unauthorized\n")
        assert headers["WWW-Authenticate"].startswith("Basic ")

        def with_password(password: str) -> int:
            token = base64.b64encode(f"prometheus:{password}".encode()).decode()
            return served.get("/metrics", headers={"Authorization": f"Basic {token}"})[0]

        assert with_password("wrong") == 401
        # Longer than bcrypt reads (bcrypt 5 raises): refused, for known and unknown users.
        assert with_password("s3cret" + "x" * 70) == 401
        token = base64.b64encode(b"nobody:" + b"x" * 100).decode()
        assert served.get("/metrics", headers={"Authorization": f"Basic {token}"})[0] == 401
        assert with_password("s3cret") == 200
        assert with_password("s3cret") == 200  # the second time from the cache
        _, headers, _ = served.get("/healthz")
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_web_listen_address_is_accepted() -> None:
    """`--web.listen-address`, as Prometheus exporters spell it."""
    completed = subprocess.run(
        [*exporter_command(), "serve", "--snapshot", DEMO, "--web.listen-address", "nope"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 2
    assert "is not HOST:PORT" in completed.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("tls_server_config: [", "not valid YAML at line"),
        ("basic_auth_user: {}", "unknown setting basic_auth_user"),
        ("basic_auth_users:\n  a: plain", "the password of user 'a' is not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: c.pem", "needs both cert_file and key_file"),
        ("tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key_file: k.pem",
         "cannot read /nonexistent/c.pem"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [X]",
         "tls_server_config.cipher_suites is not supported"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca",
         "client_ca_file is set but client_auth_type is NoClientCert"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Sometimes",
         "client_auth_type 'Sometimes' is not supported"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: SSL3",
         "min_version 'SSL3' is not one of"),
        ("rate_limit: {interval: 1s}", "rate_limit is not supported"),
        ("- a list", "must be a mapping"),
        ("basic_auth_users:\n  a: '$2b$31$" + "." * 53 + "'", "user 'a' has bcrypt cost 31"),
        ('http_server_config:\n  headers:\n    X-Frame-Options: "DENY\\0"',
         "header X-Frame-Options must be a one-line string without control characters"),
        ("tls_server_config: {cert_file: c, key_file: k, min_version: TLS13, max_version: TLS12}",
         "max_version is older than min_version"),
        ("a: " + "[" * 50_000 + "]" * 50_000, "not valid YAML"),
        ("".join("  " * level + "k:\n" for level in range(200)), "nested deeper than 16 levels"),
    ],
    ids=["yaml", "unknown", "hash", "half-tls", "missing-file", "ciphers", "ca-without-auth",
         "auth-type", "version", "rate-limit", "list", "bcrypt-cost", "header-nul",
         "versions-crossed", "yaml-flow-depth", "yaml-block-depth"],
)  # fmt: skip
def test_bad_web_config_is_one_line_and_exit_2(tmp_path: Path, text: str, words: str) -> None:
    config = write_web_config(tmp_path, text)
    completed = subprocess.run(
        [*exporter_command(), "serve", "--snapshot", DEMO, "--listen-address", "127.0.0.1:0",
         "--web.config.file", str(config)],
        capture_output=True, text=True, check=False, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert completed.returncode == 2, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("topology-hints-exporter: error: ")
    assert words in lines[0]
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "large"])
@pytest.mark.parametrize("role", ["web-config", "cert", "key", "client-ca"])
def test_files_that_are_not_small_regular_files_are_refused_at_start(
    certificates: dict[str, Path], tmp_path: Path, special: str, role: str
) -> None:
    """A FIFO would hang the start, /dev/zero or a huge file eat memory: one line, exit 2."""
    if special == "fifo":
        odd = tmp_path / "fifo"
        os.mkfifo(odd)
        words = "not a regular file"
    elif special == "large":
        odd = tmp_path / "large"
        with odd.open("wb") as file:
            file.truncate(5 * 1024 * 1024)
        words = f"larger than {1 if role == 'web-config' else 4} MiB"
    else:
        odd, words = Path(special), "not a regular file"
    files = {
        "cert": certificates["server"],
        "key": certificates["server-key"],
        "client-ca": certificates["ca"],
    }
    if role != "web-config":
        files[role] = odd
    config = write_web_config(
        tmp_path,
        f"""
tls_server_config:
  cert_file: {files["cert"]}
  key_file: {files["key"]}
  client_ca_file: {files["client-ca"]}
  client_auth_type: RequireAndVerifyClientCert
""",
    )
    completed = subprocess.run(
        [*exporter_command(), "serve", "--snapshot", DEMO, "--listen-address", "127.0.0.1:0",
         "--web.config.file", str(odd if role == "web-config" else config)],
        capture_output=True, text=True, check=False, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert completed.returncode == 2, completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert line == f"topology-hints-exporter: error: cannot read {odd}: {words}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--tls-client-ca-file", "ca.pem"], "--tls-client-ca-file needs --tls-cert-file"),
        (["--web.config.file", "w.yml", "--tls-cert-file", "c", "--tls-key-file", "k"],
         "exclusive"),
        (["--tls-cert-file", "/nonexistent/c.pem", "--tls-key-file", "k.pem"],
         "cannot read /nonexistent/c.pem"),
    ],
    ids=["ca-alone", "both", "missing-cert"],
)  # fmt: skip
def test_bad_tls_flags_are_one_line_and_exit_2(args: list[str], words: str) -> None:
    completed = subprocess.run(
        [*exporter_command(), "serve", "--snapshot", DEMO, "--listen-address", "127.0.0.1:0",
         *args],
        capture_output=True, text=True, check=False, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert completed.returncode == 2, completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr
    assert words in completed.stderr
