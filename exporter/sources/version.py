"""The API server's version (`GET /version`), for the Kubernetes profile of behaviour §12.

Read through the same transport (the `kubernetes` client's configuration, auth and pool) as
the lists and watches. `/version` is readable by every authenticated client (the
system:public-info-viewer role), so no extra RBAC is needed.
"""

from __future__ import annotations

import msgspec
import urllib3

from exporter.engine.profile import parse_api_minor
from exporter.sources.kubeapi import ApiStatusError, KubeTransport, Timeouts, read_body

VERSION_PATH = "/version"


class _Version(msgspec.Struct):
    major: str = ""
    minor: str = ""
    gitVersion: str = ""  # noqa: N815 - the API's field name


def read_server_minor(transport: KubeTransport, timeouts: Timeouts) -> tuple[int | None, str]:
    """(the control plane's minor version, "") or (None, why it cannot be told).

    The caller says so in its own way (a log line, a warning on stderr): the newest
    semantics then apply.
    """
    try:
        response = transport.get(VERSION_PATH, (), timeouts)
        try:
            body = read_body(response, timeouts)
        finally:
            response.release_conn()
        version = msgspec.json.decode(body, type=_Version)
    except (ApiStatusError, OSError, urllib3.exceptions.HTTPError, msgspec.DecodeError) as error:
        return None, f"cannot read the API server's /version ({error})"
    minor = parse_api_minor(version.major, version.minor)
    if minor is None:
        return None, (
            f"the API server's /version ({version.major}.{version.minor}) does not read as 1.MINOR"
        )
    return minor, ""
