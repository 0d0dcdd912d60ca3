"""Text for a terminal: cluster strings are shown, never obeyed.

Names, annotations and labels come from the cluster, and anyone who may edit a Service can
put an escape sequence in one: written raw, it would clear, retitle or redraw the terminal
of the operator reading `explain`. Every text renderer writes through `printable`, which
shows each control character as an escape (`\\x1b`, `\\r`, `\\x07`, `\\x9b`) and keeps
every printable character, non-ASCII ones included. JSON output goes through
`json_printable`: its encoder escapes C0 controls itself, but writes DEL and C1 raw.

Bidirectional formatting characters count as controls too (`\\u202e`): they do not move
the cursor, but a terminal that reorders text (or a copy into a browser or editor) shows
the rest of the line reversed or moved, so a value can make `explain` appear to say what
it does not (the "Trojan Source" class, CVE-2021-42574). Unicode's embeddings, overrides
and isolates (U+202A-U+202E, U+2066-U+2069) and the invisible marks that change
neighbours' direction (LRM U+200E, RLM U+200F, ALM U+061C) are escaped; right-to-left
letters themselves are printable text and stay.
"""

from __future__ import annotations

import re

# C0 but newline (the renderers' own line breaks), DEL, C1 (U+0080-U+009F: `\x9b` is a CSI
# of its own to terminals that read 8-bit controls), and the bidirectional controls.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
# The colour codes the renderers paint with (explain's, and the reset): with colour on,
# these are kept and any other escape sequence is shown.
_PAINT = r"\x1b\[(?:0|1|3[1-3])m"
_CONTROL_OR_PAINT = re.compile(f"({_PAINT})|{_CONTROL.pattern}")
# DEL, C1 and the bidirectional controls as UTF-8 encodes them (C2 80-9F; D8 9C; E2 80 8E,
# 8F, AA-AE; E2 81 A6-A9): these byte sequences mean nothing else in UTF-8.
_JSON_CONTROL = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]"
)
_NAMED = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _escaped(character: str) -> str:
    code = ord(character)
    return _NAMED.get(character) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


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
    """UTF-8 JSON with DEL, C1 and bidirectional controls written as `\\uXXXX` escapes (the
    same string)."""
    return _JSON_CONTROL.sub(lambda match: b"\\u%04x" % ord(match.group(0).decode()), document)
