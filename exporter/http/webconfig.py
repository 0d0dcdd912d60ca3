"""TLS and basic-auth settings: the flags, or the exporter-toolkit web configuration file.

The file format is the one Prometheus' own exporters read with `--web.config.file`
(prometheus/exporter-toolkit, docs/web-configuration.md), so this exporter can sit behind
the same scrape configuration as node_exporter. Settings the standard library's `ssl`
module cannot honour (cipher suite and curve names of Go's TLS stack, requesting a client
certificate without verifying it) are refused with one line rather than silently ignored:
a security setting that does nothing is worse than an error.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import bcrypt


class WebConfigError(ValueError):
    """An unusable TLS or web configuration; the message is one line."""


class ClientAuth(Enum):
    """exporter-toolkit's client_auth_type values this exporter can enforce."""

    NO_CLIENT_CERT = "NoClientCert"
    VERIFY_CLIENT_CERT_IF_GIVEN = "VerifyClientCertIfGiven"
    REQUIRE_AND_VERIFY_CLIENT_CERT = "RequireAndVerifyClientCert"


# Bounds on what is read at start (docs/cli.md). A web configuration is a few kilobytes and
# nests three deep; a PEM file a few, a bundle of every public CA about 200 KiB.
MAX_WEB_CONFIG_BYTES = 1024 * 1024
MAX_PEM_BYTES = 4 * 1024 * 1024
MAX_YAML_DEPTH = 16
# What an HTTP field value may not hold (RFC 9110 5.5): control characters but HTAB. The
# HTTP layer refuses to send such a header, so it would fail every response.
_HEADER_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# A bcrypt hash as htpasswd -B and the bcrypt libraries write it; group 1 is its cost.
_BCRYPT_HASH = re.compile(r"\$2[abxy]\$(\d\d)\$[./A-Za-z0-9]{53}")
# The cost is log2 of bcrypt's rounds. 4 is the least bcrypt accepts (it answers "Invalid
# salt" below). The most is this exporter's: each wrong password costs one check of the
# hash's cost on an HTTP worker, about 1-2 s of a core at 14 and twice that per step (bcrypt
# itself would take 31: hours each). htpasswd -B uses 5, Go's bcrypt 10 (docs/cli.md).
BCRYPT_MIN_COST = 4
BCRYPT_MAX_COST = 14
# bcrypt reads 72 bytes of a password at most; bcrypt 5 raises on longer ones rather than
# cutting them, so no hash can match one: they are refused before any hashing.
MAX_PASSWORD_BYTES = 72

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
    """The TLS half of an exporter-toolkit web config: certificate, key, client CA and versions."""

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
            if name is not None:
                _check_file(name, MAX_PEM_BYTES)
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
    """A parsed --web.config.file (exporter-toolkit's format): TLS, basic-auth users and extra
    response headers."""

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


