"""A tiny process that outlives `rigscope run`, so the wrapped job is never left stopped or cut off.

Run as a script (``python -I -S watchdog.py``: standard library only, nothing of Rigscope is
imported, so it starts in a few milliseconds). Its standard input is a pipe from rigscope, which
writes ``pids <pid> ...`` (the job's process tree) as it learns them and ``done`` when the job ended
normally. When the pipe reaches its end without ``done`` (rigscope exited, crashed, or was killed
with SIGKILL: the kernel closes the pipe), it continues the job's process group and every PID it
was told (SIGCONT on POSIX, NtResumeProcess on Windows), then, on POSIX, copies what the job
still writes to its terminal or pipes (``--relay SRC:DST`` pairs of inherited descriptors) until
the job closes them: without a reader the job would die of a broken pipe at its next line.
It ignores SIGINT and SIGHUP and lives in its own session: Ctrl+C is for the job, and closing
the terminal must not take the watchdog before it resumed the job.
"""

from __future__ import annotations

import os
import select
import signal
import sys


def _resume(pgid: int, pids: set[int]) -> None:
    if sys.platform == "win32":
        _resume_windows(pids)
        return
    try:
        os.killpg(pgid, signal.SIGCONT)
    except OSError:
        pass  # the job is gone, or never had a group of its own
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
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
    """Copy each source descriptor to its destination until every source ends (write errors: keep draining)."""
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
            except OSError:
                broken.add(dst)


def main(argv: list[str]) -> int:
    pgid = 0
    pairs: list[tuple[int, int]] = []
    pids: set[int] = set()
    args = iter(argv)
    for arg in args:
        if arg == "--pgid":
            pgid = int(next(args))
        elif arg == "--relay":
            src, dst = next(args).split(":")
            pairs.append((int(src), int(dst)))
    for name in ("SIGINT", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    done = False
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
    if done:
        return 0
    _resume(pgid, pids)
    if pairs and sys.platform != "win32":
        _relay(pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
