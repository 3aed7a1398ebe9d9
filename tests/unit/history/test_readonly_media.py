"""Read-only media (issue 34 item 6): `record` says one line and exits 2; the readers read the history.

A real read-only bind mount (root: ``mount --bind`` then ``mount -o remount,ro,bind``), where SQLite cannot
make a ``-shm`` file: ``mode=ro`` alone answers "unable to open database file" there. And a folder chmod-ed
read-only, run in a child without CAP_DAC_OVERRIDE when the tests run as root (root writes any folder
otherwise, so there the bind mount is what proves it). Every command is a real `rigscope` process.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from desktop.history.store import HistoryStore
from tests.unit.history.helpers import snapshot

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bind mounts, statvfs ST_RDONLY")

REPO = Path(__file__).resolve().parents[3]
#: The samples' first instant (2026-05-28 UTC); every command is given its range, so any day holds.
T0 = 1_780_000_000.0
ROWS = 120
WAL_ROWS = 30
_FROM, _TO = datetime.fromtimestamp(T0 - 60, UTC).isoformat(), datetime.fromtimestamp(T0 + 600, UTC).isoformat()
_WEEK = datetime.fromtimestamp(T0, UTC).strftime("%G-W%V")
#: Every reader, with the arguments that cover the samples.
READERS: dict[str, list[str]] = {
    "advise": ["advise", "--days", "1"],
    "export": ["export", "--from", _FROM, "--to", _TO],
    "report": ["report", "--week", _WEEK, "--format", "json", "-o", "-"],
    "analyze": ["analyze", "--from", _FROM, "--to", _TO],
    "usage": ["usage", "--from", _FROM, "--to", _TO],
    "jobs": ["jobs"],
}
#: A writer killed after its commits, before any checkpoint: its samples are in the -wal (with its -shm).
_KILLED_WRITER = f"""
import os, sys
from pathlib import Path
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import snapshot
store = HistoryStore.open(Path(sys.argv[1]))
store.conn.execute("PRAGMA wal_autocheckpoint = 0")
store.write_snapshots([snapshot({T0 + ROWS} + i) for i in range({WAL_ROWS})])
os._exit(0)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RIGSCOPE_CONFIG_DIR": str(tmp_path / "cfg"),
            "RIGSCOPE_DATA_DIR": str(tmp_path / "data")}


def _rigscope(tmp_path: Path, args: list[str], prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "desktop", *args], check=False, cwd=REPO,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)


def _history(path: Path) -> None:
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0 + i) for i in range(ROWS)])


def _csv_rows(text: str) -> int:
    return len(text.strip().splitlines()) - 1  # the header


@pytest.fixture
def ro_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(source, mount): ``mount`` shows ``source`` read-only; what is written in ``source`` appears there."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root (the chmod-ed folder test covers the rest)")
    source, mount = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", str(source), str(mount)], check=False, capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here: {done.stderr.strip()}")
    try:
        done = subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=False,
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"a read-only remount is not permitted here: {done.stderr.strip()}")
        assert os.statvfs(mount).f_flag & os.ST_RDONLY
        yield source, mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_every_reader_reads_a_history_on_a_readonly_bind_mount(tmp_path: Path,
                                                              ro_mount: tuple[Path, Path]) -> None:
    source, mount = ro_mount
    _history(source / "h.sqlite")
    for name, args in READERS.items():
        done = _rigscope(tmp_path, [*args, "--db", str(mount / "h.sqlite")])
        # analyze's 1 is its verdict (the samples carry thermal slowdown), not a failure
        assert done.returncode == (1 if name == "analyze" else 0), (name, done.stderr)
        assert done.stdout.strip(), name
        said = _one_line(done.stderr)
        assert "is on a read-only file system: reading it read-only" in said, (name, said)
        assert str(mount / "h.sqlite") in said
    here = _rigscope(tmp_path, [*READERS["export"], "--db", str(mount / "h.sqlite")])
    assert sorted(os.listdir(source)) == ["h.sqlite"]  # nothing was made beside it
    # The same samples as from the writable name: all of them.
    there = _rigscope(tmp_path, [*READERS["export"], "--db", str(source / "h.sqlite")])
    assert there.returncode == 0 and there.stderr == ""
    assert here.stdout == there.stdout and _csv_rows(here.stdout) == ROWS


