"""Schema v10's packed GPU samples (issue 27): an old file migrates and reads back the same values, both
write paths store the same, the side rows follow INSERT OR IGNORE and retention, and a sample stays
within 60 bytes on disk."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from desktop.config import RetentionSettings
from desktop.history import bulk, layout, packing, schema
from desktop.history.query import read_raw
from desktop.history.rollup import apply_retention, run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuSample
from tests.unit.history.helpers import EMPTY_SAMPLE, FULL_INFO, FULL_SAMPLE, snapshot

T0 = 1_790_000_000.0
GPU_INFO_JSON = '{"index": 0, "uuid": "GPU-old", "name": "Old GPU"}'

#: v9 rows (registry order after gpu, ts): full, all NULL, some counters NULL and some not, a huge
#: (garbage) VRAM, negative values, a mask with high bits, counters of 0 (counted, nothing throttled),
#: counters beyond what the row holds.
_V9_ROWS: list[tuple[int | None, ...]] = [
    (875, 410, 150005, 13835, 783, 1427, 123456789, 2310, 9001, 64, 0x44, 150000, 30000, 4, 16, 0, 750, 300, 125, 0,
     364),
    (None,) * 21,
    (10, None, None, 20000, 300, 50, None, 210, 405, None, 0, 0, 0, 1, 16, 8, None, 1000, None, 0, None),
    (0, 0, 2**61 + 7, 3, -50, -1, 2**40, 0, 0, 0, 2**40 + 0x100, 0, 0, None, None, None, 0, 0, 0, 0, 0),
    (1000, 1000, 3200, None, 880, 4545, 67815236000, 2520, 10501, 77, 4, 132000, 33000, 4, 16, 0, 0, 0, 0, 0, 960),
    # counters that do not fit the row's 15-bit fields: the side table
    (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 40000, None, 0, -7, 17),
]


def _v9_file(path: Path) -> list[tuple[int, tuple[int | None, ...]]]:
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, target=9)
    conn.execute(f"INSERT INTO gpus (uuid, idx, name, info_json) VALUES ('GPU-old', 0, 'Old GPU', '{GPU_INFO_JSON}')")
    rows = [(int(T0 * 1000) + 1000 * i, row) for i, row in enumerate(_V9_ROWS * 3)]
    conn.executemany(f"INSERT INTO gpu_samples (gpu, ts, {', '.join(GPU_METRIC_NAMES)}) "
                     f"VALUES (1, ?, {', '.join('?' * len(GPU_METRIC_NAMES))})", [(ts, *row) for ts, row in rows])
    stored = conn.execute(f"SELECT ts, {', '.join(GPU_METRIC_NAMES)} FROM gpu_samples ORDER BY ts").fetchall()
    conn.close()
    return [(row[0], tuple(row[1:])) for row in stored]


def test_an_old_layout_file_migrates_and_reads_back_the_same_values(tmp_path: Path) -> None:
    path = tmp_path / "v9.sqlite"
    before = _v9_file(path)
    with HistoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert [r[1] for r in store.conn.execute("PRAGMA table_info(gpu_samples)")] == ["gpu", "ts", "pack", "counters",
                                                                                         *layout.ROW_METRICS]
        # one pack per distinct combination, a side row only for counters the row cannot hold
        assert store.conn.execute("SELECT count(*) FROM gpu_packs").fetchone()[0] == len(_V9_ROWS)
        assert store.conn.execute("SELECT count(*) FROM gpu_counters").fetchone()[0] == 3
        assert store.conn.execute("SELECT count(*) FROM gpu_samples WHERE counters = 0").fetchone()[0] == 3 * 3
        # The stored integers, as the float64 every reader gets them in (exact up to 2**53, as before v10).
        ts, stored = packing.read_columns(store.conn, 1, 0, 2**62, GPU_METRIC_NAMES)
        assert ts.tolist() == [float(t) for t, _ in before]
        for i, (_, old) in enumerate(before):
            assert [np.nan if v is None else float(v) for v in old] == pytest.approx(
                [stored[m][i] for m in GPU_METRIC_NAMES], rel=0, abs=0, nan_ok=True)
        time_s, cols = read_raw(store, 1, T0 - 1, T0 + 100)
        assert time_s.tolist() == [t / 1000.0 for t, _ in before]
        for i, (_, old) in enumerate(before[:3]):
            assert [v is None for v in old] == [bool(np.isnan(cols[m][i])) for m in GPU_METRIC_NAMES]
            assert [v for v in old if v is not None] == [round(float(cols[m][i]) * layout.GPU_SCALES[m])
                                                         for m in GPU_METRIC_NAMES if not np.isnan(cols[m][i])]
        assert cols["vram_free_mib"][3] == 0.3  # exact beside a garbage 2**61 used: the subtraction is in SQL
        assert np.isnan(cols["clock_event_sw_power_cap_s"][2]) and cols["clock_event_hw_power_brake_s"][2] == 0.0
        assert cols["clock_event_sw_thermal_s"][2] == 1.0
        assert store.query("GPU-old", ["temperature_c"], T0 - 1, T0 + 100).columns["temperature_c"][0] == 78.3


def test_snapshots_and_bulk_columns_store_the_same_values(tmp_path: Path) -> None:
    samples = [FULL_SAMPLE, EMPTY_SAMPLE, dataclasses.replace(FULL_SAMPLE, vram_used_mib=None, pcie_gen=None,
                                                              clock_event_sw_power_cap_s=None),
               dataclasses.replace(FULL_SAMPLE, clock_event_sw_power_cap_s=0.0, clock_event_sw_thermal_s=0.0,
                                   clock_event_hw_thermal_s=0.0, clock_event_hw_power_brake_s=None, pstate=8),
               dataclasses.replace(FULL_SAMPLE, clock_event_hw_thermal_s=40.0)] * 4
    times = [T0 + i for i in range(len(samples))]
    with HistoryStore.open(tmp_path / "snap.sqlite") as snap, HistoryStore.open(tmp_path / "bulk.sqlite") as cols:
        snap.write_snapshots([snapshot(t, sample=s) for t, s in zip(times, samples, strict=True)])
        columns = {m: np.array([np.nan if (v := getattr(s, m)) is None else float(v) for s in samples])
                   for m in GPU_METRIC_NAMES}
        assert bulk.write_gpu_columns(cols, FULL_INFO, times, columns) == len(samples)
        a_t, a = read_raw(snap, snap.gpu_id(FULL_INFO.uuid) or 0, T0, T0 + 100)
        b_t, b = read_raw(cols, cols.gpu_id(FULL_INFO.uuid) or 0, T0, T0 + 100)
        assert a_t.tolist() == b_t.tolist() == times
        for m in GPU_METRIC_NAMES:
            assert np.array_equal(a[m], b[m], equal_nan=True), m
            assert np.array_equal(a[m], columns[m], equal_nan=True), m
        for store in (snap, cols):  # four combinations of the slow columns, one sample counting 40 s
            assert store.conn.execute("SELECT count(*) FROM gpu_packs").fetchone()[0] == 4
            assert store.conn.execute("SELECT count(*) FROM gpu_counters").fetchone()[0] == 4


def test_a_sample_stored_already_keeps_its_counted_seconds(tmp_path: Path) -> None:
    quiet = dataclasses.replace(FULL_SAMPLE, clock_event_sw_power_cap_s=0.0, clock_event_sw_thermal_s=0.0,
                                clock_event_hw_thermal_s=0.0, clock_event_hw_power_brake_s=0.0)
    long = dataclasses.replace(FULL_SAMPLE, clock_event_sw_thermal_s=50.0)  # beyond the row: a side row
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0, sample=quiet), snapshot(T0, sample=long)])  # same key twice
        store.write_snapshots([snapshot(T0, sample=long)])
        gid = store.gpu_id(FULL_INFO.uuid) or 0
        bulk.write_gpu_columns(store, FULL_INFO, [T0, T0], {"clock_event_sw_thermal_s": [50.0, 60.0]})
        bulk.write_gpu_columns(store, FULL_INFO, [T0 + 1, T0 + 1], {"clock_event_sw_thermal_s": [0.0, 60.0]})
        _, cols = read_raw(store, gid, T0, T0 + 2)
        assert [cols[m][0] for m in layout.COUNTER_METRICS] == [0.0, 0.0, 0.0, 0.0]
        assert cols["clock_event_sw_thermal_s"][1] == 0.0 and np.isnan(cols["clock_event_sw_power_cap_s"][1])
        assert store.conn.execute("SELECT count(*) FROM gpu_counters").fetchone()[0] == 0


def test_retention_deletes_the_side_rows_with_their_samples(tmp_path: Path) -> None:
    day = 86400.0
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        long = dataclasses.replace(FULL_SAMPLE, clock_event_hw_thermal_s=600.0)  # 10 min: a side row each
        store.write_snapshots([snapshot(T0 + k * 600.0, sample=long) for k in range(int(3 * day / 600))])
        assert store.conn.execute("SELECT count(*) FROM gpu_counters").fetchone()[0] == 3 * 144
        now = T0 + 3 * day
        run_rollups(store, now)
        apply_retention(store, RetentionSettings(raw_days=1), now)
        samples, side = (store.conn.execute(f"SELECT count(*), min(ts) FROM {t}").fetchone()
                         for t in ("gpu_samples", "gpu_counters"))
        assert samples == side and samples[0] <= 145


def _simulated_day(store: HistoryStore) -> int:
    from desktop.telemetry.scenarios import WeekScenario
    from desktop.telemetry.simulated import SimulatedGpuModel, parse_profile_list, profile_info

    profiles = parse_profile_list("rtx4090-laptop,rtx4090")
    model = SimulatedGpuModel(profiles, WeekScenario([p.vram_total_mib for p in profiles], seed=1), seed=1)
    rows = 0
    for i, profile in enumerate(profiles):
        trace = model.trace(i, T0, T0 + 86400.0, 1.0)
        rows += bulk.write_gpu_columns(store, profile_info(profile, i), trace.time_s, trace.columns)
    return rows


def test_a_gpu_sample_takes_at_most_60_bytes_on_disk(tmp_path: Path) -> None:
    # Deterministic (SQLite lays out the same rows the same way): the issue-27 budget, with every column kept.
    with HistoryStore.open(tmp_path / "day.sqlite") as store:
        rows = _simulated_day(store)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(store.path)
        _, cols = read_raw(store, 2, T0, T0 + 86400.0)
    assert rows == 2 * 86400
    assert not np.isnan(cols["vram_free_mib"]).any() and not np.isnan(cols["clock_event_sw_power_cap_s"]).any()
    assert size / rows <= 60.0, f"{size / rows:.1f} bytes per GPU sample"


def test_an_unknown_pack_id_is_never_read_as_another(tmp_path: Path) -> None:
    # A pack made in a rolled-back transaction must not be reused: the next write reads the table again.
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        try:
            with store.transaction():
                store.write_snapshots_in_transaction([snapshot(T0, sample=dataclasses.replace(FULL_SAMPLE, pstate=3))])
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        other = GpuSample(pstate=5)
        store.write_snapshots([snapshot(T0 + 1, sample=dataclasses.replace(FULL_SAMPLE, pstate=3)),
                               snapshot(T0 + 2, sample=other)])
        _, cols = read_raw(store, store.gpu_id(FULL_INFO.uuid) or 0, T0, T0 + 5)
        assert cols["pstate"].tolist() == [3.0, 5.0]


def _stored(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    samples = conn.execute("SELECT s.*, p.* FROM gpu_samples s JOIN gpu_packs p ON p.id = s.pack "
                           "ORDER BY s.gpu, s.ts").fetchall()
    return [tuple(v for k, v in enumerate(row) if k != 2) for row in samples] + conn.execute(
        "SELECT * FROM gpu_counters ORDER BY gpu, ts").fetchall()  # the pack id itself may differ: not compared


@pytest.mark.parametrize("variables", [32766, 999, 20])
@pytest.mark.parametrize("rows", [1, 255, 256, 257, 1000])
def test_the_multi_row_write_stores_what_one_statement_per_row_stores(tmp_path: Path, rows: int,
                                                                      variables: int) -> None:
    # Repeated and out-of-order keys (the first wins), a key already stored (kept whole), NaNs, values past the
    # shared ints and below zero, counters past a row's 16 bits (side rows); a low variable limit as some
    # SQLite builds have (999 before 3.32), down to one row per statement (14 bound values here).
    rng = np.random.default_rng(rows)
    times = T0 + np.arange(rows, dtype=np.float64)
    times[rows // 3:rows // 3 + 5] = times[rows // 3]
    times[-min(rows, 7):] = times[-min(rows, 7):][::-1]
    columns = {m: rng.uniform(0, 100, rows) for m in GPU_METRIC_NAMES}
    columns["vram_used_mib"] = rng.uniform(0, 80_000, rows)  # x10 past SHARED_INTS
    columns["power_w"][::5] = np.nan
    columns["pcie_rx_kib_s"][::3] = -4.0
    columns["clock_event_sw_thermal_s"][::11] = 900.0  # 900,000 ms: a side row
    written = []
    for name in ("multi", "single"):
        conn = sqlite3.connect(tmp_path / f"{name}-{rows}-{variables}.sqlite", isolation_level=None)
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variables)
        schema.migrate(conn)
        conn.execute(f"INSERT INTO gpus (uuid, idx, name, info_json) VALUES ('GPU-old', 0, 'Old GPU', "
                     f"'{GPU_INFO_JSON}')")
        scaled = {m: v * layout.GPU_SCALES[m] for m, v in columns.items()}
        packing.write_bulk(conn, 1, times[:1] + 0.0, {m: v[:1] * 0 + 7 for m, v in scaled.items()})  # stored first
        if name == "multi":
            inserted = packing.write_bulk(conn, 1, times, scaled)
        else:
            sql, single_rows, counter_rows = packing.bulk_rows(packing.Packs(conn), 1, times, scaled)
            conn.executemany(packing.INSERT_COUNTERS, counter_rows)
            before = conn.total_changes
            conn.executemany(sql, single_rows)
            inserted = conn.total_changes - before
        written.append((inserted, _stored(conn)))
        conn.close()
    assert written[0] == written[1]
    assert written[0][0] == len(np.unique(times)) - 1  # every distinct key but the one stored before
