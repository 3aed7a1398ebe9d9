"""The single-writer lock: refused while held (naming the holder), free once the holder dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from desktop.errors import UserError
from desktop.history.lock import DatabaseBusy, WriterLock, describe_holder


def test_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with WriterLock(db):
        with pytest.raises(DatabaseBusy) as caught:
            WriterLock(db).acquire()
        assert isinstance(caught.value, UserError)
        assert caught.value.holder["pid"] == os.getpid()
        assert f"pid {os.getpid()}" in str(caught.value)
        assert "host" in str(caught.value)
    with WriterLock(db) as again:  # released on exit
        assert again.held


def test_describe_holder_without_information() -> None:
    assert describe_holder({}) == "another Rigscope process"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from desktop.history.lock import WriterLock
        lock = WriterLock(Path({str(db)!r}))
        lock.acquire()
        print("locked", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(DatabaseBusy) as caught:
            WriterLock(db).acquire()
        assert caught.value.holder["pid"] == child.pid
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout:
            child.stdout.close()
    with WriterLock(db) as lock:
        assert lock.held


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_a_symlink_to_the_database_is_the_same_writer(tmp_path: Path) -> None:
    """Issue 12 item 6: `record --db real.sqlite` and `record --db link.sqlite` both wrote."""
    real = tmp_path / "real.sqlite"
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "dir-link").symlink_to(tmp_path, target_is_directory=True)
    with WriterLock(real):
        for alias in (link, elsewhere / "dir-link" / "real.sqlite", elsewhere / ".." / "real.sqlite"):
            with pytest.raises(DatabaseBusy):
                WriterLock(alias).acquire()
    with WriterLock(link) as lock:
        assert lock.lock_path == tmp_path / "real.sqlite.lock"
        with pytest.raises(DatabaseBusy):
            WriterLock(real).acquire()
