"""Reading a text log of unknown origin line by line: its encoding guessed, each line's length capped.

Logs come from anywhere: PowerShell 5's ``nvidia-smi ... > log.csv`` writes UTF-16 LE with a
byte-order mark, a log saved on Windows may be cp1252 (``°C`` is the single byte 0xB0), and a
wrong file (a 78 MB one-line dump, ``/dev/zero``) must neither fill memory nor run forever.
A line is handed over as ``str``; one that cannot be is an ``Unreadable`` whose text is the
reason, which the parser records as a skipped line with its number.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Iterator
from typing import BinaryIO

#: No nvidia-smi line comes near this (every field of ``--query-gpu`` is well under 4 KiB).
MAX_LINE_BYTES = 64 << 10
_BINARY = "binary data (NUL bytes): not a text log; stopped reading the file"


class Unreadable(str):
    """A line that is not handed over; the string says why. ``fatal``: nothing after it is read."""

    fatal: bool = False


def _unreadable(reason: str, fatal: bool = False) -> Unreadable:
    line = Unreadable(reason)
    line.fatal = fatal
    return line


def _too_long(limit: int) -> Unreadable:
    return _unreadable(f"longer than {limit // 1024} KiB: not an nvidia-smi line (skipped without reading it all)")


def _decode(raw: bytes) -> str:
    """UTF-8, else cp1252 (Windows' ANSI code page in the West), else latin-1 (which takes any byte)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _utf16_without_bom(head: bytes) -> str | None:
    """ASCII text in UTF-16 has a NUL in every other byte; a BOM-less UTF-16 log is told apart by that."""
    if len(head) >= 4 and head[0] and not head[1] and head[2] and not head[3]:
        return "utf-16-le"
    if len(head) >= 4 and not head[0] and head[1] and not head[2] and head[3]:
        return "utf-16-be"
    return None


class LogLines:
    """The lines of a file opened in binary mode, as ``str`` or ``Unreadable``; ``bytes_read`` for progress."""

    def __init__(self, handle: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._handle = handle
        self._limit = max_line_bytes
        self.bytes_read = 0
        self.encoding = "utf-8"

    def __iter__(self) -> Iterator[str]:
        head = self._peek(4)
        if head.startswith(codecs.BOM_UTF8):
            self._handle.read(len(codecs.BOM_UTF8))
            self.bytes_read += len(codecs.BOM_UTF8)
            return self._byte_lines()
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            self.encoding = "utf-16"  # the codec reads the BOM and drops it
            return self._text_lines("utf-16")
        guessed = _utf16_without_bom(head)
        if guessed is not None:
            self.encoding = guessed
            return self._text_lines(guessed)
        return self._byte_lines()

    def _peek(self, size: int) -> bytes:
        peek = getattr(self._handle, "peek", None)
        if peek is not None:
            return bytes(peek(size)[:size])
        return b""  # an unbuffered stream: read as UTF-8/cp1252

    def _byte_lines(self) -> Iterator[str]:
        limit = self._limit
        while True:
            raw = self._handle.readline(limit + 1)
            if not raw:
                return
            self.bytes_read += len(raw)
            if b"\0" in raw:
                yield _unreadable(_BINARY, fatal=True)
                return
            if len(raw) > limit and not raw.endswith(b"\n"):
                # Skip to the end of the line a chunk at a time, never holding it whole.
                while True:
                    rest = self._handle.readline(limit + 1)
                    self.bytes_read += len(rest)
                    if b"\0" in rest:
                        yield _unreadable(_BINARY, fatal=True)
                        return
                    if not rest or rest.endswith(b"\n"):
                        break
                yield _too_long(limit)
                continue
            yield _decode(raw)

    def _text_lines(self, encoding: str) -> Iterator[str]:
        limit = self._limit // 2  # characters: two bytes each in UTF-16
        text = io.TextIOWrapper(self._handle, encoding=encoding, errors="replace", newline="")
        try:
            while True:
                line = text.readline(limit + 1)
                if not line:
                    return
                self.bytes_read += 2 * len(line)
                if "\0" in line:
                    yield _unreadable(_BINARY, fatal=True)
                    return
                if len(line) > limit and not line.endswith(("\n", "\r")):
                    while True:
                        rest = text.readline(limit + 1)
                        self.bytes_read += 2 * len(rest)
                        if "\0" in rest:
                            yield _unreadable(_BINARY, fatal=True)
                            return
                        if not rest or rest.endswith(("\n", "\r")):
                            break
                    yield _too_long(self._limit)
                    continue
                yield line
        finally:
            text.detach()  # the caller owns (and closes) the file
