"""TLS and basic-auth settings: the flags, or the exporter-toolkit web configuration file.

The file format is the one Prometheus' own exporters read with `--web.config.file`
(prometheus/exporter-toolkit, docs/web-configuration.md), so this exporter can sit behind
the same scrape configuration as node_exporter. Settings the standard library's `ssl`
module cannot honour (cipher suite and curve names of Go's TLS stack, requesting a client
certificate without verifying it) are refused with one line rather than silently ignored:
a security setting that does nothing is worse than an error.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


class WebConfigError(ValueError):
    """An unusable TLS or web configuration; the message is one line."""


class ClientAuth(Enum):
    """exporter-toolkit's client_auth_type values this exporter can enforce."""

    NO_CLIENT_CERT = "NoClientCert"
    VERIFY_CLIENT_CERT_IF_GIVEN = "VerifyClientCertIfGiven"
    REQUIRE_AND_VERIFY_CLIENT_CERT = "RequireAndVerifyClientCert"


TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# A bcrypt hash as htpasswd -B and the bcrypt libraries write it.
_BCRYPT_HASH = re.compile(r"\$2[abxy]\$\d\d\$[./A-Za-z0-9]{53}")

_TLS_KEYS = frozenset(
    {
        "cert_file",
        "key_file",
        "client_ca_file",
        "client_auth_type",
        "min_version",
        "max_version",
        "prefer_server_cipher_suites",
    }
)
# Keys of the format that this exporter does not implement: refused by name.
_UNSUPPORTED_TLS_KEYS = frozenset(
    {"cert", "key", "client_ca", "client_allowed_sans", "cipher_suites", "curve_preferences"}
)
_HTTP_KEYS = frozenset({"http2", "headers"})
_HEADERS = frozenset(
    {
        "Content-Security-Policy",
        "X-Frame-Options",
        "X-Content-Type-Options",
        "X-XSS-Protection",
        "Strict-Transport-Security",
    }
)
_TOP_KEYS = frozenset({"tls_server_config", "http_server_config", "basic_auth_users"})
_UNSUPPORTED_TOP_KEYS = frozenset({"rate_limit"})


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth: ClientAuth = ClientAuth.NO_CLIENT_CERT
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion | None = None

    def context(self) -> ssl.SSLContext:
        """A server context; unreadable or mismatched files raise WebConfigError."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self.min_version
        if self.max_version is not None:
            context.maximum_version = self.max_version
        for name in (self.cert_file, self.key_file, self.client_ca_file):
            if name is not None and not Path(name).is_file():
                raise WebConfigError(f"cannot read {name}: no such file")
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError):
            raise WebConfigError(
                f"cannot load the TLS certificate {self.cert_file} with key {self.key_file}: "
                "not PEM, or the key does not match the certificate"
            ) from None
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (ssl.SSLError, OSError):
                raise WebConfigError(
                    f"cannot load client CA {self.client_ca_file}: not a PEM certificate"
                ) from None
        context.verify_mode = {
            ClientAuth.NO_CLIENT_CERT: ssl.CERT_NONE,
            ClientAuth.VERIFY_CLIENT_CERT_IF_GIVEN: ssl.CERT_OPTIONAL,
            ClientAuth.REQUIRE_AND_VERIFY_CLIENT_CERT: ssl.CERT_REQUIRED,
        }[self.client_auth]
        return context


@dataclass(frozen=True, slots=True)
class WebConfig:
    tls: TlsSettings | None = None
    # user -> bcrypt hash; empty: no authentication.
    basic_auth_users: Mapping[str, bytes] = field(default_factory=dict)
    # Extra response headers (http_server_config.headers).
    headers: tuple[tuple[str, str], ...] = ()


def tls_from_flags(
    cert_file: str | None, key_file: str | None, client_ca_file: str | None
) -> TlsSettings | None:
    """--tls-cert-file, --tls-key-file and --tls-client-ca-file (mutual TLS when set)."""
    if cert_file is None or key_file is None:
        if client_ca_file is not None:
            raise WebConfigError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
        return None
    return TlsSettings(
        cert_file,
        key_file,
        client_ca_file,
        ClientAuth.NO_CLIENT_CERT
        if client_ca_file is None
        else ClientAuth.REQUIRE_AND_VERIFY_CLIENT_CERT,
    )


def load_web_config(path: str) -> WebConfig:
    """Read and check a web configuration file; every problem is one WebConfigError line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WebConfigError(f"{path}: cannot read: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8"
        raise WebConfigError(f"{path}: cannot read: {reason}") from None
    import yaml  # noqa: PLC0415 - only a web configuration file needs YAML

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise WebConfigError(f"{path}: not valid YAML{where}") from None
    if document is None:
        return WebConfig()
    base = Path(path).parent
    top = _mapping(document, path, "the file")
    _check_keys(top, _TOP_KEYS, _UNSUPPORTED_TOP_KEYS, path, "")
    tls = None
    if top.get("tls_server_config") is not None:
        tls = _tls_settings(
            _mapping(top["tls_server_config"], path, "tls_server_config"), base, path
        )
    return WebConfig(
        tls=tls,
        basic_auth_users=_users(top.get("basic_auth_users"), path),
        headers=_headers(top.get("http_server_config"), path),
    )


def _mapping(value: object, path: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise WebConfigError(f"{path}: {what} must be a mapping of names to values")
    return value


def _check_keys(
    section: Mapping[str, object],
    known: frozenset[str],
    unsupported: frozenset[str],
    path: str,
    prefix: str,
) -> None:
    for key in section:
        if key in unsupported:
            raise WebConfigError(f"{path}: {prefix}{key} is not supported by this exporter")
        if key not in known:
            raise WebConfigError(f"{path}: unknown setting {prefix}{key}")


def _string(section: Mapping[str, object], key: str, path: str, prefix: str) -> str | None:
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise WebConfigError(f"{path}: {prefix}{key} must be a string")
    return value


def _tls_settings(section: dict[str, Any], base: Path, path: str) -> TlsSettings:
    prefix = "tls_server_config."
    _check_keys(section, _TLS_KEYS, _UNSUPPORTED_TLS_KEYS, path, prefix)
    # exporter-toolkit resolves relative file names against the configuration file's folder.
    files = {
        key: str(base / value) if (value := _string(section, key, path, prefix)) else None
        for key in ("cert_file", "key_file", "client_ca_file")
    }
    cert_file, key_file = files["cert_file"], files["key_file"]
    if cert_file is None or key_file is None:
        raise WebConfigError(f"{path}: tls_server_config needs both cert_file and key_file")
    auth_name = _string(section, "client_auth_type", path, prefix) or "NoClientCert"
    try:
        client_auth = ClientAuth(auth_name)
    except ValueError:
        known = ", ".join(member.value for member in ClientAuth)
        raise WebConfigError(
            f"{path}: client_auth_type {auth_name!r} is not supported (use one of {known})"
        ) from None
    client_ca_file = files["client_ca_file"]
    if client_auth is not ClientAuth.NO_CLIENT_CERT and client_ca_file is None:
        raise WebConfigError(f"{path}: client_auth_type {auth_name} needs client_ca_file")
    if client_auth is ClientAuth.NO_CLIENT_CERT and client_ca_file is not None:
        # As exporter-toolkit: a CA that verifies nothing is a configuration mistake.
        raise WebConfigError(
            f"{path}: client_ca_file is set but client_auth_type is NoClientCert "
            "(use RequireAndVerifyClientCert)"
        )
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", None)):
        name = _string(section, key, path, prefix) or default
        if name is None:
            continue
        if name not in TLS_VERSIONS:
            raise WebConfigError(f"{path}: {key} {name!r} is not one of {', '.join(TLS_VERSIONS)}")
        versions[key] = TLS_VERSIONS[name]
    preference = section.get("prefer_server_cipher_suites", True)
    if not isinstance(preference, bool):
        raise WebConfigError(f"{path}: {prefix}prefer_server_cipher_suites must be true or false")
    return TlsSettings(
        cert_file,
        key_file,
        client_ca_file,
        client_auth,
        min_version=versions["min_version"],
        max_version=versions.get("max_version"),
    )


def _users(value: object, path: str) -> dict[str, bytes]:
    if value is None:
        return {}
    users = {}
    for user, hashed in _mapping(value, path, "basic_auth_users").items():
        if not isinstance(hashed, str) or not _BCRYPT_HASH.fullmatch(hashed):
            # The hash itself is a secret: name the user, never the value.
            raise WebConfigError(f"{path}: the password of user {user!r} is not a bcrypt hash")
        users[user] = hashed.encode()
    return users


def _headers(value: object, path: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    section = _mapping(value, path, "http_server_config")
    _check_keys(section, _HTTP_KEYS, frozenset(), path, "http_server_config.")
    http2 = section.get("http2", True)
    if not isinstance(http2, bool):
        raise WebConfigError(f"{path}: http_server_config.http2 must be true or false")
    headers = section.get("headers")
    if headers is None:
        return ()
    pairs = []
    for name, text in _mapping(headers, path, "http_server_config.headers").items():
        if name not in _HEADERS:
            raise WebConfigError(f"{path}: header {name!r} cannot be set here")
        if not isinstance(text, str) or any(char in text for char in "\r\n"):
            raise WebConfigError(f"{path}: header {name} must be a one-line string")
        if text:
            pairs.append((name, text))
    return tuple(pairs)
