"""A bearer token read from a file, and read again whenever the file changes.

A kubelet rotates the ServiceAccount token it projects into a pod: it writes a new token
into a new folder and swaps a symlink to it, long before the old one expires. client-go
reads a token file again every minute; the `kubernetes` Python client reads a kubeconfig's
`tokenFile` once (a long-running exporter then sends a dead token for ever) and the
in-cluster token at most once a minute. Here the file's identity (device, inode, size,
modification time, through the symlinks) is looked at before every request, one stat(),
and the token read again as soon as it changed.

`exporter.sources.kubeapi` makes the client ask for it before each request.

A file that cannot be read as a token at that moment (missing between two writes, empty,
not a regular file, too large) leaves the last token in use; the API server says whether
it is still good.
"""

from __future__ import annotations

import stat
import threading
from pathlib import Path

# A token is a JWT of a few kilobytes; anything this large is not one (and is not read).
MAX_TOKEN_BYTES = 1024 * 1024

_Identity = tuple[int, int, int, int]


class TokenFile:
    """The token in `path`, read again when the file is replaced or rewritten."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._identity: _Identity | None = None
        self._token: str | None = None

    def token(self) -> str | None:
        """The current token (None until the file has held one)."""
        with self._lock:
            try:
                status = self.path.stat()
            except OSError:
                return self._token
            identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
            if identity == self._identity:
                return self._token
            if stat.S_ISREG(status.st_mode) and status.st_size <= MAX_TOKEN_BYTES:
                try:
                    text = self.path.read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError):
                    text = ""
                if text:
                    self._token, self._identity = text, identity
            return self._token
