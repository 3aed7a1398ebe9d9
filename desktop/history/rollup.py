"""Minute and hour rollups of the raw samples, and retention (how long each resolution is kept).

``run_rollups`` is incremental: the meta keys ``rollup_minute_until`` / ``rollup_hour_until``
mark how far each table is complete; a late write before a mark moves it back (every writer
calls ``note_written``), so buffered or imported samples are rolled up too. Finished
days are then packed into day blocks (``blocks``), and retention drops or repacks them.
Retention never deletes raw rows that are not rolled up yet; events are kept as long as minute rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from desktop.config import RetentionSettings
from desktop.history import blocks, codec, rollup_math
from desktop.history.host_query import read_host_raw, read_host_rollup
from desktop.history.query import read_raw, read_rollup
from desktop.history.store_api import StoreApi
from desktop.telemetry.model import GPU_METRIC_NAMES

_CHUNK_S = 86400.0
_DAY_S = 86400.0


def note_written(db: StoreApi, earliest_s: float) -> None:
    """Rows at ``earliest_s`` arrived: rollups and day blocks already past it must be recomputed from there."""
    for key, bucket_s in (("rollup_minute_until", 60), ("rollup_hour_until", 3600)):
        until = db.meta(key)
        if until is not None and earliest_s < float(until):
            db.set_meta(key, repr(float(earliest_s // bucket_s * bucket_s)))
    blocks.invalidate(db, earliest_s)


def _insert(store: StoreApi, table: str, gpu_id: int | None, bucket_ts: np.ndarray,
            cols: dict[str, np.ndarray]) -> None:
    if len(bucket_ts) == 0:
        return
    names = list(cols)
    key = ["gpu", "ts"] if gpu_id is not None else ["ts"]
    lists = [codec.int_column(cols[n], 1) for n in names]
    ts = bucket_ts.astype(np.int64).tolist()
    rows = zip(*([[gpu_id] * len(ts)] if gpu_id is not None else []), ts, *lists, strict=True)
    sql = (f"INSERT OR REPLACE INTO {table} ({', '.join(key + names)}) "
           f"VALUES ({', '.join('?' * (len(key) + len(names)))})")
    store.conn.executemany(sql, rows)


def _host_table_cols(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {("dur_ds" if n == "dur_s" else n): v * rollup_math.host_scale(n) for n, v in cols.items()
            if n == "dur_s" or n in rollup_math.HOST_ROLLUP_COLUMNS}


def _oldest_raw_s(store: StoreApi) -> float | None:
    lows = []
    for gid in store.gpu_uuid_of_id():
        row = store.conn.execute("SELECT min(ts) FROM gpu_samples WHERE gpu = ?", (gid,)).fetchone()
        if row[0] is not None:
            lows.append(row[0] / 1000.0)
    row = store.conn.execute("SELECT min(ts) FROM host_samples").fetchone()
    if row[0] is not None:
        lows.append(row[0] / 1000.0)
    return min(lows) if lows else None


def _next_raw_s(store: StoreApi, from_s: float) -> float | None:
    """The first raw sample time at or after ``from_s`` (GPU or host), or None."""
    ms = codec.to_ms(from_s)
    lows = [row[0] for gid in store.gpu_uuid_of_id() if (row := store.conn.execute(
        "SELECT min(ts) FROM gpu_samples WHERE gpu = ? AND ts >= ?", (gid, ms)).fetchone())[0] is not None]
    host = store.conn.execute("SELECT min(ts) FROM host_samples WHERE ts >= ?", (ms,)).fetchone()[0]
    if host is not None:
        lows.append(host)
    return min(lows) / 1000.0 if lows else None


def _oldest_minute_s(store: StoreApi) -> float | None:
    row = store.conn.execute("SELECT min(ts) FROM gpu_minute").fetchone()
    return None if row[0] is None else float(row[0])


def _next_minute_s(store: StoreApi, from_s: float) -> float | None:
    lows = [row[0] for gid in store.gpu_uuid_of_id() if (row := store.conn.execute(
        "SELECT min(ts) FROM gpu_minute WHERE gpu = ? AND ts >= ?", (gid, int(from_s))).fetchone())[0] is not None]
    host = store.conn.execute("SELECT min(ts) FROM host_minute WHERE ts >= ?", (int(from_s),)).fetchone()[0]
    if host is not None:
        lows.append(host)
    return float(min(lows)) if lows else None


def _roll_minutes(store: StoreApi, start_s: float, end_s: float, busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
    for gid in store.gpu_uuid_of_id():
        time_s, raw = read_raw(store, gid, start_s, end_s)
        bt, bc = rollup_math.aggregate(time_s, rollup_math.raw_as_rollup(time_s, raw, busy_util_pct=busy_util_pct),
                                       60)
        _insert(store, "gpu_minute", gid, bt, rollup_math.to_table(bc))
    time_s, host = read_host_raw(store, start_s, end_s)
    bt, bc = rollup_math.aggregate(time_s, host, 60)
    _insert(store, "host_minute", None, bt, _host_table_cols(bc))


def _roll_hours(store: StoreApi, start_s: float, end_s: float) -> None:
    for gid in store.gpu_uuid_of_id():
        time_s, cols = read_rollup(store, "gpu_minute", gid, start_s, end_s)
        bt, bc = rollup_math.aggregate(time_s, cols, 3600)
        _insert(store, "gpu_hour", gid, bt, rollup_math.to_table(bc))
    time_s, host = read_host_rollup(store, "host_minute", start_s, end_s)
    bt, bc = rollup_math.aggregate(time_s, host, 3600)
    _insert(store, "host_hour", None, bt, _host_table_cols(bc))


def roll_arrays(store: StoreApi, gpu_id: int, time_s: np.ndarray, raw: dict[str, np.ndarray], *,
                busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
    """Minute rollups straight from raw columns in memory (demo history: no need to read them back)."""
    full = {m: raw.get(m, np.full(len(time_s), np.nan)) for m in GPU_METRIC_NAMES}
    bt, bc = rollup_math.aggregate(time_s, rollup_math.raw_as_rollup(time_s, full, busy_util_pct=busy_util_pct), 60)
    with store.transaction():
        _insert(store, "gpu_minute", gpu_id, bt, rollup_math.to_table(bc))


def roll_host_arrays(store: StoreApi, time_s: np.ndarray, host: dict[str, np.ndarray]) -> None:
    cols = dict(host)
    cols["dur_s"] = rollup_math.row_durations(time_s)
    bt, bc = rollup_math.aggregate(time_s, cols, 60)
    with store.transaction():
        _insert(store, "host_minute", None, bt, _host_table_cols(bc))


def run_rollups(store: StoreApi, now_s: float, *, busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
    """Bring the minute and hour tables up to the last complete minute / hour before ``now_s``.

    ``busy_util_pct``: the busy threshold (``[advisor] busy_util_pct``) the minutes' busy seconds count above."""
    store.gpus()  # refresh the GPU id cache (another connection may have added GPUs)
    minute_end = math.floor(now_s / 60) * 60.0
    _catch_up(store, "rollup_minute_until", minute_end, period_s=60.0, chunk_s=_CHUNK_S, oldest=_oldest_raw_s,
              next_at=_next_raw_s, roll=lambda db, start, end: _roll_minutes(db, start, end, busy_util_pct))
    minute_until = float(store.meta("rollup_minute_until") or minute_end)
    hour_end = math.floor(minute_until / 3600) * 3600.0
    _catch_up(store, "rollup_hour_until", hour_end, period_s=3600.0, chunk_s=7 * _CHUNK_S, oldest=_oldest_minute_s,
              next_at=_next_minute_s, roll=_roll_hours)
    blocks.build(store, minute_until)