def _check_file(name: str, limit: int, *, descriptor: int | None = None) -> None:
    """A regular file of at most `limit` bytes: a FIFO would hang the start, /dev/zero eat
    memory. With a descriptor, the open file is checked rather than the name."""
    try:
        info = Path(name).stat() if descriptor is None else os.fstat(descriptor)
    except FileNotFoundError:
        raise WebConfigError(f"cannot read {name}: no such file") from None
    except OSError as error:
        raise WebConfigError(f"cannot read {name}: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise WebConfigError(f"cannot read {name}: not a regular file")
    if info.st_size > limit:
        raise WebConfigError(f"cannot read {name}: larger than {limit // 1024 // 1024} MiB")


def _read_web_config(path: str) -> str:
    try:
        # Non-blocking: opening a FIFO for reading would wait for a writer for ever. The
        # descriptor is checked, not the name, so what is read is what was checked.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise WebConfigError(f"cannot read {path}: no such file") from None
    except OSError as error:
        raise WebConfigError(f"cannot read {path}: {error.strerror}") from None
    try:
        _check_file(path, MAX_WEB_CONFIG_BYTES, descriptor=descriptor)
    except WebConfigError:
        os.close(descriptor)
        raise
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(MAX_WEB_CONFIG_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WebConfigError(f"cannot read {path}: not UTF-8") from None


def load_web_config(path: str) -> WebConfig:
    """Read and check a web configuration file; every problem is one WebConfigError line."""
    text = _read_web_config(path)
    import yaml  # noqa: PLC0415 - only a web configuration file needs YAML

    try:
        _check_depth(text, path)
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


def _check_depth(text: str, path: str) -> None:
    """Refuse deep nesting before building it: the YAML composer recurses once per level."""
    import yaml  # noqa: PLC0415

    depth = 0
    # The parser's events come from a state machine, not recursion: deep input is safe here.
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise WebConfigError(
                    f"{path}: nested deeper than {MAX_YAML_DEPTH} levels at line {line}"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


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
    if versions.get("max_version", versions["min_version"]) < versions["min_version"]:
        # Every handshake would fail: no version is left to agree on.
        raise WebConfigError(
            f"{path}: {prefix}max_version is older than min_version: no TLS version is left"
        )
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
        # The hash itself is a secret: name the user, never the value.
        match = _BCRYPT_HASH.fullmatch(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise WebConfigError(f"{path}: the password of user {user!r} is not a bcrypt hash")
        if ":" in user:
            # Basic auth splits the user from the password at the first colon.
            raise WebConfigError(
                f"{path}: user name {user!r} contains ':', which basic auth cannot send"
            )
        cost = int(match.group(1))
        if not BCRYPT_MIN_COST <= cost <= BCRYPT_MAX_COST:
            raise WebConfigError(
                f"{path}: the password hash of user {user!r} has bcrypt cost {cost}: "
                f"this exporter accepts {BCRYPT_MIN_COST} to {BCRYPT_MAX_COST} "
                "(htpasswd -nbB -C 10 USER PASSWORD makes one of 10)"
            )
        try:
            # bcrypt refuses a salt whose last character sets bits it has no room for; check
            # it here, at the least cost (a millisecond), not on every login as a 500.
            bcrypt.checkpw(b"", f"{hashed[:4]}{BCRYPT_MIN_COST:02d}{hashed[6:]}".encode())
        except ValueError:
            raise WebConfigError(
                f"{path}: the password of user {user!r} is not a valid bcrypt hash (its salt)"
            ) from None
        users[user] = hashed.encode()
    return users


def bcrypt_cost(hashed: bytes) -> int:
    """The cost of a hash that load_web_config accepted."""
    return int(hashed[4:6])


class PasswordCheck:
    """Basic-auth credentials against bcrypt hashes, as exporter-toolkit's basic_auth_users.

    Every refusal costs the same whoever asks: an unknown user is checked against a decoy hash
    of the highest configured cost, so the time of an answer does not tell which users exist
    (give every user the same cost, or the users of lower costs answer sooner). A password
    longer than bcrypt reads is refused for every user alike, without hashing. bcrypt costs
    tens of milliseconds by design: a verified (user, password, hash) is remembered as a
    SHA-256 digest, never the password, so that scrapes do not pay it.
    """

    _CACHE_SIZE = 256

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._users = dict(users)
        cost = max(map(bcrypt_cost, self._users.values()), default=BCRYPT_MIN_COST)
        # A zero salt and a zero digest, which no password yields: as slow as a real hash
        # of that cost, made without spending one at start.
        self._decoy = b"$2b$%02d$" % cost + b"." * 53
        self._verified: set[bytes] = set()
        self._lock = threading.Lock()

    def known(self, user: bytes, password: bytes) -> bool | None:
        """The verdict when it needs no bcrypt (a password too long for it, or credentials
        verified before), else None: the caller runs `verify` where slow work may wait."""
        if len(password) > MAX_PASSWORD_BYTES:
            return False
        hashed = self._users.get(user.decode("utf-8", "replace"))
        if hashed is None:
            return None
        with self._lock:
            return True if _digest(user, password, hashed) in self._verified else None

    def verify(self, user: bytes, password: bytes) -> bool:
        if len(password) > MAX_PASSWORD_BYTES:
            return False
        hashed = self._users.get(user.decode("utf-8", "replace"))
        if hashed is None:
            bcrypt.checkpw(password, self._decoy)
            return False
        digest = _digest(user, password, hashed)
        with self._lock:
            if digest in self._verified:
                return True
        if not bcrypt.checkpw(password, hashed):
            return False
        with self._lock:
            if len(self._verified) >= self._CACHE_SIZE:
                self._verified.clear()
            self._verified.add(digest)
        return True


def _digest(user: bytes, password: bytes, hashed: bytes) -> bytes:
    """What the verified-credentials cache keeps of a (user, password, hash)."""
    return hashlib.sha256(b"\0".join((user, password, hashed))).digest()


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
        if not isinstance(text, str) or _HEADER_CONTROLS.search(text):
            raise WebConfigError(
                f"{path}: header {name} must be a one-line string without control characters"
            )
        # Surrounding blanks are not part of a field value (RFC 9110 5.5), nor sendable.
        if text := text.strip(" \t"):
            pairs.append((name, text))
    return tuple(pairs)
