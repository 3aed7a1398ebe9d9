"""The suite's waits hold on a busy machine (issue 34 item 9): a file is read once its content parses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.waits import WRITE_ATOMIC, read_when


def test_a_pid_file_seen_empty_is_read_once_written(tmp_path: Path) -> None:
    """``open(path, "w")`` makes the file before its text: the first look finds ``''`` (seen under load)."""
    pid_file = tmp_path / "child.pid"
    pid_file.write_text("")  # the child between open() and write()
    looks: list[str] = []

    def parse(text: str) -> int:
        looks.append(text)
        if len(looks) == 1:
            pid_file.write_text("4242")  # the child's write lands after the first look
        return int(text)

    assert read_when(pid_file, parse) == 4242
    assert looks == ["", "4242"]


def test_an_atomic_write_from_a_child_is_never_seen_half_done(tmp_path: Path) -> None:
    path = tmp_path / "value"
    code = f"{WRITE_ATOMIC}for i in range(200):\n    _write({str(path)!r}, str(10 ** 50 + i))\n"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        seen = {read_when(path, int) for _ in range(200)}
    finally:
        assert child.wait(60) == 0
    assert all(10 ** 50 <= value < 10 ** 50 + 200 for value in seen)
    assert read_when(path, int) == 10 ** 50 + 199


@pytest.mark.parametrize("text", ["", "12", "x"])
def test_read_when_gives_up_with_a_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "never"
    if text:
        path.write_text(text)
    if text == "12":
        assert read_when(path, int, timeout_s=0.05) == 12
        return
    with pytest.raises(AssertionError, match="did not hold a readable value"):
        read_when(path, int, timeout_s=0.05)