def _catch_up(store: StoreApi, marker: str, end_s: float, *, period_s: float, chunk_s: float,
              oldest: Callable[[StoreApi], float | None],
              next_at: Callable[[StoreApi, float], float | None],
              roll: Callable[[StoreApi, float, float], None]) -> None:
    """Roll ``[marker, end_s)`` up in chunks, each chunk and its marker in one transaction.

    A crash leaves the marker at the last complete chunk; stretches without source rows
    (days the machine was off) are skipped rather than rolled up empty.
    """
    expected = store.meta(marker)  # the marker as this pass last read or wrote it
    if expected is None:
        first = oldest(store)
        start = end_s if first is None else math.floor(first / period_s) * period_s
    else:
        start = float(expected)
    while start < end_s:
        following = next_at(store, start)
        if following is None or following >= end_s:
            break
        start = max(start, math.floor(following / period_s) * period_s)  # skip stretches without samples
        stop = min(end_s, start + chunk_s)
        with store.transaction():
            # Another connection (an import, a job, the window beside `record`) may have written rows
            # before ``start`` and moved the marker back since this pass read it: redo from there, or
            # those rows would never be rolled up (and retention would later delete them unrolled).
            current = store.meta(marker)
            if current != expected and current is not None and (expected is None or float(current) < float(expected)):
                expected, start = current, float(current)
                continue
            roll(store, start, stop)
            expected = repr(stop)
            store.set_meta(marker, expected)
        start = stop
    with store.transaction():  # no source rows left before end_s: the marker jumps, unless moved meanwhile
        current = store.meta(marker)
        if current == expected and float(current or "-inf") < end_s:
            store.set_meta(marker, repr(end_s))


