"""The database path is resolved and checked once (issue 23 item 3): ``dbfile.resolve_db`` turns the
user's value into a ``DbPath``, and the writer lock, the store, the writer and the command line take
that result as it is instead of resolving and checking it again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from desktop.errors import UserError
from desktop.history import filekind
from desktop.history.dbfile import DbPath, resolve_db
from desktop.history.filekind import NotOurDatabase
from desktop.history.lock import WriterLock
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path ``check_target`` is asked about, in order."""
    seen: list[Path] = []
    real = filekind.check_target

    def counting(path: Path) -> None:
        seen.append(Path(path))
        real(path)

    monkeypatch.setattr(filekind, "check_target", counting)
    return seen


def test_the_users_value_becomes_the_real_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("HOME", str(tmp_path))
    db = resolve_db("~/link/history.sqlite")
    assert isinstance(db, DbPath) and db == real / "history.sqlite" and db.is_absolute()
    # A path made from it names another file: it is a plain Path, never taken for a checked database.
    for derived in (db.with_name(db.name + ".lock"), db.parent, db / "x", Path(db)):
        assert type(derived) is type(Path()), derived
    assert resolve_db(db) is db


def test_what_cannot_be_a_database_is_refused_there(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a folder"):
        resolve_db(tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(NotOurDatabase):
        resolve_db(text)
    assert text.read_text() == "hello\n"


def test_a_resolved_path_is_checked_once_through_lock_writer_and_store(tmp_path: Path, checks: list[Path]) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "real.sqlite")
    writer = HistoryWriter(resolve_db(link))
    writer.start()
    try:
        assert writer.store_path == tmp_path / "real.sqlite"
    finally:
        writer.close()
    assert checks == [tmp_path / "real.sqlite"]  # resolve_db's own; the lock and the store took it as it was


def test_a_plain_path_is_resolved_and_checked_once_by_the_writer(tmp_path: Path, checks: list[Path]) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "real.sqlite")
    writer = HistoryWriter(link)
    writer.start()
    writer.close()
    assert checks == [tmp_path / "real.sqlite"]
    # The writer's WAL check looks at the real file's log, not at "link.sqlite-wal" (which never exists).
    assert writer.store_path == tmp_path / "real.sqlite"


def test_each_opener_resolves_a_plain_path_itself(tmp_path: Path, checks: list[Path]) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "real.sqlite")
    with HistoryStore.open(link) as store:
        assert store.path == tmp_path / "real.sqlite"
    with WriterLock(link) as lock:
        assert lock.lock_path == tmp_path / "real.sqlite.lock"
    assert checks == [tmp_path / "real.sqlite"] * 2


def test_the_command_line_resolves_db_once_for_the_whole_command(tmp_path: Path, checks: list[Path]) -> None:
    from desktop.cli.common import check_db_arg, db_path

    link = tmp_path / "link.sqlite"
    link.symlink_to(tmp_path / "real.sqlite")
    args = argparse.Namespace(db=str(link), command="import", now_s=1_700_000_000.0)
    check_db_arg(args)  # the orphaned-job pass at the start opens nothing new: the file is missing
    path = db_path(args)
    assert isinstance(path, DbPath) and path == tmp_path / "real.sqlite"
    HistoryStore.open(path).close()
    HistoryStore.close_orphaned_jobs_at(path, 1_700_000_000.0)
    assert db_path(args) is path
    assert checks == [tmp_path / "real.sqlite"]


def test_a_folder_given_as_db_is_refused_before_the_command(tmp_path: Path) -> None:
    from desktop.cli.common import check_db_arg

    with pytest.raises(UserError, match="is a folder, not a database file"):
        check_db_arg(argparse.Namespace(db=str(tmp_path), command="stress"))
