"""Text for a terminal: cluster strings are shown, never obeyed.

Names, annotations and labels come from the cluster, and anyone who may edit a Service can
put an escape sequence in one: written raw, it would clear, retitle or redraw the terminal
of the operator reading `explain`. Every text renderer writes through `printable`, which
shows each control character as an escape (`\\x1b`, `\\r`, `\\x07`, `\\x9b`) and keeps
every printable character, non-ASCII ones included. JSON output goes through
`json_printable`: its encoder escapes C0 controls itself, but writes DEL and C1 raw.
"""

from __future__ import annotations

import re

# C0 but newline (the renderers' own line breaks), DEL, and C1 (U+0080-U+009F: `\x9b` is
# a CSI of its own to terminals that read 8-bit controls).
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
# The colour codes the renderers paint with (explain's, and the reset): with colour on,
# these are kept and any other escape sequence is shown.
_PAINT = r"\x1b\[(?:0|1|3[1-3])m"
_CONTROL_OR_PAINT = re.compile(f"({_PAINT})|{_CONTROL.pattern}")
# DEL and C1 as UTF-8 encodes them (C2 80-C2 9F); these bytes mean nothing else in UTF-8.
_JSON_CONTROL = re.compile(rb"\x7f|\xc2[\x80-\x9f]")
_NAMED = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _escaped(character: str) -> str:
    return _NAMED.get(character) or f"\\x{ord(character):02x}"


def printable(text: str, *, colour: bool = False, newlines: bool = True) -> str:
    """`text` with every control character shown as an escape.

    `colour`: keep the colour codes the renderers paint with (those `explain` paints Tone with).
    A cluster string holding one of those exact codes can then recolour text that
    follows, never move the cursor, clear, retitle or hide it. `newlines`: keep line
    breaks (off for a value that must stay on one line).
    """
    if not newlines:
        text = text.replace("\n", "\\n")
    if colour:
        return _CONTROL_OR_PAINT.sub(lambda match: match.group(1) or _escaped(match.group(0)), text)
    return _CONTROL.sub(lambda match: _escaped(match.group(0)), text)


def json_printable(document: bytes) -> bytes:
    """UTF-8 JSON with DEL and C1 characters written as `\\u00XX` escapes (the same string)."""
    return _JSON_CONTROL.sub(lambda match: b"\\u%04x" % ord(match.group(0).decode()), document)
