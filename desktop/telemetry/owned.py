"""Signals only to processes we own, checked at the moment of sending: never to a remembered PID.

A PID is a number the kernel hands out again once its process is gone and reaped: a list of the
PIDs a job once had, kept for minutes, names other users' processes by then. So every signal here
goes to a process identified *now*: read from ``/proc`` just before sending, by its PID together
with its start time (``/proc/PID/stat`` field 22, in clock ticks since boot: two processes that held
one PID never share it), and sent through a pidfd (``os.pidfd_open`` + ``signal.pidfd_send_signal``)
where the kernel has them. The pidfd is opened first and the start time read after: if they match,
the pidfd holds that very process and the signal cannot reach another one, even if it ends in
between (the send then fails with ESRCH). Without pidfds (Linux before 5.3) the start time is
checked just before ``os.kill``: a window of microseconds instead of none.

A job of `rigscope run` is a *session* (it is started with ``setsid``): its members are the live
processes whose session id is the job's PID. That number stays the job's while the job's first
process is alive or a zombie not yet reaped (the kernel does not hand out a PID still in use as a
process, group or session id), so the session is known to be ours exactly while its leader is the
process we started (same PID, same start time). A process that left the session (``setsid``, a
daemon's double fork) is no member and is never signalled: the caller reports it instead.

Standard library only, no import from Rigscope: the watchdog (``desktop/jobs/watchdog.py``, run
with ``python -I -S``) loads this file by its path.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

PROC = "/proc"
_HAVE_PIDFD = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


class Member(NamedTuple):
    """One process as ``/proc/PID/stat`` shows it; (pid, start_ticks) is its identity."""

    pid: int
    name: str
    state: str
    ppid: int
    pgid: int
    sid: int
    start_ticks: int

    @property
    def identity(self) -> tuple[int, int]:
        return self.pid, self.start_ticks


def supported(proc: str = PROC) -> bool:
    """Whether processes can be read here (Linux with /proc mounted)."""
    return sys.platform.startswith("linux") and os.path.isdir(os.path.join(proc, "self"))


def read_stat(pid: int, proc: str = PROC) -> Member | None:
    """``pid`` as it is now, or None when no process has that PID (or it cannot be read)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            data = handle.read(4096)
    except OSError:
        return None
    return parse_stat(pid, data)


def parse_stat(pid: int, data: bytes) -> Member | None:
    """One ``/proc/PID/stat`` line; the name (field 2) may hold spaces and parentheses, so it ends at the last ')'."""
    start, end = data.find(b"("), data.rfind(b")")
    if start < 0 or end < start:
        return None
    fields = data[end + 2:].split()
    try:  # after the name: state ppid pgrp session tty_nr tpgid flags minflt ... starttime (field 22)
        return Member(pid, data[start + 1:end].decode("utf-8", "surrogateescape"), fields[0].decode("ascii"),
                      int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError, UnicodeDecodeError):
        return None


def all_processes(proc: str = PROC) -> Iterator[Member]:
    """Every process readable now (threads are not processes: /proc lists only thread-group leaders)."""
    try:
        names = os.listdir(proc)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            member = read_stat(int(name), proc)
            if member is not None:
                yield member


def is_stopped(member: Member, proc: str = PROC) -> bool:
    """Stopped (state T or t), or about to be: a SIGSTOP is pending (a process in uninterruptible sleep, state D,
    stops when it leaves the kernel). A zombie counts as stopped: it runs no more."""
    if member.state in ("T", "t", "Z", "X"):
        return True
    try:
        with open(f"{proc}/{member.pid}/status", "rb") as handle:
            text = handle.read(8192)
    except OSError:
        return True  # gone: it runs no more
    bit = 1 << (signal.SIGSTOP - 1) if hasattr(signal, "SIGSTOP") else 0
    for line in text.split(b"\n"):
        if line.startswith((b"SigPnd:", b"ShdPnd:")):
            try:
                if int(line.split()[1], 16) & bit:
                    return True
            except (IndexError, ValueError):
                pass
    return False


