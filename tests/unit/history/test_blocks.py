"""Day blocks: whatever range is read, blocks give exactly the rows the tables hold — after late
writes, retention and with blocks that cannot serve a read — and frames are the same without them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from desktop.config import RetentionSettings
from desktop.history import blocks, bulk
from desktop.history.codec import fetch_columns
from desktop.history.frames import load_frame
from desktop.history.rollup import apply_retention, run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuProcess, HostSample
from tests.unit.history.helpers import BARE_INFO, FULL_INFO, snapshot

DAY = 86400.0
T0 = 1_790_035_200.0  # 2026-09-22 00:00 UTC
assert T0 % DAY == 0
END = T0 + 3.5 * DAY  # three whole days and half of a fourth


def _fill(store: HistoryStore, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    for info, step in ((FULL_INFO, 20.0), (BARE_INFO, 30.0)):
        t = np.arange(T0 + 7.0, END, step)
        util = rng.choice([0.0, 40.0, 100.0, np.nan], len(t))
        power = np.round(rng.uniform(10, 150, len(t)), 1)
        bulk.write_gpu_columns(store, info, t, {
            "utilization_gpu_pct": util, "power_w": power, "energy_mj": 1e6 + np.cumsum(power * step * 1000),
            "vram_used_mib": np.round(rng.uniform(0, 16000, len(t)), 1),
            "clock_event_reasons": rng.choice([0, 4, 0x40], len(t)).astype(np.float64)})
    ht = np.arange(T0, END, 60.0)
    bulk.write_host_samples(store, [(float(t), HostSample(cpu_pct=float(rng.uniform(0, 100)), ram_used_mib=8000.0,
                                                          on_ac_power=bool(rng.random() < 0.8))) for t in ht])
    procs = []
    for t in np.arange(T0 + 3.0, END, 300.0):
        for pid, name in ((11, "train.py"), (12, "python")):
            if rng.random() < 0.7:
                vram = None if rng.random() < 0.1 else float(np.round(rng.uniform(100, 9000), 1))
                procs.append((float(t), FULL_INFO.uuid, GpuProcess(pid=pid, gpu_index=0, name=name, vram_mib=vram,
                                                                   user="alice" if pid == 11 else None)))
    bulk.write_process_samples(store, procs)
    run_rollups(store, END)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    with HistoryStore.open(tmp_path / "h.sqlite") as opened:
        _fill(opened)
        yield opened


def _sources(store: HistoryStore) -> list[tuple[str, int, list[str], int]]:
    """(table, gpu id, every column, ts units per second) of each packed series."""
    out = []
    for table, source in blocks.SOURCES.items():
        columns = blocks._table_columns(store, source)
        for gid in (list(store.gpu_uuid_of_id()) if source.per_gpu else [0]):
            out.append((table, gid, columns, source.ts_per_s))
    return out


def _from_rows(store: HistoryStore, table: str, gid: int, columns: list[str], span: tuple[int, int]) -> np.ndarray:
    lo, hi = span
    source = blocks.SOURCES[table]
    return fetch_columns(store.conn, columns, blocks._where(source), blocks._params(source, gid, lo, hi),
                         source.order_by, not_null=("ts",))


def _assert_same_everywhere(store: HistoryStore, seed: int = 0, ranges: int = 12) -> None:
    rng = np.random.default_rng(seed)
    edges = [T0 - DAY, T0, T0 + DAY, T0 + 1.5 * DAY, T0 + 3 * DAY, END, END + DAY]
    for table, gid, columns, per_s in _sources(store):
        pairs = [(a, b) for a in edges for b in edges if a < b]
        pairs += [tuple(sorted(rng.uniform(T0 - 0.2 * DAY, END + 0.2 * DAY, 2))) for _ in range(ranges)]
        for start, end in pairs:
            lo, hi = int(start * per_s), int(end * per_s)
            for cols in (columns, columns[:1] + columns[-2:]):
                got = blocks.fetch(store, table, cols, lo, hi, gpu_id=gid)
                np.testing.assert_array_equal(got, _from_rows(store, table, gid, cols, (lo, hi)),
                                              err_msg=f"{table} gpu {gid} [{start}, {end})")


def _block_days(store: HistoryStore) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for day, source in store.conn.execute("SELECT day, source FROM day_blocks ORDER BY day, source, gpu"):
        out.setdefault(source, []).append(day - int(T0 // DAY))
    return out


def test_whole_days_are_packed_and_read_back_exactly(store: HistoryStore) -> None:
    # three whole days packed (the fourth is still going), per GPU for minutes, once for host and processes
    assert _block_days(store) == {"gpu_minute": [0, 0, 1, 1, 2, 2], "host_minute": [0, 1, 2],
                                  "process_samples": [0, 1, 2]}
    assert float(store.meta(blocks.MARKER) or 0) == T0 + 3 * DAY
    _assert_same_everywhere(store)


def test_a_late_write_into_a_packed_day_drops_its_blocks_until_packed_again(store: HistoryStore) -> None:
    late = T0 + DAY + 1234.0
    proc = GpuProcess(pid=99, gpu_index=0, name="late.py", vram_mib=512.0)
    store.write_snapshots([snapshot(late, processes=(proc,))])
    assert _block_days(store) == {"gpu_minute": [0, 0], "host_minute": [0], "process_samples": [0]}
    assert float(store.meta(blocks.MARKER) or 0) == T0 + DAY
    _assert_same_everywhere(store, seed=1, ranges=10)  # the late row is read from its table
    run_rollups(store, END)
    assert _block_days(store)["process_samples"] == [0, 1, 2]
    _assert_same_everywhere(store, seed=2)
    day1 = blocks.fetch(store, "process_samples", ["ts", "pid"], int((T0 + DAY) * 1000), int((T0 + 2 * DAY) * 1000))
    assert 99 in day1[:, 1]  # and the new block holds it


def test_bulk_process_rows_into_a_packed_day_drop_its_blocks(store: HistoryStore) -> None:
    proc = GpuProcess(pid=77, gpu_index=0, name="old.py", vram_mib=64.0)
    bulk.write_process_samples(store, [(T0 + 2 * DAY + 5.0, FULL_INFO.uuid, proc)])
    assert _block_days(store)["process_samples"] == [0, 1]
    _assert_same_everywhere(store, seed=3, ranges=5)


def test_retention_cutting_inside_a_day_repacks_that_day(store: HistoryStore) -> None:
    now = T0 + 15.5 * DAY  # raw rows older than now - 14 days go: the cut is 1.5 days after T0
    apply_retention(store, RetentionSettings(raw_days=14, minute_days=15, hour_days=0), now)
    days = _block_days(store)
    assert days["process_samples"] == [1, 2]  # day 0 gone, day 1 repacked from its second half
    assert days["gpu_minute"] == [0, 0, 1, 1, 2, 2]  # the minute cut is at T0 + 0.5 days: day 0 repacked
    _assert_same_everywhere(store, seed=4)
    first = blocks.fetch(store, "process_samples", ["ts"], 0, int(END * 1000))
    assert first[0, 0] >= (T0 + 1.5 * DAY) * 1000
    gid = store.gpu_id(FULL_INFO.uuid) or 0
    assert blocks.fetch(store, "gpu_minute", ["ts"], 0, int(END), gpu_id=gid)[0, 0] >= T0 + 0.5 * DAY


def test_blocks_that_cannot_serve_a_read_fall_back_to_rows(store: HistoryStore) -> None:
    store.conn.execute("UPDATE day_blocks SET columns = 'ts,pid' WHERE source = 'process_samples' AND day = ?",
                       (int(T0 // DAY) + 1,))
    _assert_same_everywhere(store, seed=5, ranges=5)
    assert blocks.encode(np.array([[1.0, 2.0**60]])) is None  # beyond float64's exact integers: not packed
    assert blocks.encode(np.array([[1.0, np.inf]])) is None


def test_frames_are_the_same_with_and_without_blocks(store: HistoryStore) -> None:
    for start, end in ((T0, T0 + 3 * DAY), (T0 + 0.3 * DAY, END), (T0 + DAY, T0 + 1.5 * DAY)):
        packed = load_frame(store, start, end)
        store.conn.execute("SAVEPOINT unpacked")
        store.conn.execute("DELETE FROM day_blocks")
        unpacked = load_frame(store, start, end)
        store.conn.execute("ROLLBACK TO unpacked")
        store.conn.execute("RELEASE unpacked")
        assert len(packed.gpus) == 2 and packed.processes is not None and packed.host is not None
        _assert_equal(packed, unpacked)


def _assert_equal(a: object, b: object) -> None:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            _assert_equal(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _assert_equal(a[key], b[key])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_equal(x, y)
    else:
        assert a == b
