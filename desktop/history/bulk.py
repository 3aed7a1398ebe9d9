"""Bulk writes of numpy columns (demo history, imports, benchmarks): no Snapshot objects needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from desktop.history import codec
from desktop.history.schema import GPU_SCALES
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo, GpuProcess, HostSample

_CHUNK_ROWS = 50_000


def write_gpu_columns(store: HistoryStore, info: GpuInfo, time_s: npt.ArrayLike,
                      columns: Mapping[str, npt.ArrayLike], *, chunk_rows: int = _CHUNK_ROWS) -> int:
    """Insert one GPU's samples (float columns named like GpuSample fields, NaN = missing).

    Rows already stored at the same GPU and millisecond are kept (so re-importing a log adds
    nothing). Returns the number of rows inserted. Each chunk is one transaction.
    """
    unknown = set(columns) - set(GPU_METRIC_NAMES)
    if unknown:
        raise ValueError(f"unknown GPU columns: {', '.join(sorted(unknown))}")
    times = np.asarray(time_s, dtype=np.float64)
    n = len(times)
    if n == 0:
        return 0
    names = [m for m in GPU_METRIC_NAMES if m in columns]
    sql = (f"INSERT OR IGNORE INTO gpu_samples (gpu, ts, {', '.join(names)}) "
           f"VALUES ({', '.join('?' * (2 + len(names)))})")
    inserted = 0
    for lo in range(0, n, chunk_rows):
        hi = min(n, lo + chunk_rows)
        with store.transaction():
            gid = store.ensure_gpu(info, float(times[lo]))
            ts = np.rint(times[lo:hi] * 1000.0).astype(np.int64).tolist()
            cols = [codec.int_column(np.asarray(columns[m], dtype=np.float64)[lo:hi], GPU_SCALES[m]) for m in names]
            before = store.conn.total_changes
            store.conn.executemany(sql, zip([gid] * (hi - lo), ts, *cols, strict=True))
            inserted += store.conn.total_changes - before
            store.conn.execute("UPDATE gpus SET last_seen_s = max(coalesce(last_seen_s, 0), ?), "
                               "first_seen_s = min(coalesce(first_seen_s, ?), ?) WHERE id = ?",
                               (float(times[hi - 1]), float(times[lo]), float(times[lo]), gid))
            store.note_written(float(times[lo:hi].min()))
    return inserted


def write_host_samples(store: HistoryStore, samples: Sequence[tuple[float, HostSample]]) -> None:
    if not samples:
        return
    from desktop.history.store import INSERT_HOST

    with store.transaction():
        store.conn.executemany(INSERT_HOST, (codec.host_row(t, h) for t, h in samples))
        store.note_written(min(t for t, _ in samples))


def write_process_samples(store: HistoryStore, samples: Sequence[tuple[float, str, GpuProcess]]) -> None:
    """(time_s, gpu uuid, process) rows; the GPUs must be stored already."""
    if not samples:
        return
    from desktop.history.store import INSERT_PROC

    with store.transaction():
        rows = []
        for time_s, uuid, proc in samples:
            gid = store.gpu_id(uuid)
            if gid is None:
                raise ValueError(f"unknown GPU {uuid}")
            user_id = store.string_id(proc.user) if proc.user is not None else None
            rows.append(codec.process_row(codec.to_ms(time_s), gid, proc, store.string_id(proc.name), user_id))
        store.conn.executemany(INSERT_PROC, rows)
