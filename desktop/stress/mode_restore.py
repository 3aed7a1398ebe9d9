"""Leave the firmware mode as found: what `stress --per-mode` switched is put back, even after a crash.

Before the first switch ``ModeKeeper`` reads the mode in force and, where it lives in a file that
outlives the process (msi-ec ``shift_mode``, ACPI ``platform_profile``), writes it into a small state
file (``firmware-mode.json`` in the state folder, desktop/paths.py). At the end, on Ctrl+C and on
SIGTERM the caller calls ``restore``: the mode is written back, said ("restored firmware mode
Balanced") and the state file removed; where it cannot be written, the exact command that restores
it is said instead and the state file kept. A run killed outright (SIGKILL, a power cut) leaves the
state file: the next start calls ``restore_left_over``, which puts that mode back and says so. A run
without ``--switch-modes`` (the user switched when asked) is not written back for: its mode is said
with the command that restores it, once.

The state file is guarded by an OS file lock (``firmware-mode.lock``) held for the whole run: it dies
with its process, so a state file whose lock nobody holds was left by a run that ended without
restoring, and one whose lock is held belongs to a run in progress (left alone).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.errors import UserError
from desktop.history.lock import FileLock, describe_holder, read_holder
from desktop.paths import ensure_private_dir, state_dir
from desktop.safeio import read_bounded
from desktop.stress.per_mode import ModeSwitch, mode_name, restore_command, write_mode_file

STATE_NAME = "firmware-mode.json"
LOCK_NAME = "firmware-mode.lock"
_MAX_STATE_BYTES = 16 * 1024


class ModesBusy(UserError):
    """Another `stress --per-mode` is switching the firmware modes now."""


class _ModeLock(FileLock):
    def _busy(self) -> UserError:
        who = describe_holder(read_holder(self.lock_path))
        return ModesBusy(f"{who} is switching the firmware modes now ({self.lock_path}); "
                         "wait for it to end: it puts back the mode it found")


@dataclass(frozen=True)
class FoundMode:
    """The mode found before the first switch, and where it is written back."""

    kind: str
    mode: str
    file: Path
    sysfs_root: Path
    pid: int
    since_s: float
    #: Whether the run was allowed to write the mode (``--switch-modes``): only then is it written back for it.
    may_write: bool = True

    @property
    def name(self) -> str:
        return mode_name(self.kind, self.mode)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "file": os.fsdecode(self.file),
                "sysfs_root": os.fsdecode(self.sysfs_root), "pid": self.pid, "since_s": self.since_s,
                "may_write": self.may_write}

    @classmethod
    def from_json(cls, data: object) -> FoundMode:
        if not isinstance(data, dict):
            raise ValueError("not an object")
        kind, mode, file, root = (data.get(k) for k in ("kind", "mode", "file", "sysfs_root"))
        if not all(isinstance(v, str) and v for v in (kind, mode, file, root)):
            raise ValueError("kind, mode, file or sysfs_root missing")
        pid, since = data.get("pid"), data.get("since_s")
        return cls(str(kind), str(mode), Path(str(file)), Path(str(root)), pid if isinstance(pid, int) else 0,
                   float(since) if isinstance(since, int | float) else 0.0, data.get("may_write") is not False)


def _state_paths(folder: Path | None) -> tuple[Path, Path]:
    base = folder if folder is not None else state_dir()
    return base / STATE_NAME, base / LOCK_NAME


def _write_state(path: Path, found: FoundMode) -> None:
    """Whole or not at all: a temporary name, then a rename (a crash mid-write leaves the old state or none)."""
    ensure_private_dir(path.parent)
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(found.as_json(), handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(part, path)


def _read_state(path: Path) -> FoundMode | None:
    """The state left in ``path``; None when there is none. ValueError for one that cannot be read as a state."""
    try:
        raw = read_bounded(path, _MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(str(exc)) from None
    try:
        return FoundMode.from_json(json.loads(raw.decode("utf-8", "surrogateescape")))
    except (ValueError, UnicodeError) as exc:
        raise ValueError(f"{path}: not a firmware mode state ({exc})") from None


def _read_mode(path: Path) -> str | None:
    """The mode a mode file reads (its first word); None when unreadable or a link (not read through)."""
    if os.path.islink(path):
        return None
    try:
        words = read_bounded(path, 4096, truncate=True).decode("utf-8", "surrogateescape").split()
    except OSError:
        return None
    return words[0] if words else None


#: ``_put_back``'s answer for a mode file that already reads the mode found (nothing written, nothing to say).
_UNCHANGED = ""


def _put_back(found: FoundMode) -> str | None:
    """Write ``found``'s mode back: None when written and read back, ``_UNCHANGED`` when it was in force
    already (the run died before its first switch, or the user put it back), else why not."""
    if _read_mode(found.file) == found.mode:
        return _UNCHANGED
    try:
        write_mode_file(found.file, found.sysfs_root, found.mode)
    except UserError as exc:
        return str(exc)
    except OSError as exc:
        return exc.strerror or str(exc)
    now = _read_mode(found.file)
    return None if now == found.mode else f"the file reads {now!r} after writing"


class ModeKeeper:
    """The mode found, kept while ``switch``'s modes are changed, and put back by ``restore``.

    ``remember()`` before the first switch (takes the lock: ModesBusy when another run switches modes; writes
    the state file where the mode lives in a file); ``restore()`` in a ``finally`` (and again does nothing);
    ``close()`` lets the lock go. ``say`` gets each line for the user."""

    def __init__(self, switch: ModeSwitch, *, say: Callable[[str], None], state_folder: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.switch = switch
        self.say = say
        self.state_path, lock_path = _state_paths(state_folder)
        self._lock = _ModeLock(lock_path)
        self._clock = clock
        #: The mode found (None: nothing read yet, or nothing readable).
        self.found: str | None = None
        self._state_written = False
        self._restored = False

    def remember(self) -> str | None:
        """Read the mode in force and keep it (and, for a mode file, its state file); the mode read."""
        mode_file = self.switch.mode_file
        if mode_file is not None:
            try:
                self._lock.acquire()  # ModesBusy (a UserError) goes up: another run switches modes now
            except OSError as exc:
                self.say(f"cannot lock {self._lock.lock_path} ({exc.strerror or exc}): a crash would leave the "
                         "firmware mode switched without it being put back at the next start")
                mode_file = None
            else:
                restore_left_over(self.say, folder=self.state_path.parent, lock=self._lock)
        self.found = self.switch.current()
        if self.found is not None and mode_file is not None:
            found = FoundMode(self.switch.kind, self.found, mode_file[0], mode_file[1], os.getpid(), self._clock(),
                              self.switch.allow_write)
            try:
                _write_state(self.state_path, found)
                self._state_written = True
            except OSError as exc:
                self.say(f"cannot keep the firmware mode found in {self.state_path} ({exc.strerror or exc}): "
                         "after a crash it would not be put back by itself")
        return self.found

    def restore(self) -> bool:
        """Put the mode found back and say so; True when it is in force (or nothing was found to restore)."""
        if self.found is None or self._restored:
            return True
        name = mode_name(self.switch.kind, self.found)
        ok = self.switch.current() == self.found
        changed = False
        if not ok:
            try:
                ok = self.switch.set(self.found)
            except (UserError, OSError):
                ok = False
            changed = ok
        if ok:
            self._restored = True
            if changed:  # a mode in force as found needs no word
                self.say(f"restored firmware mode {name}")
            self._forget()
            return True
        command = self.switch.restore_command(self.found)
        how = f"to restore it, run: {command}" if command else f"switch it back to {name} yourself"
        self.say(f"could not restore firmware mode {name} ({self.switch.kind} {self.found}); {how}")
        if not self.switch.allow_write:  # the user switched by hand and has been told; nothing for a later start
            self._forget()
        return False

    def _forget(self) -> None:
        if self._state_written:
            try:
                self.state_path.unlink()
            except FileNotFoundError:
                pass
            self._state_written = False

    def close(self) -> None:
        self._lock.release()


def restore_left_over(say: Callable[[str], None], *, folder: Path | None = None,
                      lock: FileLock | None = None) -> bool | None:
    """Put back the mode a run left switched when it ended without restoring it (killed, power cut), and say so.

    None: nothing left over (or a run in progress owns it); True: restored (state file removed); False: it
    could not be, the command to do it is said and the state file kept for the next start. ``lock``: the lock
    the caller holds already (``ModeKeeper.remember``)."""
    state_path, lock_path = _state_paths(folder)
    if not state_path.exists():
        return None
    if lock is not None:
        return _restore_state(state_path, say)
    own = _ModeLock(lock_path)
    try:
        own.acquire()
    except (UserError, OSError):  # a run switching modes now (its state, its restore), or no lock to take
        return None
    try:
        return _restore_state(state_path, say)
    finally:
        own.release()


def _restore_state(state_path: Path, say: Callable[[str], None]) -> bool | None:
    """``restore_left_over`` once the lock is held."""
    try:
        found = _read_state(state_path)
    except ValueError as exc:  # not ours to act on; removed so that it is said once
        say(f"removed a firmware mode state that cannot be read: {exc}")
        state_path.unlink(missing_ok=True)
        return None
    if found is None:
        return None
    if not found.may_write:  # the user switched by hand when asked: Rigscope reminds, it does not write
        now = _read_mode(found.file)
        state_path.unlink(missing_ok=True)
        if now == found.mode:
            return True
        say(f"firmware mode {mode_name(found.kind, now) if now else 'unknown'} is still in force where a run that "
            f"ended without restoring it (pid {found.pid}) found {found.name}; to restore it, run: "
            f"{restore_command(found.file, found.mode)}")
        return False
    why = _put_back(found)
    if why is None or why == _UNCHANGED:
        if why is None:
            say(f"restored firmware mode {found.name} (a run that ended without restoring it, pid {found.pid}, "
                "had switched it)")
        state_path.unlink(missing_ok=True)
        return True
    say(f"could not restore firmware mode {found.name} that an earlier run left switched ({why}); "
        f"to restore it, run: {restore_command(found.file, found.mode)}")
    return False
