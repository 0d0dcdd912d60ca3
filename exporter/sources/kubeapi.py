"""The `kubernetes` client for configuration, authentication and transport, and nothing more.

Responses are read as raw bytes and decoded by `exporter.decode`: the client's models
cost about 20x more time and 7x more memory on a large EndpointSlice list.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import urllib3

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

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


def api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """In-cluster service account when running in a pod and no kubeconfig is given."""
    import kubernetes  # noqa: PLC0415
    import yaml  # noqa: PLC0415
    from kubernetes.client import ApiClient, Configuration  # noqa: PLC0415

    configuration = Configuration()
    configuration.retries = _retries()
    try:
        if kubeconfig is None and context is None and "KUBERNETES_SERVICE_HOST" in os.environ:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        else:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        return ApiClient(configuration)
    except (kubernetes.config.ConfigException, yaml.YAMLError, *_CONFIG_ERRORS) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"cannot load cluster configuration from {where}: {detail}") from None


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without -n: the context's, or the pod's own in-cluster."""
    import kubernetes  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    if kubeconfig is None and context is None and "KUBERNETES_SERVICE_HOST" in os.environ:
        try:
            return Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
    except (kubernetes.config.ConfigException, yaml.YAMLError, *_CONFIG_ERRORS):
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
            auth_settings=["BearerToken"],
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
