"""Any byte is data: a process whose name, command, user or container holds non-UTF-8 bytes costs
nothing but its own strings, which come back exactly as they went in (issue 20).

psutil decodes /proc with ``surrogateescape``: the prctl name ``b"\\xff\\xfe\\x80bad"`` arrives
as ``"\\udcff\\udcfe\\udc80bad"``, which sqlite3 cannot encode. The writer used to drop the whole
batch (GPU and host samples too) with a traceback, every batch, for as long as that process lived.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from advisor.safetext import printable
from desktop.history import query
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from tests.unit.history.helpers import FULL_INFO, FULL_PROCESS, snapshot

HOSTILE_NAME = os.fsdecode(b"\xff\xfe\x80bad")
HOSTILE_PROCESS = dataclasses.replace(
    FULL_PROCESS, name=HOSTILE_NAME, user=os.fsdecode(b"us\xe9r"), command=os.fsdecode(b"python arg\xffbad"),
    container="ctr-\ud800-lone")
T0 = 1_700_000_000.0


def test_a_hostile_process_name_loses_no_sample_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    writer = HistoryWriter(path, flush_interval_s=0.05)
    writer.start()
    try:
        for n in range(30):
            writer.submit(snapshot(T0 + n, processes=(HOSTILE_PROCESS, FULL_PROCESS)))
        assert writer.flush(10.0)
        assert writer.status.rows_dropped == 0 and writer.status.last_error is None
    finally:
        writer.close()
    with HistoryStore.open(path, readonly=True) as store:
        assert store.conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0] == 30
        assert store.conn.execute("SELECT count(*) FROM host_samples").fetchone()[0] == 30
        procs = [p for _, p in query.process_history(store, T0, T0 + 60) if p.pid == HOSTILE_PROCESS.pid
                 and p.name != FULL_PROCESS.name]
        assert len(procs) == 30
        back = procs[0]
        assert (back.name, back.user, back.command, back.container) == (
            HOSTILE_PROCESS.name, HOSTILE_PROCESS.user, HOSTILE_PROCESS.command, HOSTILE_PROCESS.container)
        assert printable(back.name) == "\\xff\\xfe\\x80bad"
        assert HOSTILE_NAME in store.string_table().values()


def test_hostile_gpu_names_and_event_details_are_kept(tmp_path: Path) -> None:
    info = dataclasses.replace(FULL_INFO, name=os.fsdecode(b"GPU \xff"))
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0, info=info)])
        with store.transaction():
            store.add_event(T0, "alert.test", info.uuid, f"{HOSTILE_NAME} is hot")
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:
        assert [g.name for g in store.gpus()] == [info.name]
        assert [e.detail for e in store.events(T0 - 1, T0 + 1, kinds=["alert.test"])] == [f"{HOSTILE_NAME} is hot"]
