"""Forward migrations: a file from every older schema version opens, keeps its data and reaches the latest."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from desktop.errors import UserError
from desktop.history import layout, schema
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO, snapshot

T0 = 1_790_000_000.0


def _old_file(path: Path, version: int) -> None:
    """A database as a release with schema ``version`` left it, with a little data of that era."""
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, target=version)
    if version >= 1:
        conn.execute("INSERT INTO gpus (uuid, idx, name, info_json) VALUES ('GPU-old', 0, 'Old GPU', "
                     "'{\"index\": 0, \"uuid\": \"GPU-old\", \"name\": \"Old GPU\"}')")
        if version >= 10:  # the packed layout: the rarely-changing columns in a pack row
            conn.execute("INSERT INTO gpu_packs (id, counted) VALUES (1, 0)")
            conn.execute("INSERT INTO gpu_samples (gpu, ts, pack, counters, temperature_c, power_w) "
                         "VALUES (1, ?, 1, 0, 655, 1234)", (int(T0 * 1000),))
        else:
            conn.execute("INSERT INTO gpu_samples (gpu, ts, temperature_c, power_w) VALUES (1, ?, 655, 1234)",
                         (int(T0 * 1000),))
        conn.execute("INSERT INTO events (ts, kind, gpu_uuid, detail) VALUES (?, 'alert', 'GPU-old', 'hot')", (T0,))
    if version >= 2:
        conn.execute("INSERT INTO strings (text) VALUES ('train.py')")
        conn.execute("INSERT INTO process_samples (ts, gpu, pid, name_id) VALUES (?, 1, 42, 1)", (int(T0 * 1000),))
    if version >= 3:
        conn.execute("INSERT INTO stress_runs (started_s, ended_s, gpu_uuid, gpu_name, workload, dtype, unit, "
                     "peak_throughput, sustained_throughput, throttled, errors, summary) "
                     "VALUES (?, ?, 'GPU-old', 'Old GPU', 'gemm', 'bf16', 'TFLOP/s', 10, 9, 0, 0, 'fine')",
                     (T0, T0 + 60))
    conn.close()


@pytest.mark.parametrize("version", range(schema.SCHEMA_VERSION))
def test_every_older_version_migrates_forward_keeping_data(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.sqlite"
    _old_file(path, version)
    with HistoryStore.open(path) as store:
        assert store.recovered_from is None
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        counts = store.counts()
        assert counts["gpu_samples"] == (1 if version >= 1 else 0)
        assert counts["process_samples"] == (1 if version >= 2 else 0)
        assert counts["stress_runs"] == (1 if version >= 3 else 0)
        if version >= 1:
            result = store.query("GPU-old", ["temperature_c", "power_w"], T0 - 10, T0 + 10)
            assert result.columns["temperature_c"].tolist() == [65.5]
            assert result.columns["power_w"].tolist() == [123.4]
            assert [e.detail for e in store.events(0, T0 + 1)] == ["hot"]
        # and the migrated file takes new data in every table
        store.write_snapshots([snapshot(T0 + 5)])
        assert store.gpu_id(FULL_INFO.uuid) is not None


def test_a_readonly_open_of_an_old_file_migrates_it_first(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _old_file(path, 1)
    with HistoryStore.open(path, readonly=True) as store:
        assert store.readonly
        assert store.counts()["stress_runs"] == 0


def test_a_file_from_a_newer_release_is_refused_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UserError, match="newer"):
        HistoryStore.open(path)
    assert path.exists()
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_file_from_a_newer_release_is_read_as_far_as_understood_and_that_is_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "newer.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0)])
    conn = sqlite3.connect(path)  # as a newer release leaves it
    conn.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    conn.close()
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # readers reopen the file often
            with HistoryStore.open(path, readonly=True) as store:
                assert store.readonly and store.counts()["gpu_samples"] == 1
    said = [r for r in caplog.records if "newer Rigscope" in r.getMessage()]
    assert len(said) == 1 and str(path) in said[0].getMessage()
    # `rigscope` prints the logger's name with the line: the store's, wherever the opening code lives.
    assert said[0].name == "desktop.history.store"


def test_v6_appends_the_counted_seconds_and_old_rows_keep_null(tmp_path: Path) -> None:
    path = tmp_path / "v5.sqlite"
    _old_file(path, 5)
    conn = sqlite3.connect(path, isolation_level=None)
    assert [r[1] for r in conn.execute("PRAGMA table_info(gpu_samples)")][-1] == "pstate"  # as v5 left it
    # A day packed by that release: its blocks lack the new columns.
    conn.execute("INSERT INTO day_blocks (day, source, gpu, rows, columns, data) "
                 "VALUES (20000, 'gpu_minute', 1, 0, 'ts', x'00')")
    conn.execute("INSERT INTO meta (key, value) VALUES ('blocks_until', '1728000000.0')")
    conn.close()
    with HistoryStore.open(path) as store:
        # A file of any age ends in the same layout as a new one (v10 moved the counters to a side table).
        assert [r[1] for r in store.conn.execute("PRAGMA table_info(gpu_samples)")] == ["gpu", "ts", "pack", "counters",
                                                                                         *layout.ROW_METRICS]
        assert [r[1] for r in store.conn.execute("PRAGMA table_info(gpu_counters)")] == ["gpu", "ts",
                                                                                          *layout.COUNTER_METRICS]
        for table in ("gpu_minute", "gpu_hour"):
            assert [r[1] for r in store.conn.execute(f"PRAGMA table_info({table})")] == ["gpu", "ts",
                                                                                      *layout.rollup_columns()]
        result = store.query("GPU-old", ["temperature_c", *layout.COUNTER_METRICS], T0 - 10, T0 + 10)
        assert result.columns["temperature_c"].tolist() == [65.5]
        for name in layout.COUNTER_METRICS:  # nobody counted then: missing, not zero
            assert np.isnan(result.columns[name]).all(), name
        # Dropped, to be packed again with the new columns by the next rollup.
        assert store.conn.execute("SELECT count(*) FROM day_blocks").fetchone()[0] == 0
        assert store.meta("blocks_until") is None
        store.write_snapshots([snapshot(T0 + 5)])
        new = store.query(FULL_INFO.uuid, list(layout.COUNTER_METRICS), T0, T0 + 10)
        assert [float(new.columns[n][0]) for n in layout.COUNTER_METRICS] == [0.75, 0.3, 0.125, 0.0]


def test_v8_adds_process_utilization_and_attribution_and_old_rows_keep_null(tmp_path: Path) -> None:
    from desktop.history.query import process_history
    from desktop.telemetry.model import GpuProcess

    path = tmp_path / "v7.sqlite"
    _old_file(path, 7)
    conn = sqlite3.connect(path, isolation_level=None)
    assert "sm_util_pct" not in [r[1] for r in conn.execute("PRAGMA table_info(process_samples)")]
    conn.execute("INSERT INTO day_blocks (day, source, gpu, rows, columns, data) "
                 "VALUES (20000, 'process_samples', 0, 0, 'ts', x'00')")
    conn.close()
    with HistoryStore.open(path) as store:
        columns = [r[1] for r in store.conn.execute("PRAGMA table_info(process_samples)")]
        assert columns[-6:] == list(layout.PROCESS_V8_COLUMNS)
        (_, old), = process_history(store, T0 - 1, T0 + 1)
        # Nobody asked then: n/a, not idle.
        assert (old.pid, old.name, old.sm_util_pct, old.mem_util_pct, old.command, old.container) == (
            42, "train.py", None, None, None, None)
        assert store.conn.execute("SELECT count(*) FROM day_blocks").fetchone()[0] == 0
        proc = GpuProcess(pid=7, gpu_index=0, name="python", user="ana", vram_mib=2048.0, sm_util_pct=87.0,
                          mem_util_pct=41.0, enc_util_pct=0.0, dec_util_pct=None,
                          command="python train.py --cfg a.yaml", container="docker:trainer (3f2a9c1b4e5d)")
        store.write_snapshots([snapshot(T0 + 5, processes=(proc,))])
        (time_s, back), = process_history(store, T0 + 4, T0 + 6, pid=7)
        assert time_s == T0 + 5
        assert back == proc


def test_processes_creating_one_new_file_at_once_take_each_step_once(tmp_path: Path) -> None:
    """Several processes opening one new database at the same moment (a reader's open migrates too)
    raised "duplicate column name" when two took one step: the version was read before the write lock."""
    import subprocess
    import sys

    from tests.waits import until

    repo = Path(__file__).resolve().parents[3]
    code = ("import sys, time; from pathlib import Path; from desktop.history.store import HistoryStore\n"
            "go = Path(sys.argv[2])\n"
            "Path(sys.argv[3]).touch()\n"  # imported: waiting for the go
            "while not go.exists(): time.sleep(0.001)\n"
            "HistoryStore.open(Path(sys.argv[1])).close()\n")
    for attempt in range(3):
        target, go = tmp_path / f"h{attempt}.sqlite", tmp_path / f"go{attempt}"
        ready = [tmp_path / f"ready{attempt}-{n}" for n in range(4)]
        procs = [subprocess.Popen([sys.executable, "-c", code, str(target), str(go), str(mark)], cwd=repo,
                                  stderr=subprocess.PIPE, text=True) for mark in ready]
        until(lambda marks=ready: all(mark.exists() for mark in marks))  # all four imported and waiting
        go.touch()
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert all(p.returncode == 0 for p in procs), errors
        with HistoryStore.open(target, readonly=True) as store:
            assert int(store.conn.execute("PRAGMA user_version").fetchone()[0]) == schema.SCHEMA_VERSION