def test_a_killed_writers_log_is_read_where_its_shm_is_and_said_left_out_where_not(
        tmp_path: Path, ro_mount: tuple[Path, Path]) -> None:
    source, mount = ro_mount
    _history(source / "h.sqlite")
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(source / "h.sqlite")], cwd=REPO, env=_env(tmp_path),
                   check=True, timeout=120)
    assert (source / "h.sqlite-wal").stat().st_size > 0 and (source / "h.sqlite-shm").exists()
    done = _rigscope(tmp_path, [*READERS["export"], "--db", str(mount / "h.sqlite")])
    assert done.returncode == 0, done.stderr
    assert _csv_rows(done.stdout) == ROWS + WAL_ROWS  # mode=ro reads the log through its -shm
    assert "reading it read-only (nothing is written to it)" in _one_line(done.stderr)
    (source / "h.sqlite-shm").unlink()  # a copy without it: SQLite cannot make one on the mount
    done = _rigscope(tmp_path, [*READERS["export"], "--db", str(mount / "h.sqlite")])
    assert done.returncode == 0, done.stderr
    assert _csv_rows(done.stdout) == ROWS
    said = _one_line(done.stderr)
    wal_bytes = (source / "h.sqlite-wal").stat().st_size
    assert f"its write-ahead log ({wal_bytes:,} bytes" in said and "left out" in said, said


def test_a_name_with_control_bytes_is_said_escaped_on_one_line(tmp_path: Path, ro_mount: tuple[Path, Path]) -> None:
    source, mount = ro_mount
    name = "h\x1b[2Jx\n.sqlite"  # a terminal escape and a newline: shown escaped, never acted on
    _history(source / name)
    for args in (READERS["advise"], ["record", "--simulate", "--interval", "0.2"]):
        done = _rigscope(tmp_path, [*args, "--db", str(mount / name)])
        said = _one_line(done.stderr)
        assert "h\\x1b[2Jx\\x0a.sqlite" in said and "\x1b" not in said, said


def test_record_on_a_readonly_bind_mount_is_one_line_and_exit_2(tmp_path: Path,
                                                               ro_mount: tuple[Path, Path]) -> None:
    source, mount = ro_mount
    _history(source / "h.sqlite")
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    for db in (mount / "h.sqlite", mount / "new" / "h.sqlite"):
        done = _rigscope(tmp_path, ["record", "--simulate", "--interval", "0.2", "--db", str(db)])
        assert done.returncode == 2, done.stderr
        said = _one_line(done.stderr)
        assert said.startswith(f"rigscope record: cannot write the history database {db}: its folder is on a "
                               "read-only file system"), said
    done = _rigscope(tmp_path, ["import", os.devnull, "--db", str(mount / "h.sqlite")])
    assert done.returncode == 2 and "read-only file system" in _one_line(done.stderr), done.stderr
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before


def _without_dac_override() -> tuple[str, ...]:
    """A prefix that runs a child without the capabilities that let root write any folder (none when not root)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root writes a read-only folder, and setpriv (util-linux) is missing to drop CAP_DAC_OVERRIDE")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search")


def test_readers_and_record_in_a_read_only_folder(tmp_path: Path) -> None:
    prefix = _without_dac_override()
    folder = tmp_path / "kept"
    folder.mkdir()
    _history(folder / "h.sqlite")
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        db = str(folder / "h.sqlite")
        for name in ("advise", "export", "report"):
            done = _rigscope(tmp_path, [*READERS[name], "--db", db], prefix)
            assert done.returncode == 0, (name, done.stderr)
            said = _one_line(done.stderr)
            assert f"{db} is in a folder you cannot write: reading it read-only" in said, said
            if name == "export":
                assert _csv_rows(done.stdout) == ROWS
        done = _rigscope(tmp_path, ["record", "--simulate", "--interval", "0.2", "--db", db], prefix)
        assert done.returncode == 2, done.stderr
        assert _one_line(done.stderr).startswith(f"rigscope record: cannot write the history database {db}: "
                                                 "you have no permission to create files in its folder")
        assert sorted(os.listdir(folder)) == ["h.sqlite"]
    finally:
        folder.chmod(0o700)


def test_the_window_reads_a_history_on_a_readonly_bind_mount(tmp_path: Path, ro_mount: tuple[Path, Path]) -> None:
    """The window's recording: on read-only media (and below, with the file made read-only) it reads the history
    instead of showing none (the README says the window reads a read-only database)."""
    from desktop.sessions.recording import RecordingSession

    source, mount = ro_mount
    _history(source / "h.sqlite")
    session = RecordingSession.open(mount / "h.sqlite")
    try:
        assert session.mode == "reading" and session.writer is None, session.detail
        assert "its folder is on a read-only file system" in session.detail
        assert session.store is not None and session.store.counts()["host_samples"] == ROWS
    finally:
        session.close()


def test_the_window_reads_a_history_made_read_only(tmp_path: Path) -> None:
    from desktop.sessions.recording import RecordingSession

    kept = tmp_path / "kept.sqlite"
    _history(kept)
    kept.chmod(0o444)
    session = RecordingSession.open(kept)
    try:
        assert session.mode == "reading" and session.writer is None, session.detail
        assert f"the history database {kept} is read-only" in session.detail
        assert session.store is not None and session.store.counts()["host_samples"] == ROWS
    finally:
        session.close()
