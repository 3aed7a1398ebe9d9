"""Bulk writes of numpy columns (demo history, imports, benchmarks): no Snapshot objects needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from desktop.history import codec, limits, packing
from desktop.history.layout import GPU_SCALES
from desktop.history.rollup import note_written
from desktop.history.store_api import StoreApi
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo, GpuProcess, HostSample

_CHUNK_ROWS = 50_000


def write_gpu_columns(store: StoreApi, info: GpuInfo, time_s: npt.ArrayLike,
                      columns: Mapping[str, npt.ArrayLike], *, power_limit_w: npt.ArrayLike | None = None,
                      chunk_rows: int = _CHUNK_ROWS) -> int:
    """Insert one GPU's samples (float columns named like GpuSample fields, NaN = missing).

    Rows already stored at the same GPU and millisecond are kept (so re-importing a log adds
    nothing). Returns the number of rows inserted. Each chunk is one transaction. The limits in
    force are stored with the last chunk (``desktop.history.limits``): ``power_limit_w`` per row
    where given (a log's ``enforced.power.limit`` column; NaN rows take the one before), else
    ``info``'s as one entry at the first sample.
    """
    unknown = set(columns) - set(GPU_METRIC_NAMES)
    if unknown:
        raise ValueError(f"unknown GPU columns: {', '.join(sorted(unknown))}")
    times = np.asarray(time_s, dtype=np.float64)
    n = len(times)
    if n == 0:
        return 0
    # A column of scale 1 goes as it is (never written to: a copy would cost a pass over it for nothing).
    scaled = {m: np.asarray(columns[m], dtype=np.float64) * scale if (scale := GPU_SCALES[m]) != 1
              else np.asarray(columns[m], dtype=np.float64) for m in GPU_METRIC_NAMES if m in columns}
    inserted = 0
    for lo in range(0, n, chunk_rows):
        hi = min(n, lo + chunk_rows)
        with store.transaction():
            gid = store.ensure_gpu(info, float(times[lo]))
            inserted += packing.write_bulk(store.conn, gid, times[lo:hi], {m: v[lo:hi] for m, v in scaled.items()})
            store.conn.execute("UPDATE gpus SET last_seen_s = max(coalesce(last_seen_s, 0), ?), "
                               "first_seen_s = min(coalesce(first_seen_s, ?), ?) WHERE id = ?",
                               (float(times[hi - 1]), float(times[lo]), float(times[lo]), gid))
            note_written(store, float(times[lo:hi].min()))
            if hi == n:
                _record_limits(store, gid, info, times, power_limit_w)
    return inserted


def _record_limits(store: StoreApi, gpu_id: int, info: GpuInfo, times: npt.NDArray[np.float64],
                   power_limit_w: npt.ArrayLike | None) -> None:
    static = limits.scaled_of(info)
    order = np.argsort(times, kind="stable")
    end_s = float(times[order[-1]])
    if power_limit_w is None:
        limits.record_span(store.conn, gpu_id, times[order[:1]], [static], end_s=end_s)
        return
    watts = np.asarray(power_limit_w, dtype=np.float64)[order]
    # A row without a reading keeps the limit before it (a log's blank field is no change).
    known = np.isfinite(watts) & (watts > 0)
    if not known.any():
        limits.record_span(store.conn, gpu_id, times[order[:1]], [static], end_s=end_s)
        return
    filled = watts[np.maximum.accumulate(np.where(known, np.arange(len(watts)), 0))]
    filled[: int(np.argmax(known))] = filled[int(np.argmax(known))]
    tenths = np.rint(filled * 10.0)
    # Only the rows where it changes (a log of 800,000 rows holds a few): one Python tuple each.
    change = np.flatnonzero(np.r_[True, tenths[1:] != tenths[:-1]])
    values = [(int(w), *static[1:]) for w in tenths[change].tolist()]
    limits.record_span(store.conn, gpu_id, times[order][change], values, end_s=end_s)


def write_host_samples(store: StoreApi, samples: Sequence[tuple[float, HostSample]]) -> None:
    if not samples:
        return
    with store.transaction():
        store.conn.executemany(codec.INSERT_HOST, (codec.host_row(t, h) for t, h in samples))
        note_written(store, min(t for t, _ in samples))


def write_process_samples(store: StoreApi, samples: Sequence[tuple[float, str, GpuProcess]]) -> None:
    """(time_s, gpu uuid, process) rows; the GPUs must be stored already."""
    if not samples:
        return
    with store.transaction():
        rows = []
        for time_s, uuid, proc in samples:
            gid = store.gpu_id(uuid)
            if gid is None:
                raise ValueError(f"unknown GPU {uuid}")
            rows.append(codec.process_row(codec.to_ms(time_s), gid, proc, store.string_id(proc.name),
                                          store.process_string_ids(proc)))
        store.conn.executemany(codec.INSERT_PROC, rows)
        note_written(store, min(t for t, _, _ in samples))
