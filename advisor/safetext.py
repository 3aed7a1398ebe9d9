"""Strings that came from outside (process, GPU and file names, log cells) made safe to print or publish.

Another user on the machine chooses a process's name (``prctl(PR_SET_NAME)``), an imported
log chooses GPU names: written to a terminal, an ESC sequence in one retitles the window or
hides text, and a bidi override (U+202E) makes ``evil\u202etxt.exe`` read as ``evilexe.txt``
in a report. ``printable`` is for terminals, ``neutralise_bidi`` for reports (HTML/PDF/CSV).
Both replace what they remove with a visible escape (``\\x1b``, ``\\u202e``) rather than
dropping it, so the reader sees that something was there.
"""

from __future__ import annotations

import re

#: Bidi embeddings/overrides (U+202A-U+202E) and isolates (U+2066-U+2069).
_BIDI = "\u202a-\u202e\u2066-\u2069"
_BIDI_RE = re.compile(f"[{_BIDI}\\ud800-\\udfff]")
#: Lone surrogates: psutil and os decode /proc with ``surrogateescape`` (a byte 0xNN that is not
#: UTF-8 becomes U+DCNN), JSON may carry ``\\ud800``; neither can be encoded as UTF-8.
_SURROGATES = "\ud800-\udfff"
#: C0 controls and DEL, C1 controls (a lone 0x9b is CSI on some terminals), and the bidi controls.
_UNPRINTABLE_RE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029{_SURROGATES}]")
_UNPRINTABLE_KEEP_NEWLINES_RE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029{_SURROGATES}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a surrogate-escaped byte: show the byte it stands for
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` for a terminal: control characters and bidi controls become ``\\x1b``-style escapes.

    ``keep_newlines`` is for a whole rendered table whose own line breaks must stay (its cells
    should have gone through ``printable`` already where a forged line would matter).
    """
    pattern = _UNPRINTABLE_KEEP_NEWLINES_RE if keep_newlines else _UNPRINTABLE_RE
    return pattern.sub(_escape, str(text))


def neutralise_bidi(text: str) -> str:
    """``text`` with every bidi override/isolate (and lone surrogate) shown escaped, so it encodes as UTF-8."""
    return _BIDI_RE.sub(_escape, text)
