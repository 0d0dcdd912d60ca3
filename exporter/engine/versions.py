"""behaviour §12: Kubernetes versions, read in one place from flags, `/version` and image tags.

Every version the exporter reads goes through `parse_version` (flags and image tags) or
`parse_api_version` (the API server's `/version` fields), which share one grammar: ASCII
digits only, a minor of at most three digits, a bounded length, and one line saying what
was expected. Nothing else turns a version string into a number, so a version cannot be
read two ways (`1.٣٣` as 1.33, `1.33` repeated as 1.331) or crash the reader (a minor of
5,000 digits is more than Python's `int` reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The supported versions: older ones are evaluated as OLDEST_MINOR, newer ones as
# NEWEST_MINOR, and each says so (Profile.notes).
OLDEST_MINOR = 29
NEWEST_MINOR = 37
# Longer than any real version (`v1.33.2-eks-1a2b3c4+0123456789abcdef` is 36).
MAX_VERSION_CHARS = 64
# A shown value is cut to this many characters: an error is one short line.
_SHOWN_CHARS = 40

# `1.MINOR`, `v1.MINOR.PATCH` with a pre-release or build suffix, as image tags and
# `gitVersion` write it. re.ASCII: `\w` and friends would take other scripts' digits.
_VERSION = re.compile(
    r"v?1\.(?P<minor>[0-9]{1,3})(?:\.[0-9]{1,9}(?:[-+][0-9A-Za-z.+-]*)?)?", re.ASCII
)
# /version's `minor` field: digits, and on some providers a suffix such as `+` ("33+").
_API_MINOR = re.compile(r"(?P<minor>[0-9]{1,3})(?:[+-][0-9A-Za-z.+-]*)?", re.ASCII)


class ProfileError(ValueError):
    """A version or gate setting that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """What the API server's `/version` says the control plane runs."""

    # The version whose gate defaults the server runs with: `emulationMinor` when the server
    # emulates an older version (`--emulated-version`), else its binary's `minor`.
    minor: int
    # The binary's minor when it emulates another version; None when it does not.
    binary_minor: int | None = None


def shown(text: str) -> str:
    """`text` quoted for a one-line message, cut when long (with its length)."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}... ({len(text):,} characters)"


def parse_version(text: str, what: str = "--kubernetes-version") -> int:
    """The MINOR of `1.MINOR` (`v1.33` and `1.33.2` are read too); ProfileError otherwise.

    Surrounding whitespace is ignored; an empty value is an error, not "no version".
    """
    match = _VERSION.fullmatch(text.strip()) if len(text) <= MAX_VERSION_CHARS else None
    if match is None:
        raise ProfileError(f"{what}: expected 1.MINOR (for example 1.33), got {shown(text)}")
    return int(match.group("minor"))


def version_or_none(text: str) -> int | None:
    """parse_version's minor, or None where `text` does not read as a 1.x version."""
    try:
        return parse_version(text)
    except ProfileError:
        return None


def parse_api_version(major: str, minor: str, what: str) -> int:
    """The minor of a `/version` major/minor pair (`"1"`, `"33"` or `"33+"`).

    ProfileError (naming `what`, e.g. "the API server's /version") when the pair does not
    read as 1.MINOR.
    """
    match = (
        _API_MINOR.fullmatch(minor) if major == "1" and len(minor) <= MAX_VERSION_CHARS else None
    )
    if match is None:
        raise ProfileError(f"{what} ({shown(major)}, {shown(minor)}) does not read as 1.MINOR")
    return int(match.group("minor"))


def clamped(minor: int) -> int:
    """The supported minor whose rules apply to `minor`."""
    return min(max(minor, OLDEST_MINOR), NEWEST_MINOR)
