"""HistoryStore: round trips of every field, events from state changes, files, corruption, queries."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.frame import StressResult
from desktop.errors import UserError
from desktop.history import bulk, codec, packing
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GPU_METRIC_NAMES, DeviceState
from tests.unit.history.helpers import (
    BARE_INFO,
    BARE_PROCESS,
    EMPTY_HOST,
    EMPTY_SAMPLE,
    FULL_HOST,
    FULL_INFO,
    FULL_PROCESS,
    FULL_SAMPLE,
    snapshot,
)

T0 = 1_790_000_000.0


@pytest.fixture
def store(tmp_path: Path):
    with HistoryStore.open(tmp_path / "data" / "history.sqlite") as opened:
        yield opened


def _samples(store: HistoryStore, uuid: str):
    gid = store.gpu_id(uuid)
    assert gid is not None
    ts, stored = packing.read_columns(store.conn, gid, -2**62, 2**62, GPU_METRIC_NAMES)
    return [(float(t) / 1000.0, codec.gpu_sample_from_row([None if np.isnan(v := stored[m][i]) else int(v)
                                                           for m in GPU_METRIC_NAMES]))
            for i, t in enumerate(ts)]


def test_every_field_round_trips_including_none(store: HistoryStore) -> None:
    procs = (FULL_PROCESS, dataclasses.replace(BARE_PROCESS, gpu_index=0))
    store.write_snapshots([
        snapshot(T0, processes=procs),
        snapshot(T0 + 1.5, sample=EMPTY_SAMPLE, host=EMPTY_HOST),
        snapshot(T0 + 2, info=BARE_INFO, sample=FULL_SAMPLE),
    ])
    assert _samples(store, FULL_INFO.uuid) == [(T0, FULL_SAMPLE), (T0 + 1.5, EMPTY_SAMPLE)]
    assert _samples(store, BARE_INFO.uuid) == [(T0 + 2, FULL_SAMPLE)]
    hosts = store.conn.execute(f"SELECT ts, {codec.HOST_COLUMNS} FROM host_samples ORDER BY ts").fetchall()
    assert [codec.host_sample_from_row(r[1:]) for r in hosts] == [FULL_HOST, EMPTY_HOST, FULL_HOST]
    assert {i.uuid: i for i in store.gpus()} == {FULL_INFO.uuid: FULL_INFO, BARE_INFO.uuid: BARE_INFO}
    strings = store.string_table()
    rows = store.conn.execute("SELECT pid, name_id, user_id, vram_mib, kind, cpu_pct, started_ms, own "
                              "FROM process_samples ORDER BY pid").fetchall()
    assert [(r[0], strings[r[1]], strings.get(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows] == [
        (7, "python", None, None, 0, None, None, 0),
        (4242, "train.py", "alice", 90005, 2, 975, 1_700_000_000_250, 1),
    ]


def test_gpu_info_changes_emit_driver_vbios_and_state_events(store: HistoryStore) -> None:
    updated = dataclasses.replace(FULL_INFO, driver_version="555.42.02", vbios_version="95.03.1A.00.02")
    store.write_snapshots([snapshot(T0), snapshot(T0 + 1, state=DeviceState.LOST, detail="fell off the bus")])
    store.write_snapshots([snapshot(T0 + 2, info=updated)])
    events = [(e.time_s, e.kind, e.gpu_uuid, e.detail) for e in store.events(0, T0 + 10)]
    assert events == [
        (T0, "throttle_start", FULL_INFO.uuid, "Power cap, HW thermal"),
        (T0 + 1, "gpu_lost", FULL_INFO.uuid, "fell off the bus"),
        (T0 + 2, "driver_change", FULL_INFO.uuid, "550.54.14 -> 555.42.02"),
        (T0 + 2, "vbios_change", FULL_INFO.uuid, "95.03.1A.00.01 -> 95.03.1A.00.02"),
        (T0 + 2, "gpu_back", FULL_INFO.uuid, ""),
    ]
    assert store.gpus()[0] == updated
    idle = dataclasses.replace(FULL_SAMPLE, clock_event_reasons=0x1)
    power = dataclasses.replace(FULL_SAMPLE, clock_event_reasons=0x4)
    # a flicker shorter than 30 s stays one episode; 30 s without a reason ends it, stamped when it stopped
    store.write_snapshots([snapshot(T0 + 3, sample=idle), snapshot(T0 + 10, sample=power),
                           snapshot(T0 + 12, sample=idle), snapshot(T0 + 30, sample=idle)])
    assert store.events(T0 + 3, T0 + 100, kinds=["throttle_end", "throttle_start"]) == []
    store.write_snapshots([snapshot(T0 + 42, sample=idle)])
    ends = store.events(T0 + 3, T0 + 100, kinds=["throttle_end"])
    assert [(e.time_s, e.detail) for e in ends] == [(T0 + 12, "Power cap, HW thermal")]


def test_a_rolled_back_batch_leaves_no_calm_stretch_behind(store: HistoryStore) -> None:
    """An episode's calm stretch counts only stored samples: one begun in a rolled-back batch is forgotten."""
    idle = dataclasses.replace(FULL_SAMPLE, clock_event_reasons=0x1)
    store.write_snapshots([snapshot(T0)])  # a throttle episode opens
    with pytest.raises(RuntimeError, match="roll back"), store.transaction():
        store.write_snapshots_in_transaction([snapshot(T0 + 1, sample=idle)])
        raise RuntimeError("roll back")
    store.write_snapshots([snapshot(T0 + 20, sample=idle), snapshot(T0 + 40, sample=idle)])
    assert store.events(T0 + 1, T0 + 100, kinds=["throttle_end"]) == []  # calm since T0 + 20: 20 s so far
    store.write_snapshots([snapshot(T0 + 50, sample=idle)])
    assert [e.time_s for e in store.events(T0 + 1, T0 + 100, kinds=["throttle_end"])] == [T0 + 20]


