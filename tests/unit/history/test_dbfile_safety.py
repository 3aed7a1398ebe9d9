"""What `--db` may touch: folders it did not create, files that are not Rigscope databases, read-only files.

Each case is a reproduction from issue 12 (items 1, 2 and 12): the folder's mode, the file's bytes
and the folder's listing are compared before and after.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from desktop.cli import main as cli_main
from desktop.errors import UserError
from desktop.history import filekind
from desktop.history.lock import WriterLock
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import snapshot

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
CSV = Path(__file__).parent / "data" / "nvsmi_units_two_gpus.csv"
T0 = 1_790_000_000.0
NOT_OURS = "is not a Rigscope history database; refusing to touch it"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- item 1: folders and modes that are not ours -----------------------------------------------


@posix_only
def test_import_into_a_shared_sticky_folder_leaves_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "D"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: sticky, open to everyone
    assert cli_main(["import", "--db", str(shared / "x.sqlite"), str(CSV)]) == 0
    assert _mode(shared) == 0o1777
    assert _mode(shared / "x.sqlite") == 0o600  # the file Rigscope created is private


@posix_only
def test_an_existing_open_folder_is_never_made_private(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    HistoryStore.open(folder / "h.sqlite").close()
    with WriterLock(folder / "h.sqlite"):
        pass
    assert _mode(folder) == 0o755


@posix_only
def test_folders_rigscope_creates_are_private(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    HistoryStore.open(tmp_path / "a" / "b" / "h.sqlite").close()
    assert _mode(tmp_path / "a") == 0o700
    assert _mode(tmp_path / "a" / "b") == 0o700
    assert _mode(tmp_path) == 0o755  # the folder that was there is untouched


@posix_only
def test_a_read_only_database_is_refused_and_keeps_its_mode(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    path.chmod(0o444)
    before = path.read_bytes()
    assert cli_main(["import", "--db", str(path), str(CSV)]) == 2
    err = capsys.readouterr().err
    assert "read-only" in err and str(path) in err and "Traceback" not in err
    assert _mode(path) == 0o444 and path.read_bytes() == before
    with pytest.raises(UserError, match="read-only"):  # `record` opens through the same path
        HistoryStore.open(path, verify=True)
    assert _mode(path) == 0o444


@posix_only
def test_a_read_only_database_can_still_be_read(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0)])
    path.chmod(0o444)
    with HistoryStore.open(path, readonly=True) as store:
        assert store.counts()["gpu_samples"] == 1
    assert _mode(path) == 0o444


@posix_only
def test_an_existing_writable_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    path.chmod(0o640)  # the user shared it with their group on purpose
    HistoryStore.open(path).close()
    assert _mode(path) == 0o640


# --- item 2: a typo'd --db must not move the user's file ---------------------------------------


@pytest.mark.parametrize("content", [
    b"my notes\nremember the milk\n" * 50,
    b"x",
    b"SQLite format 2\0" + b"\0" * 200,  # almost SQLite, but not
])
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path, content: bytes,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(content)
    assert cli_main(["import", "--db", str(notes), str(CSV)]) == 2
    err = capsys.readouterr().err
    assert NOT_OURS in err and str(notes) in err
    assert notes.read_bytes() == content
    assert _listing(tmp_path) == ["notes.txt"]  # no .corrupt-*, no -wal, no .lock


def _foreign_db(path: Path, user_version: int = 0, application_id: int = 0) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('ada', '123')")
    conn.execute(f"PRAGMA user_version = {user_version}")
    conn.execute(f"PRAGMA application_id = {application_id}")
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize(("user_version", "application_id"), [(0, 0), (3, 0), (0, 0x0F0F0F0F), (1, 0)])
def test_another_programs_sqlite_database_is_refused_not_migrated(tmp_path: Path, user_version: int,
                                                                  application_id: int) -> None:
    other = tmp_path / "contacts.db"
    before = _foreign_db(other, user_version, application_id)
    with pytest.raises(UserError, match=NOT_OURS):
        HistoryStore.open(other)
    with pytest.raises(UserError, match=NOT_OURS):
        HistoryStore.open(other, readonly=True)
    assert other.read_bytes() == before
    assert _listing(tmp_path) == ["contacts.db"]
    assert cli_main(["import", "--db", str(other), str(CSV)]) == 2
    assert other.read_bytes() == before
    assert _listing(tmp_path) == ["contacts.db"]  # no lock file beside it either


def test_a_damaged_foreign_sqlite_database_is_not_moved_aside(tmp_path: Path) -> None:
    other = tmp_path / "contacts.db"
    _foreign_db(other, 0, 0x0F0F0F0F)
    data = bytearray(other.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # its schema page is gone; the header still says whose it is
    other.write_bytes(bytes(data))
    with pytest.raises(UserError, match=NOT_OURS):
        HistoryStore.open(other)
    assert other.read_bytes() == bytes(data)
    assert _listing(tmp_path) == ["contacts.db"]


def test_a_damaged_rigscope_database_is_still_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0 + i) for i in range(2000)])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, header intact
    path.write_bytes(bytes(data))
    with HistoryStore.open(path) as store:
        assert store.recovered_from is not None
        assert store.recovered_from.read_bytes() == bytes(data)


def test_an_older_rigscope_database_without_the_marker_opens_and_is_marked(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0)])
        store.conn.execute("PRAGMA application_id = 0")  # as every file before issue 12
    with HistoryStore.open(path) as store:
        assert store.recovered_from is None and store.counts()["gpu_samples"] == 1
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == filekind.APPLICATION_ID


def test_an_empty_file_is_a_new_database(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.touch()
    with HistoryStore.open(path) as store:
        assert store.recovered_from is None
        store.write_snapshots([snapshot(T0)])
    assert path.read_bytes().startswith(b"SQLite format 3\0")


def test_reading_a_file_that_is_not_sqlite_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"hello\n" * 100)
    assert cli_main(["export", "--db", str(notes)], now_s=T0) == 2
    err = capsys.readouterr().err
    assert NOT_OURS in err and "move it aside" not in err
    assert notes.read_bytes() == b"hello\n" * 100


# --- item 12: a folder where the database should be -----------------------------------------------


def test_a_folder_given_as_the_database_is_said_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "history"
    folder.mkdir()
    for readonly in (False, True):
        with pytest.raises(UserError, match=r"is a folder, not a database file"):
            HistoryStore.open(folder, readonly=readonly)
    with pytest.raises(UserError, match=r"is a folder, not a database file"):
        WriterLock(folder).acquire()
    assert cli_main(["import", "--db", str(folder), str(CSV)]) == 2
    err = capsys.readouterr().err
    assert "is a folder, not a database file" in err and "disk I/O" not in err
    assert _listing(tmp_path) == ["history"] and _listing(folder) == []


@posix_only
def test_the_database_through_a_symlink_is_the_file_it_names(tmp_path: Path) -> None:
    real = tmp_path / "real.sqlite"
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    with HistoryStore.open(link) as store:
        assert store.path == real
        store.write_snapshots([snapshot(T0)])
    assert link.is_symlink() and real.is_file()
    assert not (tmp_path / "link.sqlite-wal").exists()
    assert os.path.realpath(link) == str(real)


@posix_only
def test_a_new_database_is_private_and_writable_under_any_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)  # a umask that takes the owner's own write bit
    try:
        with HistoryStore.open(tmp_path / "new" / "h.sqlite") as store:
            store.write_snapshots([snapshot(T0)])
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new" / "h.sqlite") == 0o600 and _mode(tmp_path / "new") == 0o700
