"""The API server's version (`GET /version`), for the Kubernetes profile of behaviour §12.

Read through the same transport (the `kubernetes` client's configuration, auth and pool) as
the lists and watches. `/version` is readable by every authenticated client (the
system:public-info-viewer role), so no extra RBAC is needed.

The answer is a few hundred bytes: it is read within MAX_VERSION_BYTES and VERSION_TIMEOUT
seconds, whatever the server sends, and its fields go through the engine's one version
parser. A server started with `--emulated-version` reports `emulationMajor` and
`emulationMinor` beside its binary's `major` and `minor`; it runs with the emulated
version's gate defaults, so that is the profile's version.
"""

from __future__ import annotations

import time
from dataclasses import replace

import msgspec
import urllib3

from exporter.engine.versions import ProfileError, ServerVersion, parse_api_version
from exporter.sources.kubeapi import ApiStatusError, KubeTransport, Timeouts

VERSION_PATH = "/version"
# A real answer is under 1 KiB; a larger one is not a version.
MAX_VERSION_BYTES = 64 * 1024
# The whole request: connecting, waiting and reading (the informers start after it).
VERSION_TIMEOUT = 10.0
_CHUNK = 4096
_WHAT = "the API server's /version"


class _Version(msgspec.Struct):
    major: str = ""
    minor: str = ""
    emulationMajor: str | None = None  # noqa: N815 - the API's field name
    emulationMinor: str | None = None  # noqa: N815 - the API's field name
    gitVersion: str = ""  # noqa: N815 - the API's field name


class VersionReadError(Exception):
    """The /version answer could not be read in time or within its size."""


def _bounded_body(response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
    """The body, read as it arrives (each read returns what one wait brought), within
    MAX_VERSION_BYTES and the deadline; VersionReadError otherwise."""
    parts: list[bytes] = []
    size = 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > MAX_VERSION_BYTES:
            raise VersionReadError(f"its answer is larger than {MAX_VERSION_BYTES // 1024} KiB")
        if time.monotonic() > deadline:
            raise VersionReadError(f"its answer took longer than {VERSION_TIMEOUT:g} s")
        parts.append(chunk)
    return b"".join(parts)


def server_version(version: _Version) -> ServerVersion:
    """The profile's version from the decoded fields; ProfileError when they do not read."""
    binary = parse_api_version(version.major, version.minor, _WHAT)
    if version.emulationMajor is None and version.emulationMinor is None:
        return ServerVersion(binary)
    emulated = parse_api_version(
        version.emulationMajor or "", version.emulationMinor or "", f"{_WHAT}'s emulation"
    )
    return ServerVersion(emulated, None if emulated == binary else binary)


def read_server_version(
    transport: KubeTransport, timeouts: Timeouts
) -> tuple[ServerVersion | None, str]:
    """(the control plane's version, "") or (None, why it cannot be told, in one line).

    The caller says so in its own way (a log line, a warning on stderr): the newest
    semantics then apply. Never raises for what the server answers.
    """
    deadline = time.monotonic() + VERSION_TIMEOUT
    bounded = replace(
        timeouts,
        connect=min(timeouts.connect, VERSION_TIMEOUT),
        read=min(timeouts.read, VERSION_TIMEOUT),
    )
    try:
        response = transport.get(VERSION_PATH, (), bounded)
        try:
            body = _bounded_body(response, deadline)
        except BaseException:
            # What is left unread must not reach the next request on this connection.
            response.close()
            raise
        finally:
            response.release_conn()
        decoded = msgspec.json.decode(body, type=_Version)
        return server_version(decoded), ""
    except ProfileError as error:
        return None, str(error)
    except (
        ApiStatusError,
        OSError,
        urllib3.exceptions.HTTPError,
        msgspec.DecodeError,
        VersionReadError,
    ) as error:
        return None, f"cannot read {_WHAT} ({error})"
