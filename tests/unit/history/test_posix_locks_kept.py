"""A process that holds a history connection never drops its own SQLite locks (issue 20).

SQLite's locks are POSIX advisory locks: closing *any* descriptor of the database file drops all
of the process's locks on it. The window held the writer's connection and read the file's header
through a second descriptor (``check_target`` in ``HistoryStore.open``); the next command line
process to close its connection then thought it was the last, checkpointed and deleted the WAL,
and the window went on writing into a log with no name. These tests hold a writer connection,
do in the same process each thing that used to open the file again, let a real second process
write and close, and check that the WAL still has its name and every row is in the file.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from desktop.errors import UserError
from desktop.history import connections, filekind
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import deleted_open_files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX advisory locks and /proc")

_OTHER_WRITER = """
import sys
from pathlib import Path
from desktop.history.store import HistoryStore
store = HistoryStore.open(Path(sys.argv[1]))
store.conn.execute("INSERT INTO probe VALUES (2)")
store.close()
"""


def _header_check(path: Path) -> None:
    filekind.check_target(path)


def _header_kind(path: Path) -> None:
    assert filekind.header_kind(path) == "ours"


def _readonly_store(path: Path) -> None:
    HistoryStore.open(path, readonly=True).close()


def _second_writer_store(path: Path) -> None:
    HistoryStore.open(path).close()


def _plain_sqlite_connection(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("SELECT count(*) FROM probe").fetchone()
    conn.close()


def _may_move_aside(path: Path) -> None:
    assert filekind.may_move_aside(path)


@pytest.mark.parametrize("touch", [_header_check, _header_kind, _readonly_store, _second_writer_store,
                                   _plain_sqlite_connection, _may_move_aside],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_second_process_closing_never_deletes_the_writers_wal(tmp_path: Path, touch: Callable[[Path], None]
                                                                ) -> None:
    path = tmp_path / "h.sqlite"
    writer = HistoryStore.open(path)
    try:
        writer.conn.execute("CREATE TABLE probe (x INTEGER)")
        writer.conn.execute("INSERT INTO probe VALUES (1)")
        touch(path)
        repo = Path(__file__).resolve().parents[3]
        subprocess.run([sys.executable, "-c", _OTHER_WRITER, str(path)], check=True, cwd=repo,
                       env={**os.environ, "PYTHONPATH": str(repo)}, timeout=60)
        writer.conn.execute("INSERT INTO probe VALUES (3)")
        assert (tmp_path / "h.sqlite-wal").exists(), "the other process deleted the writer's WAL"
        assert deleted_open_files() == []
        # A third process sees the writer's newest row: it went to the WAL everybody shares.
        seen = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                               ".execute('SELECT group_concat(x) FROM probe').fetchone()[0])", str(path)],
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()
        assert seen == "1,2,3"
    finally:
        writer.close()


def test_open_here_knows_every_name_of_an_open_file(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    link = tmp_path / "link.sqlite"
    assert not connections.open_here(path)
    store = HistoryStore.open(path)
    link.symlink_to(path)
    assert connections.open_here(path) and connections.open_here(link)
    store.close()
    assert not connections.open_here(path)


def test_a_damaged_file_open_here_is_never_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    store = HistoryStore.open(path)
    try:
        with pytest.raises(UserError, match="still open in this process"):
            filekind.move_aside(path)
        assert path.exists()
    finally:
        store.close()
