"""The `kubernetes` client for configuration, authentication and transport, and nothing more.

Responses are read as raw bytes and decoded by `exporter.sources.decode`: the client's models
cost about 20x more time and 7x more memory on a large EndpointSlice list.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import urllib3

from exporter.sources.tokenfile import TokenFile

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, Configuration

# The client's name for the Authorization header's API key.
BEARER_TOKEN = "BearerToken"  # noqa: S105 - a key name, not a secret

# Importing the `kubernetes` package takes most of a command's start-up; it is imported only
# where configuration is loaded, so `serve --snapshot` and the offline commands do without.


class ConfigError(Exception):
    """No usable cluster configuration; the message is one line."""


class ApiStatusError(Exception):
    """The API server answered with a non-2xx status."""

    def __init__(
        self, status: int, reason: str, message: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}".rstrip(": "))
        self.status = status
        self.reason = reason
        self.message = message
        # Seconds from the Retry-After header (429 and 503 from API Priority and Fairness).
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long a request to the API server may take: to connect, between bytes, for a body."""

    connect: float = 10.0
    # Each wait for bytes from the socket (urllib3's read timeout).
    read: float = 60.0
    # The whole body of one LIST page: a server that trickles bytes, each within `read`
    # of the last, cannot hold a list (and the readiness it gates) for longer.
    body: float = 120.0


class BodyDeadlineError(TimeoutError):
    """A response body took longer than Timeouts.body to arrive."""


_READ_CHUNK = 1 << 16


def _retries() -> urllib3.Retry:
    """urllib3's own retries: connection failures only.

    A read timeout is not retried (read=False re-raises it): the pool's default retried it
    three times, so a LIST the server never answered was noticed after four read timeouts
    instead of one. Nor are statuses: by default the pool retries a 429 or 503 with
    Retry-After itself, sleeping in the informer's thread where stop() cannot cut the wait;
    the informer waits as told instead, interruptibly, and counts it.
    """
    return urllib3.Retry(
        total=3, connect=3, read=False, status=0, other=0, respect_retry_after_header=False
    )


def read_body(response: urllib3.BaseHTTPResponse, timeouts: Timeouts) -> bytes:
    """The whole body of a response, within timeouts.body; raises BodyDeadlineError."""
    deadline = time.monotonic() + timeouts.body
    parts = []
    for chunk in response.stream(_READ_CHUNK, decode_content=True):
        parts.append(chunk)
        if time.monotonic() > deadline:
            raise BodyDeadlineError(f"the response took longer than {timeouts.body:g} s")
    return b"".join(parts)


# What loading a broken kubeconfig raises: the client's own error, and whatever its YAML
# parsing and dictionary walking throw on a file of the wrong shape.
# (PyYAML's error is added where the client, which imports PyYAML itself, is loaded.)
_CONFIG_ERRORS = (OSError, ValueError, TypeError, KeyError, AttributeError)


# A kubeconfig, and each file it names (token, certificates, keys), must be a regular file
# of at most this size: the client reads them whole, so a FIFO hung the command and
# `tokenFile: /dev/zero` ended in a MemoryError. Real ones are kilobytes.
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
MAX_CREDENTIAL_FILE_BYTES = 1024 * 1024


def _in_cluster(kubeconfig: str | None, context: str | None) -> bool:
    return kubeconfig is None and context is None and "KUBERNETES_SERVICE_HOST" in os.environ


def _kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    """The files the client reads, as it finds them: $KUBECONFIG is a list, missing ones skipped."""
    spec = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    paths = [Path(part).expanduser() for part in spec.split(os.pathsep) if part]
    return [path for path in paths if path.exists()]


def _check_file(path: Path, what: str, limit: int) -> None:
    """A regular file of at most `limit` bytes, or ConfigError (never opened: a FIFO hangs)."""
    try:
        status = path.stat()
    except OSError:
        return  # the client says what is wrong with a missing or unreadable file
    if not stat.S_ISREG(status.st_mode):
        raise ConfigError(f"{what} {path} is not a regular file")
    if status.st_size > limit:
        raise ConfigError(f"{what} {path} is larger than {limit // 1024} KiB")


_Entries = dict[str, tuple[Path, dict[str, Any]]]


def _merge(into: _Entries, items: object, key: str, path: Path) -> None:
    """Entries by name, the first file's winning, as in the client's merge."""
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(name := item.get("name"), str):
            fields = item.get(key)
            if isinstance(fields, dict):
                into.setdefault(name, (path, fields))