def send(member: Member, sig: int, check: Callable[[Member], bool] | None = None, proc: str = PROC) -> bool:
    """Send ``sig`` to the process ``member`` names, if it is still that process (same PID and start time) and
    ``check`` (given what it is now) agrees; True when sent. A process gone, reused, or not ours: False."""

    def still(now: Member | None) -> bool:
        return now is not None and now.start_ticks == member.start_ticks and (check is None or check(now))

    if _HAVE_PIDFD:
        try:
            fd = os.pidfd_open(member.pid)
        except ProcessLookupError:
            return False
        except OSError:  # ENOSYS (an old kernel under a new Python), EMFILE: the start-time check alone
            return _send_checked(member, sig, still, proc)
        try:
            if not still(read_stat(member.pid, proc)):  # read after the pidfd: they name the same process
                return False
            signal.pidfd_send_signal(fd, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False
        finally:
            os.close(fd)
    return _send_checked(member, sig, still, proc)


def _send_checked(member: Member, sig: int, still: Callable[[Member | None], bool], proc: str) -> bool:
    if not still(read_stat(member.pid, proc)):
        return False
    try:
        os.kill(member.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class Session:
    """The job's session, known by its leader's identity: its live members, and signals to them only."""

    def __init__(self, leader_pid: int, leader_start_ticks: int | None = None, proc: str = PROC) -> None:
        self.proc = proc
        self.sid = leader_pid
        if leader_start_ticks is None:
            leader = read_stat(leader_pid, proc)
            leader_start_ticks = leader.start_ticks if leader is not None else -1
        self.leader_start_ticks = leader_start_ticks

    def ours(self) -> bool:
        """Whether the session id still names our session: its leader is the process we started (alive or a
        zombie), or no process holds that PID at all while members of the session live on (the kernel keeps a
        session's id from being handed out while any member has it)."""
        leader = read_stat(self.sid, self.proc)
        if leader is not None:
            return leader.start_ticks == self.leader_start_ticks
        return self.leader_start_ticks >= 0

    def members(self, processes: Iterable[Member] | None = None) -> list[Member]:
        """The session's live members now (empty when the session is not ours any more)."""
        if not self.ours():
            return []
        found = all_processes(self.proc) if processes is None else processes
        return [m for m in found if self._belongs(m)]

    def _belongs(self, member: Member) -> bool:
        # A member started no earlier than the leader: a session id reissued after ours ended would not pass
        # ``ours`` for its leader, and its members that outlived that leader started after it too. A zombie
        # stays in: a process whose main thread exited shows Z while its other threads run on.
        return member.sid == self.sid and member.start_ticks >= self.leader_start_ticks and member.state != "X"

    def signal(self, sig: int, skip: Callable[[Member], bool] | None = None) -> list[Member]:
        """``sig`` to each live member (checked again as it is sent), except those ``skip`` names; those sent to."""
        sent = []
        for member in self.members():
            if skip is not None and skip(member):
                continue
            if send(member, sig, check=self._belongs, proc=self.proc):
                sent.append(member)
        return sent

    def stopped(self) -> bool:
        """Whether every live member is stopped (or stopping: SIGSTOP pending); False when none is left."""
        members = self.members()
        return bool(members) and all(is_stopped(m, self.proc) for m in members)


def environ_has(pid: int, needle: bytes, proc: str = PROC) -> bool:
    """Whether ``needle`` (``NAME=value``) is one of the process's environment entries (False when unreadable)."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as handle:
            data = handle.read(1 << 20)
    except OSError:
        return False
    return needle in data.split(b"\0")


class Pinned:
    """One process held from the moment it is looked at: by a pidfd where the kernel has them (a signal through
    it reaches that process or fails, whoever has the PID by then), else by the PID alone (``exact`` False: the
    caller checks the start time again before each signal). Raises ProcessLookupError when no process has the PID.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = None
        if _HAVE_PIDFD:
            try:
                self.fd = os.pidfd_open(pid)
            except ProcessLookupError:
                raise
            except OSError:  # ENOSYS, EMFILE: by PID, checked by the caller
                self.fd = None

    @property
    def exact(self) -> bool:
        return self.fd is not None

    def send(self, sig: int) -> None:
        """``sig`` to the pinned process (ProcessLookupError: it ended; PermissionError: not ours to signal)."""
        if self.fd is not None:
            signal.pidfd_send_signal(self.fd, sig)
        else:
            os.kill(self.pid, sig)

    def wait(self, timeout_s: float) -> bool | None:
        """Whether the pinned process ended within ``timeout_s``; None without a pidfd (cannot tell here)."""
        if self.fd is None:
            return None
        import select

        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        return bool(ready)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
