"""A database renamed over the recorder's (issue 34 item 2): the file there keeps its rows, the samples are kept.

Before, the recorder went on writing into the file it had opened while that file's ``-wal`` kept its name:
the next program to open the restored history read (and, closing last, checkpointed) the old file's log
into it. The first two tests run a real `rigscope record` and rename a real file over its database; the
others drive the writer in this process for the cases around it (moved away; the old file still open).
"""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from tests.unit.history.helpers import snapshot
from tests.waits import until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a file open elsewhere cannot be renamed over")

REPO = Path(__file__).resolve().parents[3]
#: The issue's lost history had 220 samples.
N = 220
#: The writer-only tests' samples (2026-05-28 UTC); no retention runs there.
RECENT = 1_780_000_000.0


def _history(path: Path, count: int, start: float) -> None:
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(start + i) for i in range(count)])


def _times(path: Path) -> list[float]:
    """Every sample's time in s (one host row per snapshot), read through a read-only connection, closed again."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return [r[0] / 1000.0 for r in conn.execute("SELECT ts FROM host_samples ORDER BY ts")]  # stored in ms
    finally:
        conn.close()


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


class _Recorder:
    """`rigscope record` as a child; its stderr lines arrive in ``lines`` (read on a thread: never blocks)."""

    def __init__(self, db: Path, tmp_path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "RIGSCOPE_CONFIG_DIR": str(tmp_path / "cfg"),
               "RIGSCOPE_DATA_DIR": str(tmp_path / "data")}
        self.proc = subprocess.Popen([sys.executable, "-m", "desktop", "record", "--simulate", "--interval", "0.1",
                                      "--db", str(db)], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def said(self, text: str) -> str | None:
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return next((line for line in self.seen if text in line), None)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self._finish()
        self.said("")
        return code, "".join(self.seen)

    def _finish(self) -> None:
        self._reader.join(timeout=60)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._finish()


@pytest.fixture
def recorder_at(tmp_path: Path) -> Iterator[list[_Recorder]]:
    started: list[_Recorder] = []
    yield started
    for recorder in started:
        recorder.kill()


def _written(err: str) -> int:
    return int(err.split("Stopped: ", 1)[1].split(" samples", 1)[0].replace(",", ""))


def test_a_history_renamed_over_the_recorders_keeps_its_rows_and_takes_the_new_samples(
        tmp_path: Path, recorder_at: list[_Recorder]) -> None:
    db, backup, old = tmp_path / "h.sqlite", tmp_path / "backup.sqlite", tmp_path / "recorded-before.sqlite"
    # The backup's samples end an hour before now: inside the raw retention the recorder applies, and before
    # every sample it records (the recorder's clock is the real one).
    recent = time.time() - 3600.0
    _history(backup, N, recent - N)
    restored = _times(backup)
    recorder = _Recorder(db, tmp_path)
    recorder_at.append(recorder)
    until(lambda: recorder.said("Recording to") is not None)  # said once its tables are made
    until(lambda: len(_times(db)) > 0)  # a commit landed in the file it opened
    os.link(db, old)  # the old file keeps a name: what was recorded into it is counted too
    os.replace(backup, db)  # the backup restored over the live database
    until(lambda: recorder.said("was replaced by another file") is not None)
    until(lambda: any(t > recent for t in _times(db)))  # the recorder's samples land in the restored file
    code, err = recorder.stop()
    assert code == 0, err
    line = recorder.said("was replaced by another file")
    assert line is not None and "go to the file now at that name, after its own rows, which are kept" in line
    assert "could not be written" not in err and "Traceback" not in err, err
    now_there, before = _times(db), _times(old)
    assert [t for t in now_there if t < recent] == restored and len(restored) == N  # all N, as they were
    new = [t for t in now_there if t > recent]
    assert new and before and all(t > recent for t in before)
    assert len(before) + len(new) == _written(err)  # every sample recorded is in one file or the other
    assert max(before) < min(new)  # nothing recorded after the rename went into the replaced file
    assert _integrity(db) == _integrity(old) == "ok"


def test_another_programs_file_renamed_over_is_left_alone_and_the_samples_go_aside(
        tmp_path: Path, recorder_at: list[_Recorder]) -> None:
    db, theirs, old = tmp_path / "h.sqlite", tmp_path / "theirs.sqlite", tmp_path / "recorded-before.sqlite"
    conn = sqlite3.connect(theirs)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?)", [(f"note {i}",) for i in range(50)])
    conn.commit()
    conn.close()
    their_bytes = theirs.read_bytes()
    recorder = _Recorder(db, tmp_path)
    recorder_at.append(recorder)
    until(lambda: recorder.said("Recording to") is not None)  # said once its tables are made
    until(lambda: len(_times(db)) > 0)
    os.link(db, old)
    os.replace(theirs, db)
    until(lambda: recorder.said("go to a new file beside it") is not None)
    asides = list(tmp_path.glob("h.sqlite.recorded-*.sqlite"))
    assert len(asides) == 1
    until(lambda: len(_times(asides[0])) > 0)
    code, err = recorder.stop()
    assert code == 0, err
    line = recorder.said("go to a new file beside it")
    assert line is not None and str(asides[0]) in line and "is not a Rigscope history database" in line
    assert f"(the last of them to {asides[0]}, since the database was replaced)" in err  # said again at the end
    assert db.read_bytes() == their_bytes  # byte for byte as their program wrote it
    assert len(_times(old)) + len(_times(asides[0])) == _written(err)
    assert _integrity(asides[0]) == "ok"


def _writer(db: Path) -> HistoryWriter:
    writer = HistoryWriter(db, flush_interval_s=3600.0)
    writer.start()
    return writer


def test_a_database_moved_away_starts_a_new_one_at_its_name_and_the_moved_copy_is_whole(tmp_path: Path) -> None:
    db, moved = tmp_path / "h.sqlite", tmp_path / "moved.sqlite"
    writer = _writer(db)
    try:
        for i in range(30):
            writer.submit(snapshot(RECENT + i))
        assert writer.flush(timeout_s=60)
        os.replace(db, moved)
        for i in range(30, 50):
            writer.submit(snapshot(RECENT + i))
        assert writer.flush(timeout_s=60)
        notices = writer.take_notices()
        assert len(notices) == 1 and "was moved away or deleted" in notices[0]
        assert "20 samples waiting go to the file now at that name" in notices[0]
    finally:
        writer.close()
    assert writer.take_notices() == [] and writer.aside is None
    assert _times(moved) == [RECENT + i for i in range(30)]  # checkpointed into itself: whole without its -wal
    assert _times(db) == [RECENT + i for i in range(30, 50)]


def test_a_replaced_file_still_open_in_this_process_sends_the_samples_aside(tmp_path: Path) -> None:
    db, backup = tmp_path / "h.sqlite", tmp_path / "backup.sqlite"
    _history(backup, N, RECENT - 1000.0)
    restored = _times(backup)
    writer = _writer(db)
    reader = None
    try:
        writer.submit(snapshot(RECENT))
        assert writer.flush(timeout_s=60)
        reader = HistoryStore.open(db, readonly=True)  # the window's reading store holds the old file
        os.replace(backup, db)
        for i in range(1, 11):
            writer.submit(snapshot(RECENT + i))
        assert writer.flush(timeout_s=60)
        notices = writer.take_notices()
        assert len(notices) == 1 and "still open elsewhere in this program" in notices[0], notices
        assert writer.aside is not None and str(writer.aside) in notices[0]
        assert reader.time_range() == (RECENT, RECENT)  # the old file, still read whole
    finally:
        if reader is not None:
            reader.close()
        writer.close()
    assert writer.aside is not None
    assert _times(writer.aside) == [RECENT + i for i in range(1, 11)]
    assert _times(db) == restored


def test_a_demo_database_renamed_over_is_left_alone_and_the_samples_go_aside(tmp_path: Path) -> None:
    from desktop import cli

    db, demo = tmp_path / "h.sqlite", tmp_path / "demo.sqlite"
    assert cli.main(["demo", "--days", "0.01", "--db", str(demo)], now_s=RECENT) == 0
    demo_times = _times(demo)
    writer = _writer(db)
    try:
        writer.submit(snapshot(RECENT + 1))
        assert writer.flush(timeout_s=60)
        os.replace(demo, db)
        writer.submit(snapshot(RECENT + 2))
        assert writer.flush(timeout_s=60)
        notices = writer.take_notices()
        assert len(notices) == 1 and "it is a demo database" in notices[0], notices
    finally:
        writer.close()
    assert writer.aside is not None and _times(writer.aside) == [RECENT + 2]
    assert _times(db) == demo_times


#: Another program reading the database: a connection that has read it (so it is attached to its -shm), held.
_READER = """
import sqlite3, sys
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
conn.execute("SELECT count(*) FROM host_samples").fetchone()
print("reading", flush=True)
sys.stdin.read()
conn.close()
"""


def test_a_replaced_file_another_program_still_reads_sends_the_samples_aside(tmp_path: Path) -> None:
    db, backup = tmp_path / "h.sqlite", tmp_path / "backup.sqlite"
    _history(backup, N, RECENT - 1000.0)
    restored = _times(backup)
    writer = _writer(db)
    reader = None
    try:
        writer.submit(snapshot(RECENT))
        assert writer.flush(timeout_s=60)
        reader = subprocess.Popen([sys.executable, "-c", _READER, str(db)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
        os.replace(backup, db)
        writer.submit(snapshot(RECENT + 1))
        assert writer.flush(timeout_s=60)
        notices = writer.take_notices()
        assert len(notices) == 1 and "another program still has the replaced file open" in notices[0], notices
    finally:
        if reader is not None:
            reader.communicate(input="", timeout=60)
        writer.close()
    assert writer.aside is not None and _times(writer.aside) == [RECENT + 1]
    assert _times(db) == restored
