"""The one CSV writer of Rigscope (`rigscope export --format csv`, the weekly report's CSV).

A cell that starts with ``= + - @``, a tab or a carriage return is run as a formula by
Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)``, ``=cmd|' /C calc'!A0``), and names in
these files come from outside: a process names itself, an imported log names its GPUs. Such
a cell gets a leading ``'`` (OWASP's advice); numbers, and text that is just a number such
as ``-3.5``, stay numbers. Bidi overrides are shown as ``\\u202e`` (``advisor.safetext``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import TextIO

from advisor.safetext import neutralise_bidi

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def safe_cell(value: object) -> object:
    """What to write for ``value``: None and NaN as an empty cell, formula-like text defused."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if not isinstance(value, str):
        return value
    text = neutralise_bidi(value)
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.match(text):
        return "'" + text
    return text


def _field(value: object) -> str:
    """RFC 4180 quoting. ``csv.writer`` leaves a lone CR unquoted when lines end in LF, and a name
    holding one would then start a new row in a spreadsheet: any CR or LF is quoted here."""
    text = value if isinstance(value, str) else str(value)
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


class CsvWriter:
    """Rows of cells, each passed through ``safe_cell``, quoted only where needed, ``\\n`` line ends."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def writerow(self, cells: Iterable[object]) -> None:
        self._out.write(",".join(_field(safe_cell(c)) for c in cells) + "\n")
