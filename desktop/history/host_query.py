"""Host rows over a time range: raw host samples, host minute/hour rollups and their not-yet-rolled-up tail."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from desktop.history import blocks, codec, rollup_math
from desktop.history.codec import fetch_columns
from desktop.history.layout import HOST_ROLLUP_METRICS, HOST_SCALES

if TYPE_CHECKING:
    from desktop.history.query import Resolution
    from desktop.history.store_api import StoreApi


def read_host_raw(db: StoreApi, start_s: float, end_s: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    arr = fetch_columns(db.conn, ["ts", *HOST_ROLLUP_METRICS], "host_samples WHERE ts >= ? AND ts < ?",
                        (codec.to_ms(start_s), codec.to_ms(end_s)), "ts", not_null=("ts",))
    time_s = arr[:, 0] / 1000.0
    cols = {m: arr[:, i + 1] / HOST_SCALES[m] for i, m in enumerate(HOST_ROLLUP_METRICS)}
    cols["dur_s"] = rollup_math.row_durations(time_s)
    return time_s, cols


def read_host_rollup(db: StoreApi, table: str, start_s: float,
                     end_s: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Host rollup rows (``host_minute`` / ``host_hour``) in [start_s, end_s), unscaled, with ``dur_s``."""
    names = rollup_math.HOST_ROLLUP_COLUMNS
    arr = blocks.fetch(db, table, ["ts", *names], int(np.floor(start_s)), int(np.ceil(end_s)))
    cols = {("dur_s" if n == "dur_ds" else n): arr[:, i + 1] / rollup_math.host_scale("dur_s" if n == "dur_ds" else n)
            for i, n in enumerate(names)}
    return arr[:, 0].copy(), cols


def host_rows(db: StoreApi, start_s: float, end_s: float,
              resolution: Resolution) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Host columns at ``resolution``; rollup rows end in buckets aggregated from raw rows now."""
    if resolution == "raw":
        return read_host_raw(db, start_s, end_s)
    table = "host_minute" if resolution == "minute" else "host_hour"
    bucket_s = 60 if resolution == "minute" else 3600
    start_s = float(np.floor(start_s / bucket_s) * bucket_s)
    time_s, cols = read_host_rollup(db, table, start_s, end_s)
    until = float(db.meta("rollup_minute_until") or "-inf")
    tail_start = max(start_s, until, float(time_s[-1]) + bucket_s if len(time_s) else start_s)
    if tail_start < end_s:
        rt, raw = read_host_raw(db, tail_start, end_s)
        if len(rt):
            bt, bc = rollup_math.aggregate(rt, raw, bucket_s)
            time_s = np.concatenate([time_s, bt])
            cols = {k: np.concatenate([v, bc[k]]) for k, v in cols.items()}
    return time_s, cols
