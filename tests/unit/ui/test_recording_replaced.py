"""The window's recording when a backup is renamed over its database (issue 34 item 2): a banner says where
the samples go, and the restored file is left whole.

The window's own reading store holds the file it opened (the History pages read it), so its writer cannot
safely open the file renamed in beside the old one's ``-shm``: the samples go to a new file beside it.
A real HistoryWriter on a real file; the simulated GPU.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from desktop.history.store import HistoryStore
from desktop.sessions.recording import RecordingSession
from tests.unit.history.helpers import snapshot

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a file open elsewhere cannot be renamed over")


def _gpu_rows(path: Path) -> int:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0])
    finally:
        conn.close()


def test_a_backup_renamed_over_the_windows_database_is_said_in_a_banner_and_kept(make_app: Any,
                                                                                 tmp_path: Path) -> None:
    db, backup = tmp_path / "h.sqlite", tmp_path / "backup.sqlite"
    with HistoryStore.open(backup) as store:
        store.write_snapshots([snapshot(1_780_000_000.0 + i) for i in range(40)])
    recording = RecordingSession.open(db)
    assert recording.mode == "recording", recording.detail
    h = make_app(recording=recording)
    h.app.window.show()
    writer = recording.writer
    assert writer is not None
    h.tick(3)
    assert writer.flush(timeout_s=60)
    os.replace(backup, db)
    h.tick(4)
    assert writer.flush(timeout_s=60)
    h.tick()  # the status update after the flush shows what the writer said
    texts = [text for text in h.app.window.banners.texts() if "was replaced by another file" in text]
    assert len(texts) == 1 and "go to a new file beside it" in texts[0], h.app.window.banners.texts()
    aside = writer.aside
    assert aside is not None and str(aside) in texts[0]
    h.app.shutdown()
    assert _gpu_rows(db) == 40  # the restored history, whole
    assert _gpu_rows(aside) == 5  # one GPU: the 4 samples after the rename and the one the banner came with
