"""How the wrapped job's output reaches rigscope: a pseudo-terminal or a pipe per stream, made before it starts.

Where rigscope's own stream is a terminal, the job gets a pseudo-terminal instead (one for both when
both are the same terminal, which keeps their order), so ``isatty()`` stays true and tqdm still draws;
the pty's output processing is off, so ``\\n`` is not turned into ``\\r\\n`` twice. Where it is a file or
a pipe, the job gets a pipe (widened where Linux allows). On Windows it is pipes always. ``open_relays``
makes them; ``desktop.jobs.wrap.WrappedJob`` hands the child's ends to the job and passes each relay on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Linux pipes hold 64 KiB by default: a wider one halves the relay's wake-ups for a job that prints a lot.
_PIPE_BYTES = 1 << 20


@dataclass
class Relay:
    src: int  # the descriptor rigscope reads the job's output from
    dst: int  # where it goes on: 1 or 2
    stream: int  # which of the job's streams (1: stdout, 2: stderr; a shared pty counts as 2)
    pty: bool
    closed: bool = False  # ``src`` closed early: the reader of ``dst`` went away


@dataclass
class Wiring:
    """The job's output, wired: rigscope's ends (``relays``) and the child's (its stdout and stderr, and
    the descriptors to close once the job has them)."""

    relays: list[Relay]
    child_out: int | None
    child_err: int | None
    close_after: list[int]


def _same_terminal(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino, sa.st_rdev) == (sb.st_dev, sb.st_ino, sb.st_rdev)


def _is_tty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _widen_pipe(fd: int) -> None:
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, _PIPE_BYTES)
        except OSError:  # over /proc/sys/fs/pipe-max-size for an unprivileged user: keep the default
            pass


def _open_pty(like_fd: int) -> tuple[int, int]:
    """(master, slave) of a new pty with ``like_fd``'s window size and no output processing."""
    import fcntl
    import termios

    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # oflag: bytes pass unchanged
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    try:
        size = fcntl.ioctl(like_fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    except OSError:
        pass
    return master, slave


def open_relays(stdout_fd: int, stderr_fd: int, use_pty: bool | None) -> Wiring:
    """A pty or a pipe for each of the job's output streams, as rigscope's ``stdout_fd`` and ``stderr_fd``
    are (``use_pty``: None decides from them, False: pipes only)."""
    posix = os.name == "posix"
    relays: list[Relay] = []
    child_out: int | None = None
    child_err: int | None = None
    close_after: list[int] = []
    out_tty = posix and use_pty is not False and _is_tty(stdout_fd)
    err_tty = posix and use_pty is not False and _is_tty(stderr_fd)
    if out_tty and err_tty and _same_terminal(stdout_fd, stderr_fd):
        master, slave = _open_pty(stdout_fd)
        relays.append(Relay(master, stdout_fd, 2, True))
        child_out = child_err = slave
        close_after.append(slave)
    else:
        for fd, tty in ((stdout_fd, out_tty), (stderr_fd, err_tty)):
            if tty:
                master, slave = _open_pty(fd)
            else:
                master, slave = os.pipe()
                _widen_pipe(slave)
            relays.append(Relay(master, fd, 1 if fd == stdout_fd else 2, tty))
            close_after.append(slave)
            if fd == stdout_fd:
                child_out = slave
            else:
                child_err = slave
    return Wiring(relays, child_out, child_err, close_after)