def check_kubeconfig(kubeconfig: str | None, context: str | None) -> Path | None:
    """Refuse, with a ConfigError, what would hang the client or exhaust its memory.

    Every kubeconfig file to be read, and the files that the chosen context's user and
    cluster name, must be regular files of bounded size; each is checked by its status,
    never opened. Relative paths are resolved as the client resolves them.

    Returns the file the chosen user's token is read from (`tokenFile`, when no `token`,
    exec plugin or auth provider gives one instead), for TokenFile to follow.
    """
    import yaml  # noqa: PLC0415

    users: _Entries = {}
    clusters: _Entries = {}
    contexts: _Entries = {}
    current: object = None
    for path in _kubeconfig_paths(kubeconfig):
        _check_file(path, "the kubeconfig", MAX_KUBECONFIG_BYTES)
        try:
            config = yaml.safe_load(path.read_bytes())
        except (OSError, yaml.YAMLError, RecursionError, ValueError):
            return None  # the client reports it on its own terms
        if isinstance(config, dict):
            _merge(users, config.get("users"), "user", path)
            _merge(clusters, config.get("clusters"), "cluster", path)
            _merge(contexts, config.get("contexts"), "context", path)
            current = config.get("current-context", current)
    chosen = context or current
    _, links = contexts.get(chosen, (None, {})) if isinstance(chosen, str) else (None, {})
    user = users.get(str(links.get("user")))
    cluster = clusters.get(str(links.get("cluster")))
    # (the file a key is read from, the directory it is resolved in): the client resolves
    # the user's certificate and key from the cluster's file, its token from its own.
    named = [
        (user, user, "tokenFile"),
        (user, cluster, "client-certificate"),
        (user, cluster, "client-key"),
        (cluster, cluster, "certificate-authority"),
    ]
    token_file = None
    for holder, base, key in named:
        if holder is None or base is None:
            continue
        value = holder[1].get(key)
        if isinstance(value, str) and value and f"{key}-data" not in holder[1]:
            target = base[0].parent / Path(value).expanduser()
            _check_file(target, key, MAX_CREDENTIAL_FILE_BYTES)
            if key == "tokenFile" and not _TOKEN_SOURCES & holder[1].keys():
                token_file = target
    return token_file


# A user's keys that give the token instead of its tokenFile (the client's order).
_TOKEN_SOURCES = frozenset({"token", "exec", "auth-provider"})


def api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """In-cluster service account when running in a pod and no kubeconfig is given."""
    import kubernetes  # noqa: PLC0415
    import yaml  # noqa: PLC0415
    from kubernetes.client import ApiClient, Configuration  # noqa: PLC0415

    configuration = Configuration()
    configuration.retries = _retries()
    try:
        if _in_cluster(kubeconfig, context):
            kubernetes.config.load_incluster_config(client_configuration=configuration)
            # Read where the loader just read it (tests point it elsewhere).
            token_file: Path | None = Path(
                kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME
            )
        else:
            token_file = check_kubeconfig(kubeconfig, context)
            kubernetes.config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        if token_file is not None:
            _follow(TokenFile(token_file), configuration)
        return ApiClient(configuration)
    except (
        ConfigError,
        kubernetes.config.ConfigException,
        yaml.YAMLError,
        RecursionError,
        *_CONFIG_ERRORS,
    ) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"cannot load cluster configuration from {where}: {detail}") from None


def _follow(token_file: TokenFile, configuration: Configuration) -> None:
    """Every request of the client carries the token file's current token: a rotated one
    from the next request on (exporter.sources.tokenfile).

    The client calls `refresh_api_key_hook` before it builds each request's headers; this
    one replaces the hook the configuration loader installed, which kept the token read at
    load time (a kubeconfig's tokenFile) or read it again only each minute (in-cluster).
    """

    def refresh(config: Configuration) -> None:
        token = token_file.token()
        if token is not None:
            config.api_key[BEARER_TOKEN] = f"Bearer {token}"
            config.api_key_prefix.pop(BEARER_TOKEN, None)

    refresh(configuration)
    configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]  # typed None


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without -n: the context's, or the pod's own in-cluster."""
    import kubernetes  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    if _in_cluster(kubeconfig, context):
        try:
            return Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        check_kubeconfig(kubeconfig, context)
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
    except (
        ConfigError,
        kubernetes.config.ConfigException,
        yaml.YAMLError,
        RecursionError,
        *_CONFIG_ERRORS,
    ):
        return "default"  # the same file fails to load next, with a clear message
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


class KubeTransport:
    """GET requests through the client's auth and connection pool, answered as raw bytes."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    def get(
        self, path: str, query: Sequence[tuple[str, str]], timeouts: Timeouts
    ) -> urllib3.BaseHTTPResponse:
        """Start a GET and return the unread response; raise ApiStatusError on non-2xx."""
        request = self._client.param_serialize(
            method="GET",
            resource_path=path,
            query_params=list(query),
            header_params={"Accept": "application/json"},
            auth_settings=[BEARER_TOKEN],
        )
        response = self._client.call_api(
            *request, _request_timeout=(timeouts.connect, timeouts.read)
        ).response
        if not 200 <= response.status <= 299:
            body = response.data or b""
            response.release_conn()
            error = status_error(response.status, response.reason or "", body)
            error.retry_after = retry_after_seconds(response.headers.get("Retry-After"))
            raise error
        return response

    def close(self) -> None:
        self._client.close()


def status_error(status: int, reason: str, body: bytes) -> ApiStatusError:
    """Build an ApiStatusError from a Status body when there is one."""
    import msgspec  # noqa: PLC0415 - only on the error path

    class _Status(msgspec.Struct):
        message: str = ""
        reason: str = ""

    try:
        decoded = msgspec.json.decode(body, type=_Status)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ApiStatusError(status, reason, body[:200].decode("utf-8", "replace"))
    return ApiStatusError(status, decoded.reason or reason, decoded.message)


def retry_after_seconds(value: str | None) -> float | None:
    """The delay of a Retry-After header given in seconds, as the API server sends it.

    None when absent or not a number of seconds (an HTTP date is not used by the API server).
    """
    if value is None:
        return None
    value = value.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return float(value)
