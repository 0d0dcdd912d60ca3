"""TokenFile: the token of a file, read again when a kubelet swaps or rewrites it."""

from __future__ import annotations

import os
from pathlib import Path

from exporter.sources.tokenfile import MAX_TOKEN_BYTES, TokenFile
from tests.realcluster.installed import ProjectedToken


def test_a_swapped_projected_token_is_read_at_the_next_call(tmp_path: Path) -> None:
    """The kubelet's symlink swap (..data to a new folder) gives the new token at once."""
    projected = ProjectedToken(tmp_path / "serviceaccount")
    projected.write("first\n")
    token = TokenFile(projected.path)
    assert token.token() == "first"
    projected.write("second")
    assert token.token() == "second"


def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    token = TokenFile(path)
    assert token.token() == "one"
    path.write_text("three")  # another size
    assert token.token() == "three"


def test_what_is_not_a_token_keeps_the_last_one(tmp_path: Path) -> None:
    """Missing, empty, a FIFO (never opened: it would hang) or too large: the last token."""
    path = tmp_path / "token"
    path.write_text("kept")
    token = TokenFile(path)
    assert token.token() == "kept"
    path.write_text("")
    assert token.token() == "kept"
    path.unlink()
    assert token.token() == "kept"
    os.mkfifo(path)
    assert token.token() == "kept"
    path.unlink()
    path.write_bytes(b"x" * (MAX_TOKEN_BYTES + 1))
    assert token.token() == "kept"


def test_no_file_no_token(tmp_path: Path) -> None:
    assert TokenFile(tmp_path / "absent").token() is None
