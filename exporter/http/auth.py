"""Authentication of HTTP requests: what the server asks of a scheme, and basic auth."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Protocol

from exporter.http.webconfig import PasswordCheck


class Authenticator(Protocol):
    """What the server asks of an authentication scheme, in two steps: `known` runs on the
    event loop and must be cheap; `check` may be slow (bcrypt) and runs on its own threads."""

    # The WWW-Authenticate header of a 401.
    challenge: str

    def known(self, header: str) -> bool | None:
        """The verdict on an Authorization header if it needs no slow work, else None."""

    def check(self, header: str) -> bool:
        """The verdict on an Authorization header that `known` left open."""


class BasicAuth:
    """HTTP basic auth as exporter-toolkit's basic_auth_users: webconfig.PasswordCheck checks
    the credentials (bcrypt), what needs no bcrypt on the loop, the rest on a thread."""

    challenge = 'Basic realm="topology-hints-exporter", charset="UTF-8"'

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._check = PasswordCheck(users)

    def known(self, header: str) -> bool | None:
        """False for missing or malformed credentials and for passwords bcrypt cannot read,
        True for ones verified before; None for the rest (unknown users too: their decoy
        check must take bcrypt's time)."""
        credentials = _basic_credentials(header)
        if credentials is None:
            return False
        return self._check.known(*credentials)

    def check(self, header: str) -> bool:
        credentials = _basic_credentials(header)
        return credentials is not None and self._check.verify(*credentials)


def _basic_credentials(header: str) -> tuple[bytes, bytes] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, separator, password = decoded.partition(b":")
    return (user, password) if separator else None