def test_state_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0, state=DeviceState.LOST)])
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0 + 1, state=DeviceState.LOST)])
        assert [e.kind for e in store.events(0, T0 + 5)] == ["gpu_lost"]


def test_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "h.sqlite"
    HistoryStore.open(path).close()
    if sys.platform != "win32":
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with HistoryStore.open(path) as store:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


# A file that is not SQLite at all is not ours to move (issue 12): tests/unit/history/test_dbfile_safety.py.
@pytest.mark.parametrize("garbage", [b"SQLite format 3\0" + b"\xff" * 8000,
                                     b"SQLite format 3\0" + b"\x10\x00" + b"\xff" * 8000])
def test_corrupt_file_is_moved_aside_and_a_fresh_one_started(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(garbage)
    with HistoryStore.open(path) as store:
        assert store.recovered_from is not None
        assert store.recovered_from.name.startswith("h.sqlite.corrupt-")
        assert store.recovered_from.read_bytes() == garbage  # kept, byte for byte
        store.write_snapshots([snapshot(T0)])
        assert store.counts()["gpu_samples"] == 1
    with HistoryStore.open(path) as again:
        assert again.recovered_from is None


def test_damaged_pages_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with HistoryStore.open(path) as store:
        store.write_snapshots([snapshot(T0 + i) for i in range(3000)])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(3 * page, len(data) - page, 7 * page):  # scribble over interior pages
        data[offset + 100: offset + 400] = os.urandom(300)
    path.write_bytes(bytes(data))
    with HistoryStore.open(path, verify=True) as store:
        assert store.recovered_from is not None
        assert store.counts()["gpu_samples"] == 0


def test_an_impossible_location_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(UserError, match="cannot create the history database"):
        HistoryStore.open(blocker / "h.sqlite")


def test_readonly_open_of_a_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no history database"):
        HistoryStore.open(tmp_path / "none.sqlite", readonly=True)


def test_readonly_store_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    HistoryStore.open(path).close()
    with HistoryStore.open(path, readonly=True) as store, pytest.raises(sqlite3.OperationalError):
        store.write_snapshots([snapshot(T0)])


def test_a_failed_batch_leaves_no_half_written_gpu(store: HistoryStore) -> None:
    bad = snapshot(T0)
    with pytest.raises(AttributeError):
        store.write_snapshots([bad, "not a snapshot"])  # type: ignore[list-item]
    assert store.counts()["gpus"] == 0 and store.gpus() == []
    store.write_snapshots([bad])
    assert store.counts()["gpu_samples"] == 1


def test_stress_runs_round_trip(store: HistoryStore) -> None:
    result = StressResult(run_id=99, started_s=T0, ended_s=T0 + 600, gpu_uuid="GPU-full", gpu_name="Test GPU",
                          workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=80.5,
                          sustained_throughput=70.25, throttled=True, errors=0, driver_version=None,
                          summary="throttled after 3 min", device="cuda:0")
    first = store.add_stress_run(result, extra_json='{"guard_c": 92}')
    second = store.add_stress_run(dataclasses.replace(result, started_s=T0 + 3600, workload="bandwidth"))
    assert second != first
    assert store.stress_runs()[1] == dataclasses.replace(result, run_id=first)
    assert [r.run_id for r in store.stress_runs()] == [second, first]
    assert [r.run_id for r in store.stress_runs(workload="gemm")] == [first]
    assert store.stress_runs(gpu_uuid="GPU-other") == []
    times = np.arange(5, dtype=np.float64)
    columns = {"throughput": np.array([1.0, 2.0, np.nan, 4.0, 5.0]), "clock_event_reasons": np.full(5, 68.0)}
    store.add_stress_points(first, times, columns)
    got_t, got = store.stress_points(first)
    np.testing.assert_array_equal(got_t, times)
    assert set(got) == set(columns)
    np.testing.assert_array_equal(got["throughput"], columns["throughput"])
    assert store.stress_run_extra(first) == '{"guard_c": 92}'
    assert store.stress_points(second)[0].size == 0
    with pytest.raises(ValueError, match="points"):
        store.add_stress_points(first, times, {"short": np.zeros(2)})


def test_query_picks_raw_for_short_spans_and_rollups_for_long_ones(store: HistoryStore) -> None:
    from desktop.history.rollup import run_rollups

    t = T0 + np.arange(0, 3 * 86400, 10.0)
    temp = 40 + 20 * np.sin(t / 3600.0)
    bulk.write_gpu_columns(store, FULL_INFO, t, {"temperature_c": np.round(temp, 1), "power_w": np.full(len(t), 100.0)})
    run_rollups(store, float(t[-1]) + 3600)
    short = store.query(FULL_INFO.uuid, ["temperature_c"], T0, T0 + 3600, max_points=2000)
    assert short.resolution == "raw" and len(short) == 360
    np.testing.assert_allclose(short.columns["temperature_c"], np.round(temp[:360], 1))
    week = store.query(FULL_INFO.uuid, ["temperature_c", "temperature_c_max", "power_w"], T0, T0 + 3 * 86400,
                       max_points=500)
    assert week.resolution in ("minute", "hour") and 0 < len(week) <= 500
    assert float(np.nanmax(week.columns["temperature_c_max"])) == pytest.approx(float(np.max(np.round(temp, 1))))
    assert float(np.nanmean(week.columns["power_w"])) == pytest.approx(100.0)
    # The time-weighted mean over the whole range is kept through the buckets.
    weights = week.duration_s
    assert np.nansum(week.columns["temperature_c"] * weights) / np.nansum(weights) == pytest.approx(
        float(np.mean(np.round(temp, 1))), abs=0.05)
    forced = store.query(FULL_INFO.uuid, ["temperature_c"], T0, T0 + 3600, max_points=0, resolution="minute")
    assert forced.resolution == "minute" and len(forced) == 61  # the minute the range starts in, and 60 more
    with pytest.raises(ValueError, match="unknown metric"):
        store.query(FULL_INFO.uuid, ["watts"], T0, T0 + 1)
    empty = store.query("GPU-nobody", ["power_w"], T0, T0 + 1)
    assert len(empty) == 0 and empty.columns["power_w"].size == 0


def test_time_range(store: HistoryStore) -> None:
    assert store.time_range() is None
    store.write_snapshots([snapshot(T0), snapshot(T0 + 10)])
    assert store.time_range() == (T0, T0 + 10)


def test_bulk_write_ignores_rows_already_stored(store: HistoryStore) -> None:
    t = T0 + np.arange(100, dtype=np.float64)
    assert bulk.write_gpu_columns(store, FULL_INFO, t, {"power_w": np.full(100, 50.0)}, chunk_rows=30) == 100
    assert bulk.write_gpu_columns(store, FULL_INFO, t, {"power_w": np.full(100, 60.0)}) == 0
    with pytest.raises(ValueError, match="unknown GPU columns"):
        bulk.write_gpu_columns(store, FULL_INFO, t, {"watts": t})


def test_a_gpu_falling_asleep_and_waking_is_no_lost_or_back_event(store: HistoryStore) -> None:
    store.write_snapshots([snapshot(T0, sample=EMPTY_SAMPLE),
                           snapshot(T0 + 1, state=DeviceState.ASLEEP, detail="asleep"),
                           snapshot(T0 + 2, sample=EMPTY_SAMPLE)])
    assert [e.kind for e in store.events(0, T0 + 5)] == []
    assert [t for t, _ in _samples(store, FULL_INFO.uuid)] == [T0, T0 + 2]  # no row while it slept
    store.write_snapshots([snapshot(T0 + 3, state=DeviceState.ASLEEP), snapshot(T0 + 4, state=DeviceState.LOST),
                           snapshot(T0 + 5, state=DeviceState.ASLEEP)])
    assert [e.kind for e in store.events(0, T0 + 10)] == ["gpu_lost", "gpu_back"]
