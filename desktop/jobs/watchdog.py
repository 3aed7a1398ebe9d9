"""A tiny process that outlives `rigscope run`, so the wrapped job is never left stopped or cut off.

Run as a script (``python -I -S watchdog.py``: standard library only; of Rigscope it loads only
``desktop/telemetry/owned.py``, itself standard library only, by its path, so it starts in a few
milliseconds). Its standard input is a pipe from rigscope, which writes ``done`` when the job ended
normally, ``relay`` when the job ended but a process it left behind (a daemon) still writes to its
output, ``drop <fd>`` when the reader of that output went away, and on Windows ``pids <pid> ...``.
When the pipe reaches its end without ``done`` (rigscope exited, crashed, or was killed with SIGKILL:
the kernel closes the pipe), it continues the job: SIGCONT to each stopped member of the job's session
as /proc lists it then (``--leader PID:START``: the job's first process and its start time, so a
session id handed out again is never taken for the job's; nothing is sent to a PID remembered from
earlier), NtResumeProcess to the told PIDs on Windows. Then, on POSIX, it copies what the job still
writes to its terminal or pipes (``--relay SRC:DST`` pairs of inherited descriptors) until the job
closes them: without a reader the job would die of a broken pipe at its next line.
It ignores SIGINT and SIGHUP and lives in its own session: Ctrl+C is for the job, and closing
the terminal must not take the watchdog before it resumed the job.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from types import ModuleType

OWNED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "telemetry", "owned.py")


def _owned() -> ModuleType:
    """desktop/telemetry/owned.py, run from its path (no package import, not even importlib.util's: the watchdog
    must start fast). Loaded when the watchdog starts, so resuming the job costs no import."""
    module = ModuleType("rigscope_owned")
    module.__file__ = OWNED
    sys.modules[module.__name__] = module
    with open(OWNED, "rb") as handle:
        exec(compile(handle.read(), OWNED, "exec"), module.__dict__)  # our own file, found by its path
    return module


def _resume(owned: ModuleType | None, leader: tuple[int, int] | None, pgid: int, pids: set[int]) -> None:
    if sys.platform == "win32":
        _resume_windows(pids)
        return
    if owned is not None and leader is not None and owned.supported():
        session = owned.Session(leader[0], leader[1])
        session.signal(signal.SIGCONT, skip=lambda m: not owned.is_stopped(m))
        return
    if pgid:  # no /proc (macOS): the group, as rigscope saw it when it started us
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass


def _resume_windows(pids: set[int]) -> None:
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined,unused-ignore]
    ntdll = ctypes.windll.ntdll  # type: ignore[attr-defined,unused-ignore]
    process_suspend_resume = 0x0800
    for pid in pids:
        handle = kernel32.OpenProcess(process_suspend_resume, False, pid)
        if handle:
            try:
                ntdll.NtResumeProcess(handle)
            finally:
                kernel32.CloseHandle(handle)


def _relay(pairs: list[tuple[int, int]]) -> None:
    """Copy each source descriptor to its destination until every source ends; a destination whose reader went
    away (EPIPE) closes its source, so the writer sees a broken pipe as it would without us; other write errors
    (a full disk): keep draining, so the writer does not block."""
    import errno

    open_pairs = dict(pairs)
    broken: set[int] = set()
    while open_pairs:
        ready, _, _ = select.select(list(open_pairs), [], [])
        for src in ready:
            try:
                data = os.read(src, 65536)
            except OSError:  # EIO: the last writer of a pty closed it
                data = b""
            if not data:
                del open_pairs[src]
                continue
            dst = open_pairs[src]
            if dst in broken:
                continue
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(dst, view):]
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    os.close(src)
                    del open_pairs[src]
                else:
                    broken.add(dst)


def _drop(pairs: list[tuple[int, int]], src: int) -> None:
    """Close our copy of ``src`` (its reader went away): the job's next write there fails as it would unwrapped."""
    for pair in list(pairs):
        if pair[0] == src:
            pairs.remove(pair)
            try:
                os.close(src)
            except OSError:
                pass


def main(argv: list[str]) -> int:
    pgid = 0
    leader: tuple[int, int] | None = None
    pairs: list[tuple[int, int]] = []
    pids: set[int] = set()
    args = iter(argv)
    for arg in args:
        if arg == "--pgid":
            pgid = int(next(args))
        elif arg == "--leader":
            pid, start = next(args).split(":")
            leader = (int(pid), int(start))
        elif arg == "--relay":
            src, dst = next(args).split(":")
            pairs.append((int(src), int(dst)))
    for name in ("SIGINT", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    owned = _owned() if sys.platform != "win32" else None
    done = relay_only = False
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            words = line.split()
            if words[:1] == [b"pids"]:
                pids = {int(w) for w in words[1:] if w.isdigit()}
            elif words[:1] == [b"done"]:
                done = True
            elif words[:1] == [b"relay"]:
                relay_only = True
            elif words[:1] == [b"drop"] and len(words) == 2 and words[1].isdigit():
                _drop(pairs, int(words[1]))
    if done:
        return 0
    if not relay_only:
        _resume(owned, leader, pgid, pids)
    if pairs and sys.platform != "win32":
        _relay(pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
