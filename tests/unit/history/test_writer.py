"""HistoryWriter: batched writes off the caller's thread, a full disk, a read-only database, a bug."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from desktop.history.lock import DatabaseBusy
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from tests.unit.history.helpers import snapshot

T0 = 1_790_000_000.0


def _count(path: Path) -> int:
    with HistoryStore.open(path, readonly=True) as store:
        return store.counts()["gpu_samples"]


def test_submitted_snapshots_are_written_on_flush_and_close(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    writer = HistoryWriter(path, flush_interval_s=3600)
    writer.start()
    try:
        for i in range(10):
            writer.submit(snapshot(T0 + i))
        writer.add_event(T0 + 3, "alert", "GPU-full", "too hot")
        assert writer.status.rows_pending == 10
        assert writer.flush() is True
        status = writer.status
        assert (status.rows_written, status.rows_pending, status.disk_full, status.last_error) == (10, 0, False, None)
        assert status.last_commit_s is not None
        assert _count(path) == 10
        writer.submit(snapshot(T0 + 10))
        assert writer.call(lambda store: store.counts()["events"]).result() >= 1
    finally:
        writer.close()
    assert _count(path) == 11
    with HistoryStore.open(path, readonly=True) as store:
        assert [e.detail for e in store.events(0, T0 + 100, kinds=["alert"])] == ["too hot"]


def test_the_writer_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryWriter(path), pytest.raises(DatabaseBusy):
        HistoryWriter(path).start()
    with HistoryWriter(path) as again:
        assert again.flush()


def test_full_disk_keeps_sampling_buffers_bounded_and_resumes(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.sqlite"
    writer = HistoryWriter(path, flush_interval_s=3600, max_buffer=300)
    writer.start()
    try:
        writer.submit(snapshot(T0))
        assert writer.flush()
        # SQLite's max_page_count makes this connection's disk "full" a few pages from now.
        pages = writer.call(lambda s: s.conn.execute("PRAGMA page_count").fetchone()[0]).result()
        writer.call(lambda s: s.conn.execute(f"PRAGMA max_page_count = {pages + 1}")).result()
        with caplog.at_level(logging.INFO, logger="desktop.history.writer"):
            for i in range(1, 1001):
                writer.submit(snapshot(T0 + i))  # never blocks, whatever the disk does
                if i % 100 == 0:
                    assert writer.flush() is False
            status = writer.status
            assert status.disk_full and "full" in (status.last_error or "")
            assert status.rows_pending == 300  # bounded: the newest 300 are kept
            assert status.rows_dropped == 1000 - 300
            full_warnings = [r for r in caplog.records if "full" in r.getMessage()]
            assert len(full_warnings) == 1  # said once, not on every retry
            writer.call(lambda s: s.conn.execute("PRAGMA max_page_count = 1073741823")).result()
            assert writer.flush() is True
        status = writer.status
        assert (status.disk_full, status.rows_pending, status.last_error) == (False, 0, None)
        assert status.rows_written == 301
    finally:
        writer.close()
    with HistoryStore.open(path, readonly=True) as store:
        kept = store.conn.execute("SELECT min(ts), max(ts), count(*) FROM gpu_samples").fetchone()
    assert kept == (int(T0 * 1000), int((T0 + 1000) * 1000), 301)


def test_read_only_database_is_an_environment_error_retried(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600)
    writer.start()
    try:
        writer.call(lambda s: s.conn.execute("PRAGMA query_only = 1")).result()
        writer.submit(snapshot(T0))
        assert writer.flush() is False
        status = writer.status
        assert "read-only" in (status.last_error or "") and not status.disk_full and status.rows_pending == 1
        writer.call(lambda s: s.conn.execute("PRAGMA query_only = 0")).result()
        assert writer.flush() is True
    finally:
        writer.close()


def test_a_bug_drops_the_batch_but_not_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600)
    writer.start()
    try:
        writer.call(lambda s: s.conn.execute("DROP TABLE host_samples")).result()
        writer.submit(snapshot(T0))
        with caplog.at_level(logging.ERROR):
            assert writer.flush() is True  # nothing left to retry: the batch is gone
        assert writer.status.rows_dropped == 1
        assert "no such table" in (writer.status.last_error or "")
        assert any("dropped" in r.getMessage() for r in caplog.records)
    finally:
        writer.close()


def test_a_malformed_snapshot_does_not_kill_the_writer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600) as writer:
        writer.submit("not a snapshot")  # type: ignore[arg-type]
        with caplog.at_level(logging.ERROR):
            assert writer.flush(timeout_s=30) is True
        assert writer.status.rows_dropped == 1
        assert "AttributeError" in (writer.status.last_error or "")
        writer.submit(snapshot(T0))
        assert writer.flush(timeout_s=30) is True
        assert writer.status.rows_written == 1


def test_corrupt_file_recovery_is_reported_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"SQLite format 3\0" + b"garbage" * 1000)  # a damaged database, not any file (issue 12)
    with HistoryWriter(path) as writer:
        assert writer.recovered_from is not None and writer.recovered_from.exists()


def test_samples_still_in_memory_at_close_are_said_lost_with_their_time_range(tmp_path: Path) -> None:
    """Issue 20: the disk-full message says "keeping samples in memory"; at exit they cannot be kept,
    so close says how many and from when to when instead of dropping them silently."""
    writer = HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600)
    writer.start()
    writer.submit(snapshot(T0))
    assert writer.flush()
    pages = writer.call(lambda s: s.conn.execute("PRAGMA page_count").fetchone()[0]).result()
    writer.call(lambda s: s.conn.execute(f"PRAGMA max_page_count = {pages + 1}")).result()
    for i in range(1, 401):
        writer.submit(snapshot(T0 + i))
    assert writer.flush() is False and writer.status.disk_full
    writer.close()
    lost = writer.lost_on_close or ""
    first = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(T0 + 1))
    last = time.strftime("%H:%M:%S", time.localtime(T0 + 400))
    assert lost.startswith(f"400 samples from {first} to {last}") and "full" in lost and "lost" in lost, lost


def test_one_bad_snapshot_costs_only_itself_not_its_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with HistoryWriter(tmp_path / "h.sqlite", flush_interval_s=3600) as writer:
        for i in range(5):
            writer.submit(snapshot(T0 + i))
        writer.submit("not a snapshot")  # type: ignore[arg-type]
        for i in range(5, 10):
            writer.submit(snapshot(T0 + i))
        with caplog.at_level(logging.ERROR):
            assert writer.flush(timeout_s=30) is True
        assert (writer.status.rows_written, writer.status.rows_dropped) == (10, 1)
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:
        assert store.conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0] == 10
