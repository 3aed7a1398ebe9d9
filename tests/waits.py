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
