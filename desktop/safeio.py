"""Bounded, non-blocking reads of files a user or a driver controls (settings, records, sysfs/proc).

``open()`` of a FIFO with no writer blocks for ever, ``read()`` of ``/dev/zero`` or a huge file
fills memory. ``read_bounded`` opens with ``O_NONBLOCK`` (a FIFO opens at once), accepts only
a regular file (sysfs and /proc attributes stat as regular files) and reads at most ``limit``
bytes. A refusal is a ``FileRefused`` (an ``OSError``) whose text is the one line to show.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["FileRefused", "open_stream", "read_bounded", "refusal"]


class FileRefused(OSError):
    """A file not read: not a regular file, or larger than the cap. ``str()`` is the line to show."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(errno.EINVAL, why, str(path))
        self.why = why

    def __str__(self) -> str:
        return f"{self.filename}: {self.why}"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def refusal(path: Path | str, mode: int) -> FileRefused | None:
    """Why a file of ``mode`` is not read as a regular file, or None when it is one."""
    if stat.S_ISREG(mode):
        return None
    return FileRefused(path, f"is {_kind(mode)}, not a regular file")


def read_bounded(path: Path | str, limit: int, *, truncate: bool = False) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``, never blocking on open or read.

    ``truncate=False``: a file over ``limit`` is refused (a settings file, a record);
    ``truncate=True``: its first ``limit`` bytes are returned (a sysfs value, a list file).
    Raises ``FileNotFoundError`` and other ``OSError`` as ``open`` does, ``FileRefused`` for a
    file that is not regular or too large."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        problem = refusal(path, os.fstat(fd).st_mode)
        if problem is not None:
            raise problem
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            try:
                chunk = os.read(fd, min(left, 1 << 16))
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        if not truncate:
            raise FileRefused(path, f"is too large (over {_size(limit)}): not read")
        data = data[:limit]
    return data


def open_stream(path: Path | str) -> BinaryIO:
    """``path`` opened for reading without waiting for a writer: for a stream read line by line
    (an nvidia-smi log, which may be a pipe from ``<(nvidia-smi ...)``). A FIFO nobody writes to
    reads as empty at once instead of blocking ``open``; the reads that follow block as usual."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                 | getattr(os, "O_BINARY", 0))
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _size(limit: int) -> str:
    if limit >= 1 << 20 and limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit >= 1 << 10 and limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"
