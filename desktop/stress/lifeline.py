"""The stress child's tie to its parent: it never outlives the app that started it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading


def die_with_parent(parent_pid: int) -> None:
    """Make sure this child never outlives the app that started it."""
    # Ctrl+C in a terminal reaches the whole process group: the parent decides, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        except OSError:
            pass
    # The parent may have died before prctl took effect; and other systems lack prctl.
    if parent_pid and os.getppid() != parent_pid:
        os._exit(4)

    def watch() -> None:
        # stdin is a pipe from the parent: EOF means the parent closed it or died.
        try:
            while sys.stdin.buffer.read(1):
                pass
        except (OSError, ValueError):
            pass
        os._exit(4)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
