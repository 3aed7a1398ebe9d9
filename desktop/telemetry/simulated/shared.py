"""One simulated machine across processes: the loads each process puts on "the" simulated GPU, shared by files.

A simulated GPU is a model inside one process. ``rigscope record --simulate`` (or the window on its simulated
GPU) beside ``rigscope run --simulate -- CMD`` would each simulate a machine of their own: the recorder would
record an idle GPU while the job ran its own at full load (issue 32). So every process that loads its simulated
GPU (the job's load, the stress runner's, the window's workloads) publishes that load as one small file,
``<runtime>/sim-loads/<pid>.json`` (desktop/paths.py's ``runtime_dir``: private to the user, 0700), written
atomically (a temporary file, then ``os.replace``) and removed when its load stops and at exit. Every simulated
machine adds the live entries of the *other* processes to its demand on the same GPU index, as programs on one
GPU add up (``load.combine``), and lists their processes.

Reading is cheap and bounded: a directory listing and tiny files, at most once per ``min_period_s``; a file
that is not ``<digits>.json``, not a regular file, over ``MAX_FILE_BYTES`` or not the expected JSON costs only
itself (skipped); the file of a process that is gone (its pid dead, or reused by another process since) is
skipped and removed.
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import math
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from desktop.paths import ensure_private_dir, runtime_dir
from desktop.safeio import read_bounded
from desktop.telemetry.simulated.load import WORKLOADS, Demand, SharedEntry

__all__ = ["SharedEntry", "SharedLoads", "alive", "process_mark"]

log = logging.getLogger(__name__)

FOLDER = "sim-loads"
FORMAT_VERSION = 1
#: A published file is a few hundred bytes; anything larger is not one of ours.
MAX_FILE_BYTES = 16 * 1024
#: Files looked at per listing (a folder flooded with names costs at most this many stats).
MAX_FILES = 64
#: Entries taken from one file.
MAX_ENTRIES = 16
#: On Windows a pid's liveness is looked up (psutil), never tested with a signal.
WINDOWS = os.name == "nt"
_NAME = re.compile(r"^([0-9]{1,10})\.json$")


def process_mark(pid: int) -> str | None:
    """What tells this process from a later one with the same pid: its start time in clock ticks since boot
    (Linux ``/proc/<pid>/stat``), or None where that cannot be read."""
    try:
        raw = read_bounded(f"/proc/{pid}/stat", 4096, truncate=True).decode("ascii", "replace")
    except OSError:
        return None
    fields = raw.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def alive(pid: int, mark: str | None) -> bool:
    """The process ``pid`` runs (and is the one that wrote ``mark``, where both marks can be read)."""
    if pid <= 0:
        return False
    if WINDOWS:  # os.kill(pid, 0) would end the process there (TerminateProcess)
        from desktop.telemetry.host import pid_running

        return pid_running(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: the pid was reused
        return False
    except OSError:
        return False
    now = process_mark(pid)
    return mark is None or now is None or now == mark


class SharedLoads:
    """This user's simulated loads, one file per process in ``folder`` (default: ``runtime_dir()/sim-loads``).

    ``publish(entries)`` writes this process's (none: removes its file); ``refresh()`` re-reads the others'
    (at most once per ``min_period_s``); ``demands(gpu_index, time_s)`` is what they put on that GPU now.
    Nothing here raises: a folder that cannot be made or read shares nothing (said once in the log)."""

    def __init__(self, folder: Path | None = None, *, min_period_s: float = 0.2,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._folder_arg = folder
        self.min_period_s = min_period_s
        self._monotonic = monotonic
        self._read_at: float | None = None
        self._others: tuple[SharedEntry, ...] = ()
        self._token = next(_TOKENS)
        self._warned = False

    @property
    def folder(self) -> Path:
        return self._folder_arg if self._folder_arg is not None else runtime_dir() / FOLDER

    # --- this process's loads ----------------------------------------------------------
    def publish(self, entries: Sequence[SharedEntry]) -> None:
        """This publisher's loads on the simulated GPUs now (replacing what it published before). The process's
        file holds every publisher's of this process (two machines in one process never erase each other's)."""
        folder = self.folder
        with _OWN_LOCK:
            table = _OWN.setdefault(folder, {})
            if entries:
                table[self._token] = tuple(entries)
            else:
                table.pop(self._token, None)
            problem = _write_own(folder, [e for group in table.values() for e in group])
            if not _EXIT_HOOK:
                atexit.register(_remove_all)
                _EXIT_HOOK.append(True)
        if problem is not None:
            self._warn(f"cannot publish this process's simulated load in {folder}: {problem}")

    def close(self) -> None:
        """This publisher's load is gone (the process's file removed with the last one)."""
        self.publish(())

    # --- the other processes' ----------------------------------------------------------
    def refresh(self) -> None:
        """Read the other processes' loads again, unless that was done less than ``min_period_s`` ago."""
        now = self._monotonic()
        if self._read_at is not None and 0 <= now - self._read_at < self.min_period_s:
            return
        self._read_at = now
        self._others = tuple(self._read_others())

    def demands(self, gpu_index: int, time_s: float) -> list[Demand]:
        """What the other processes put on GPU ``gpu_index`` at ``time_s`` (as last read)."""
        return [e.demand(time_s) for e in self._others if e.gpu_index == gpu_index]

    @property
    def others(self) -> tuple[SharedEntry, ...]:
        return self._others

    def _read_others(self) -> list[SharedEntry]:
        folder = self.folder
        own = os.getpid()
        found: list[SharedEntry] = []
        try:
            if not _private(folder.stat()):
                self._warn(f"{folder} is not this user's private folder")
                return found  # loads someone else could write: not read
            listing = os.scandir(folder)
        except OSError:  # no folder yet: nobody published
            return found
        with listing:
            looked = 0
            for item in listing:
                match = _NAME.match(item.name)
                if match is None or int(match.group(1)) == own:
                    continue
                looked += 1
                if looked > MAX_FILES:
                    break
                found.extend(self._read_one(Path(item.path), int(match.group(1)), item))
        return found

    def _read_one(self, path: Path, pid: int, item: os.DirEntry[str]) -> list[SharedEntry]:
        try:
            info = item.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
                return []  # a FIFO, a link, a huge file: not one of ours, left alone
            body = json.loads(read_bounded(path, MAX_FILE_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            return []
        if not isinstance(body, dict) or body.get("version") != FORMAT_VERSION or body.get("pid") != pid:
            return []
        mark = body.get("mark")
        if not alive(pid, mark if isinstance(mark, str) else None):
            try:  # the process is gone (killed before it could remove its file): its load with it
                path.unlink(missing_ok=True)
            except OSError:
                pass
            return []
        loads = body.get("loads")
        if not isinstance(loads, list):
            return []
        return [e for e in (_entry(raw) for raw in loads[:MAX_ENTRIES]) if e is not None]

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s; the simulated GPU is not shared with other processes", message)


#: What this process publishes, per folder and publisher (a ``SharedLoads``' token): its one file holds them all.
_OWN: dict[Path, dict[int, tuple[SharedEntry, ...]]] = {}
_OWN_LOCK = threading.Lock()
_TOKENS = itertools.count(1)
_EXIT_HOOK: list[bool] = []


def _write_own(folder: Path, entries: Sequence[SharedEntry]) -> OSError | None:
    """Write this process's file in ``folder`` whole (none: remove it); the error, if it could not be."""
    pid = os.getpid()
    target = folder / f"{pid}.json"
    try:
        if not entries:
            target.unlink(missing_ok=True)
            return None
        ensure_private_dir(folder)
        if not _private(folder.stat()):
            raise PermissionError(f"{folder} is not this user's private folder")
        body = {"version": FORMAT_VERSION, "pid": pid, "mark": process_mark(pid),
                "loads": [e.as_json() for e in entries[:MAX_ENTRIES]]}
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{pid}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        return exc
    return None


def _remove_all() -> None:
    """At exit: this process's files go with it."""
    with _OWN_LOCK:
        for folder, table in _OWN.items():
            table.clear()
            _write_own(folder, ())


def _private(info: os.stat_result) -> bool:
    """A folder only this user can write (POSIX; elsewhere the user's profile folder is taken as private)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return True
    return bool(info.st_uid == getuid() and not info.st_mode & 0o022)


def _entry(raw: object) -> SharedEntry | None:
    """One published entry, checked field by field (None: not a valid one)."""
    if not isinstance(raw, dict):
        return None
    gpu, pid, name = raw.get("gpu"), raw.get("pid"), raw.get("name")
    if not (isinstance(gpu, int) and 0 <= gpu < 64 and isinstance(pid, int) and isinstance(name, str)):
        return None
    load = _number(raw.get("load"), 0.0, 1.0)
    vram = _number(raw.get("vram_mib"), 0.0, 1e7)
    if load is None or vram is None:
        return None
    command, started, workload = raw.get("command"), raw.get("started_s"), raw.get("workload")
    return SharedEntry(
        gpu_index=gpu, pid=pid, name=name[:256], load=load, vram_mib=vram,
        command=command[:4096] if isinstance(command, str) else None,
        started_s=_number(started, 0.0, 1e11),
        mem_util=_number(raw.get("mem_util"), 0.0, 1.0) or 0.0,
        intensity=_number(raw.get("intensity"), 0.0, 2.0) or 1.0,
        workload=workload if isinstance(workload, str) and workload in WORKLOADS else None)


def _number(value: object, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return min(high, max(low, float(value)))
