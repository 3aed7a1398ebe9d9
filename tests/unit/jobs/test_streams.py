"""How the wrapped job's output is wired (desktop/jobs/streams.py), without a job: one pty for a shared terminal
with its window size and no output processing, pipes where asked or where rigscope's stream is a file, the pipes
widened where Linux allows."""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from desktop.jobs.streams import Wiring, open_relays

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX ptys and pipes")


@contextmanager
def wired(stdout_fd: int, stderr_fd: int, use_pty: bool | None) -> Iterator[Wiring]:
    wiring = open_relays(stdout_fd, stderr_fd, use_pty)
    try:
        yield wiring
    finally:
        for fd in {*wiring.close_after, *(r.src for r in wiring.relays)}:
            os.close(fd)


@contextmanager
def terminal(rows: int = 33, cols: int = 101) -> Iterator[tuple[int, int]]:
    """Two descriptors of one pty's slave end with a window size: rigscope's stdout and stderr on the user's
    terminal (two numbers for one terminal, as 1 and 2 are)."""
    import fcntl
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    other = os.dup(slave)
    try:
        yield slave, other
    finally:
        for fd in (master, slave, other):
            os.close(fd)


def test_one_terminal_for_both_streams_is_one_pty_with_its_size_and_no_output_processing() -> None:
    import fcntl
    import termios

    with terminal(rows=33, cols=101) as (out, err), wired(out, err, None) as wiring:
        (relay,) = wiring.relays
        assert (relay.dst, relay.stream, relay.pty, relay.closed) == (out, 2, True, False)
        assert wiring.child_out == wiring.child_err and wiring.close_after == [wiring.child_out]
        child = wiring.child_out
        assert child is not None and os.isatty(child)
        size = fcntl.ioctl(child, termios.TIOCGWINSZ, b"\0" * 8)
        assert struct.unpack("HHHH", size)[:2] == (33, 101)
        assert not termios.tcgetattr(child)[1] & termios.OPOST  # "\n" is not turned into "\r\n" twice


def test_pipes_where_asked_even_on_a_terminal() -> None:
    with terminal() as (out, err), wired(out, err, False) as wiring:
        assert [(r.dst, r.stream, r.pty) for r in wiring.relays] == [(out, 1, False), (err, 2, False)]
        assert wiring.child_out != wiring.child_err
        assert wiring.close_after == [wiring.child_out, wiring.child_err]
        assert not any(os.isatty(fd) for fd in wiring.close_after)


def test_a_file_gets_a_pipe_and_a_terminal_its_own_pty(tmp_path: Path) -> None:
    with (tmp_path / "out").open("wb") as out, terminal() as (tty, _), wired(out.fileno(), tty, None) as wiring:
        assert [(r.dst, r.stream, r.pty) for r in wiring.relays] == [(out.fileno(), 1, False), (tty, 2, True)]
        assert wiring.child_out is not None and not os.isatty(wiring.child_out)
        assert wiring.child_err is not None and os.isatty(wiring.child_err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_GETPIPE_SZ is Linux's")
def test_the_pipes_are_widened_where_linux_allows(tmp_path: Path) -> None:
    import fcntl

    get_size = getattr(fcntl, "F_GETPIPE_SZ", 1032)
    allowed = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err, \
            wired(out.fileno(), err.fileno(), None) as wiring:
        assert len(wiring.close_after) == 2
        for fd in wiring.close_after:
            size = fcntl.fcntl(fd, get_size)
            assert size == 1 << 20 if allowed >= 1 << 20 else size < 1 << 20