def apply_retention(store: StoreApi, retention: RetentionSettings, now_s: float) -> dict[str, int]:
    """Delete rows older than the retention allows (never raw rows not yet rolled up); rows deleted per table."""
    minute_until = float(store.meta("rollup_minute_until") or "-inf")
    hour_until = float(store.meta("rollup_hour_until") or "-inf")
    raw_cut = min(now_s - retention.raw_days * _DAY_S, minute_until)
    minute_cut = min(now_s - retention.minute_days * _DAY_S, hour_until)
    deleted: dict[str, int] = {}
    gids = list(store.gpu_uuid_of_id())
    with store.transaction():
        if math.isfinite(raw_cut):
            ms = codec.to_ms(raw_cut)
            deleted["gpu_samples"] = sum(
                store.conn.execute("DELETE FROM gpu_samples WHERE gpu = ? AND ts < ?", (g, ms)).rowcount for g in gids)
            for g in gids:  # the counted seconds of those samples (schema v10's side rows)
                store.conn.execute("DELETE FROM gpu_counters WHERE gpu = ? AND ts < ?", (g, ms))
            deleted["host_samples"] = store.conn.execute("DELETE FROM host_samples WHERE ts < ?", (ms,)).rowcount
            deleted["process_samples"] = store.conn.execute("DELETE FROM process_samples WHERE ts < ?",
                                                            (ms,)).rowcount
            if deleted["process_samples"]:
                blocks.trim(store, ("process_samples",), ms / 1000.0)
        if math.isfinite(minute_cut):
            cut = int(minute_cut)
            deleted["gpu_minute"] = sum(
                store.conn.execute("DELETE FROM gpu_minute WHERE gpu = ? AND ts < ?", (g, cut)).rowcount for g in gids)
            deleted["host_minute"] = store.conn.execute("DELETE FROM host_minute WHERE ts < ?", (cut,)).rowcount
            # Events go with the minute rows they explain (a year by default).
            deleted["events"] = store.conn.execute("DELETE FROM events WHERE ts < ?", (minute_cut,)).rowcount
            if deleted["gpu_minute"] or deleted["host_minute"]:
                blocks.trim(store, ("gpu_minute", "host_minute"), cut)
        if retention.hour_days > 0:
            cut = int(now_s - retention.hour_days * _DAY_S)
            deleted["gpu_hour"] = sum(
                store.conn.execute("DELETE FROM gpu_hour WHERE gpu = ? AND ts < ?", (g, cut)).rowcount for g in gids)
            deleted["host_hour"] = store.conn.execute("DELETE FROM host_hour WHERE ts < ?", (cut,)).rowcount
    if sum(deleted.values()):
        store.conn.execute("PRAGMA incremental_vacuum").fetchall()
    return deleted


def maintain(store: StoreApi, retention: RetentionSettings, now_s: float, *,
             busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> None:
    """What the recorder runs periodically: rollups first, then retention."""
    run_rollups(store, now_s, busy_util_pct=busy_util_pct)
    apply_retention(store, retention, now_s)
