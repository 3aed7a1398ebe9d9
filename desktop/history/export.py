"""Raw samples of a time range as CSV or JSON lines (what `rigscope export` writes), each with the power limit in
force then (``power_limit_w``, the history's stored changes: a laptop's moves with its firmware mode)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from desktop.csvsafe import CsvWriter
from desktop.telemetry.model import GPU_METRIC_NAMES

#: The columns of a sample: the GpuSample metrics, then the power limit in force (W).
EXPORT_METRICS = (*GPU_METRIC_NAMES, "power_limit_w")


def _export_rows(store: Any, start_s: float, end_s: float) -> Iterator[dict[str, Any]]:
    """Raw samples of every GPU, a day at a time, each GPU's rows in time order."""
    from desktop.history.limits import limits_at
    from desktop.history.query import read_raw

    infos = [(info, store.gpu_id(info.uuid)) for info in store.gpus()]
    day = 86400.0
    t = start_s
    while t < end_s:
        # Jump to the next day that holds a sample: `--from -1000000d` or a stray sample from
        # year 9999 must not make the export walk millions of empty days.
        t = max(t, _next_sample_s(store, [gid for _, gid in infos], t) or end_s)
        stop = min(end_s, t + day)
        for info, gid in infos:
            time_s, cols = read_raw(store, gid, t, stop)
            cols = {**cols, "power_limit_w": limits_at(store.conn, gid, time_s)["power_limit_w"]}
            for i in range(len(time_s)):
                row: dict[str, Any] = {
                    "time": datetime.fromtimestamp(float(time_s[i]), UTC).isoformat(timespec="milliseconds"),
                    "time_s": round(float(time_s[i]), 3),
                    "gpu_index": info.index, "gpu_uuid": info.uuid, "gpu_name": info.name,
                }
                for m in EXPORT_METRICS:
                    v = float(cols[m][i])
                    row[m] = None if math.isnan(v) else (int(v) if v.is_integer() else round(v, 3))
                yield row
        t = stop


def _next_sample_s(store: Any, gpu_ids: list[int], from_s: float) -> float | None:
    """The first raw sample time at or after ``from_s`` over ``gpu_ids`` (one index lookup each)."""
    from desktop.history import codec

    found = [row[0] for gid in gpu_ids for row in store.conn.execute(
        "SELECT min(ts) FROM gpu_samples WHERE gpu = ? AND ts >= ?", (gid, codec.to_ms(from_s))) if row[0] is not None]
    return min(found) / 1000.0 if found else None


def raw_time_range(store: Any) -> tuple[float, float] | None:
    """(first, last) raw GPU sample time, what an export can write; None when there is none.

    ``store.time_range()`` spans the minute and hour aggregates too, which outlive the raw rows."""
    from desktop.history import codec

    lows: list[float] = []
    highs: list[float] = []
    for info in store.gpus():
        bounds = codec.ts_bounds(store.conn, "gpu_samples", store.gpu_id(info.uuid))
        if bounds is not None:
            lo, hi = bounds
            lows.append(lo / 1000.0)
            highs.append(hi / 1000.0)
    return (min(lows), max(highs)) if lows else None


def write_export(store: Any, start_s: float, end_s: float, fmt: str, out: TextIO) -> int:
    """Write samples in [start_s, end_s) as ``csv`` or ``jsonl``; returns the number of rows."""
    count = 0
    if fmt == "jsonl":
        for row in _export_rows(store, start_s, end_s):
            out.write(json.dumps(row) + "\n")
            count += 1
        return count
    fields = ["time", "time_s", "gpu_index", "gpu_uuid", "gpu_name", *EXPORT_METRICS]
    writer = CsvWriter(out)  # a GPU name from an imported log may be "=HYPERLINK(...)"
    writer.writerow(fields)
    for row in _export_rows(store, start_s, end_s):
        writer.writerow(row[f] for f in fields)
        count += 1
    return count
