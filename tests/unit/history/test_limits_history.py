"""The limits in force over time (schema v11): stored when they change, read back per sample, migrated from v10."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import numpy as np

from desktop.history import layout, schema
from desktop.history.frames import load_frame
from desktop.history.importer import import_result
from desktop.history.nvsmi_csv import ImportResult
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO, FULL_SAMPLE, snapshot

T0 = 1_790_000_000.0


def _rows(store: HistoryStore) -> list[tuple[float, float | None, float | None, float | None]]:
    return [(ts / 1000.0, *(None if v is None else v / s for v, s in zip(vals, (10, 10, 1), strict=True)))
            for ts, *vals in store.conn.execute(
                "SELECT ts, power_limit_w, temp_slowdown_c, sm_clock_ref_mhz FROM gpu_limits ORDER BY ts")]


def test_snapshots_store_a_row_per_change_and_each_sample_reads_the_limit_then_in_force(tmp_path: Path) -> None:
    at_80 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=80.0)
    at_175 = dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0)
    infos = [at_80] * 5 + [at_175] * 5 + [dataclasses.replace(at_175, temp_slowdown_c=83.0)] * 5
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0 + i, info=info) for i, info in enumerate(infos[:7])])
        store.write_snapshots([snapshot(T0 + 7 + i, info=info) for i, info in enumerate(infos[7:])])
        assert _rows(store) == [(T0, 80.0, 87.0, 2505.0), (T0 + 5, 175.0, 87.0, 2505.0),
                                (T0 + 10, 175.0, 83.0, 2505.0)]
        at = store.limits_at(FULL_INFO.uuid, T0 + np.array([-5.0, 0.0, 4.9, 5.0, 12.0]))
        assert at["power_limit_w"].tolist() == [80.0, 80.0, 80.0, 175.0, 175.0]
        assert at["temp_slowdown_c"].tolist() == [87.0, 87.0, 87.0, 87.0, 83.0]
        frame = load_frame(store, T0, T0 + 15)
        assert frame.gpus[0].power_limit_w is not None
        assert frame.gpus[0].power_limit_w.tolist() == [80.0] * 5 + [175.0] * 10
        assert frame.gpus[0].meta.power_limit_w == 175.0  # the last one read, for what is said of the GPU now


def _v10_file(path: Path) -> None:
    """A v10 history of a laptop whose firmware mode moved its limit 150 -> 175 W while it recorded."""
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, target=10)
    info = dataclasses.asdict(dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0))

    conn.execute("INSERT INTO gpus (uuid, idx, name, info_json, first_seen_s) VALUES (?, 0, 'Test GPU', ?, ?)",
                 (FULL_INFO.uuid, json.dumps(info), T0))
    conn.execute("INSERT INTO gpu_packs (id, clock_event_reasons, counted) VALUES (1, 4, 0)")  # SW power cap
    for i in range(120):
        conn.execute("INSERT INTO gpu_samples (gpu, ts, pack, counters, power_w) VALUES (1, ?, 1, 0, 1400)",
                     (int((T0 + i) * 1000),))
    for t, line in ((T0, "capped at 150 W of 175 W: firmware mode Balanced"),
                    (T0 + 60, "at its rated power (175 W)")):
        conn.execute("INSERT INTO events (ts, kind, gpu_uuid, detail) VALUES (?, 'envelope.limit', ?, ?)",
                     (t, FULL_INFO.uuid, line))
    conn.execute("INSERT INTO meta (key, value) VALUES ('rollup_minute_until', ?)", (repr(T0 + 120),))
    conn.close()


def test_a_v10_history_migrates_seeding_its_limits_from_its_info_and_envelope_events(tmp_path: Path) -> None:
    path = tmp_path / "v10.sqlite"
    _v10_file(path)
    with HistoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION >= 11
        assert _rows(store) == [(T0, 150.0, 87.0, 2505.0), (T0 + 60, 175.0, 87.0, 2505.0)]
        # The rollups are done again from the raw rows still kept (with the capped seconds v11 adds).
        assert store.meta("rollup_minute_until") is None
        columns = {row[1] for row in store.conn.execute("PRAGMA table_info(gpu_minute)")}
        assert {"capped_ds", "power_capped_w"} <= columns
        frame = load_frame(store, T0, T0 + 120)
        per_row = frame.gpus[0].power_limit_w
        assert per_row is not None and set(per_row[:60].tolist()) == {150.0} and set(per_row[60:].tolist()) == {175.0}
        # The next maintenance rolls the raw rows kept up again, with the capped seconds and their mean power.
        store.run_rollups(T0 + 180)
        rows = store.conn.execute("SELECT capped_ds, power_capped_w FROM gpu_minute ORDER BY ts").fetchall()
        assert sum(r[0] for r in rows) == 1200 and {r[1] for r in rows} == {1400}  # 120 s capped at 140 W
        # and it records on: the next snapshot at 175 W writes nothing, a change does.
        store.write_snapshots([snapshot(T0 + 200, info=dataclasses.replace(FULL_INFO, power_limit_enforced_w=175.0))])
        assert len(_rows(store)) == 2
        store.write_snapshots([snapshot(T0 + 201, sample=FULL_SAMPLE)])
        assert _rows(store)[-1] == (T0 + 201, 150.0, 87.0, 2505.0)


def _log(limit_w: list[float]) -> ImportResult:
    n = len(limit_w)
    time_s = T0 + np.arange(n, dtype=np.float64)
    columns = {"power_w": np.full(n, 70.0), "power_limit_w": np.asarray(limit_w, dtype=np.float64)}
    return ImportResult(series={"GPU-log": (time_s, columns)},
                        info={"GPU-log": {"uuid": "GPU-log", "name": "NVIDIA GeForce RTX 4080 Laptop GPU", "index": 0,
                                          "power_limit_enforced_w": limit_w[-1]}}, source="laptop.csv")


def test_an_import_stores_the_log_s_limit_per_row_where_it_has_the_column(tmp_path: Path) -> None:
    nan = float("nan")
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        import_result(store, _log([nan, 80.0, 80.0, nan, 105.0, 150.0, 150.0, 175.0, 175.0]))
        assert [(t - T0, w) for t, w, *_ in _rows(store)] == [(0.0, 80.0), (4.0, 105.0), (5.0, 150.0), (7.0, 175.0)]
        # Importing it again adds nothing.
        import_result(store, _log([nan, 80.0, 80.0, nan, 105.0, 150.0, 150.0, 175.0, 175.0]))
        assert len(_rows(store)) == 4
        frame = load_frame(store, T0, T0 + 9)
        assert frame.gpus[0].power_limit_w is not None
        assert frame.gpus[0].power_limit_w.tolist() == [80.0] * 4 + [105.0] + [150.0] * 2 + [175.0] * 2


def test_an_import_without_the_column_stores_the_log_s_one_limit(tmp_path: Path) -> None:
    result = _log([700.0] * 5)
    del result.series["GPU-log"][1]["power_limit_w"]
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        import_result(store, result)
        assert [(t - T0, w) for t, w, *_ in _rows(store)] == [(0.0, 700.0)]


def test_an_older_log_of_a_recorded_gpu_puts_the_later_limit_back_after_its_span(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0 + 100 + i) for i in range(3)])  # recorded later, at 150 W
        log = _log([80.0, 80.0, 175.0])
        log.series[FULL_INFO.uuid] = log.series.pop("GPU-log")
        log.info[FULL_INFO.uuid] = {**log.info.pop("GPU-log"), "uuid": FULL_INFO.uuid}
        import_result(store, log)
        at = store.limits_at(FULL_INFO.uuid, T0 + np.array([0.0, 2.0, 50.0, 100.0]))
        assert at["power_limit_w"].tolist() == [80.0, 175.0, 150.0, 150.0]


def test_a_log_without_the_column_inside_recorded_history_holds_its_limit_over_its_whole_span(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0 + 100 + i) for i in range(3)])  # recorded later, at 150 W
        log = _log([80.0] * 5)
        del log.series["GPU-log"][1]["power_limit_w"]
        log.series[FULL_INFO.uuid] = log.series.pop("GPU-log")
        log.info[FULL_INFO.uuid] = {**log.info.pop("GPU-log"), "uuid": FULL_INFO.uuid}
        import_result(store, log)
        at = store.limits_at(FULL_INFO.uuid, T0 + np.array([0.0, 4.0, 50.0, 100.0]))
        # The log's one limit over its five rows (not the GPU's stored 150 W), then the recorded 150 W again.
        assert at["power_limit_w"].tolist() == [80.0, 80.0, 150.0, 150.0]


def test_the_power_while_capped_merges_weighted_by_the_capped_seconds() -> None:
    """Minute rows into an hour: 10 s capped at 600 W and 50 s capped at 300 W are 350 W while capped, not 450 W;
    a raw sample's capped power is its own reading, NaN where no power reason was sampled."""
    from desktop.history import rollup_math

    minutes = {"dur_s": np.array([60.0, 60.0]), "capped_s": np.array([10.0, 50.0]),
               "power_capped_w": np.array([600.0, 300.0]), "power_w": np.array([150.0, 260.0])}
    _, hour = rollup_math.aggregate(T0 // 3600 * 3600 + np.array([0.0, 60.0]), minutes, 3600)
    assert hour["capped_s"].tolist() == [60.0] and hour["power_capped_w"].tolist() == [350.0]
    assert hour["power_w"].tolist() == [205.0]  # the row's own mean stays time-weighted
    raw = {name: np.full(3, np.nan) for name in layout.GPU_SCALES}
    raw.update(power_w=np.array([600.0, 70.0, 590.0]), clock_event_reasons=np.array([0x4, 0x1, 0x80]))
    rows = rollup_math.raw_as_rollup(T0 + np.arange(3.0), raw)
    assert rows["capped_s"].tolist() == [1.0, 0.0, 1.0]
    assert rows["power_capped_w"][[0, 2]].tolist() == [600.0, 590.0] and np.isnan(rows["power_capped_w"][1])


def test_a_file_without_the_table_reads_no_stored_limits(tmp_path: Path) -> None:
    """An older schema read where it cannot be migrated (a read-only copy): no stored limits, no error."""
    from desktop.history import limits

    conn = sqlite3.connect(tmp_path / "v10.sqlite")
    schema.migrate(conn, target=10)
    at = limits.limits_at(conn, 1, np.array([T0, T0 + 1]))
    conn.close()
    assert all(np.isnan(v).all() for v in at.values())


def test_a_query_reads_the_limit_in_force_at_each_row_raw_or_merged(tmp_path: Path) -> None:
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([snapshot(T0 + i, info=dataclasses.replace(FULL_INFO, power_limit_enforced_w=80.0))
                               for i in range(10)])
        store.write_snapshots([snapshot(T0 + 10 + i) for i in range(10)])  # 150 W
        raw = store.query(FULL_INFO.uuid, ["power_w", "power_limit_w"], T0, T0 + 20, max_points=0, resolution="raw")
        assert raw.columns["power_limit_w"].tolist() == [80.0] * 10 + [150.0] * 10
        merged = store.query(FULL_INFO.uuid, ["power_limit_w"], T0, T0 + 20, max_points=4)
        assert merged.columns["power_limit_w"].tolist() == [80.0, 80.0, 150.0, 150.0]  # a step, never 115 W
