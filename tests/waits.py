"""Waits that hold on a busy machine: for the thing itself, never for a sign before it.

A file's existence is not its content: a child that ``open(path, "w").write(...)`` makes the file
empty first, and a test that waits for ``path.exists()`` and reads may read ``''`` (issue 34 item 9).
Children write with ``WRITE_ATOMIC`` (a temporary name, then a rename), and tests read with
``read_when`` (until the content parses). Deadlines are generous: they only bound a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: Long enough for a child Python to start on two cores shared with a build; a failure still ends.
DEADLINE_S = 60.0
#: Child-side code (a string to put in ``python -c``): ``_write(path, text)`` writes whole or not at all.
WRITE_ATOMIC = ("def _write(path, text):\n"
                "    import os\n"
                "    with open(path + '.part', 'w') as f:\n"
                "        f.write(text)\n"
                "    os.replace(path + '.part', path)\n")


def until(condition: Callable[[], bool], timeout_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout_s:g} s")
        time.sleep(0.005)


def read_when(path: Path, parse: Callable[[str], T], timeout_s: float = DEADLINE_S) -> T:
    """``parse(path's text)`` once the file exists and its content parses (it may be mid-write before)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return parse(path.read_text())
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not hold a readable value in {timeout_s:g} s") from None
            time.sleep(0.005)


def handles_signal(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``sig`` now (Linux: ``SigCgt`` in /proc/PID/status).

    A signal sent to a program before it installed its handler takes the default action (SIGTERM kills, SIGTSTP
    stops): a test that signals a child waits for this, not for a sign the child gave earlier."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


class TerminalOutput:
    """What a child writes to a pseudo-terminal (``slave``: its stdout/stderr), read on a thread as it comes.

    A program draws progress only on a terminal; reading it is how a test waits for the progress itself, and
    reading it all the time keeps the child from blocking on a full terminal buffer."""

    def __init__(self) -> None:
        import os
        import threading

        self.master, self.slave = os.openpty()
        self._data = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="terminal-output", daemon=True)

    def start(self) -> None:
        """Once the child holds ``slave``: close ours (the reader sees the end when the child's copy closes)."""
        import os

        os.close(self.slave)
        self._thread.start()

    def _read(self) -> None:
        import os

        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            with self._lock:
                self._data += chunk
        os.close(self.master)

    @property
    def data(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def finish(self, timeout_s: float = DEADLINE_S) -> bytes:
        """Everything written, once the child's end closed."""
        self._thread.join(timeout_s)
        return self.data
