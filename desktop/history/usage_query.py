"""The stored process samples and GPU energy over a range, as the usage accounting reads them.

Whole days come from their blocks (``blocks.fetch``), so a week of process rows is read as
arrays, not row by row. Rows stored before schema v8 have no SM figure, command or container:
they read as NaN / unknown, and the accounting splits their energy by VRAM share.
"""

from __future__ import annotations

import numpy as np

from advisor.frame import FloatArray
from advisor.usage import GpuEnergy, ProcessUsageRows
from desktop.history import blocks, codec
from desktop.history.frames import RAW_SPAN_LIMIT_S
from desktop.history.query import Resolution, gpu_rows
from desktop.history.store_api import StoreApi

#: The period a process row stands for when a range holds a single poll.
DEFAULT_PROCESS_PERIOD_S = 5.0
_COLUMNS = ("ts", "gpu", "pid", "vram_mib", "sm_util_pct", "user_id", "command_id", "container_id", "kind")


def _ids_to_labels(store: StoreApi, columns: list[FloatArray]) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """``strings`` id columns (NaN = none) -> indices into one label tuple (-1 = none)."""
    wanted = sorted({int(v) for col in columns for v in np.unique(col[np.isfinite(col)])})
    table = store.strings_by_id(wanted)
    texts = {i: table.get(i, "?") for i in wanted}
    labels = tuple(dict.fromkeys(texts.values()))
    index_of_label = {label: n for n, label in enumerate(labels)}
    ids = np.array(wanted, dtype=np.int64)
    number = np.array([index_of_label[texts[i]] for i in wanted], dtype=np.int64)
    out = []
    for col in columns:
        mapped = np.full(col.shape, -1, dtype=np.int64)
        ok = np.isfinite(col)
        if ok.any():
            mapped[ok] = number[np.searchsorted(ids, col[ok].astype(np.int64))]
        out.append(mapped)
    return out, labels


def process_usage_rows(store: StoreApi, start_s: float, end_s: float) -> ProcessUsageRows:
    """Every stored process sample in [start_s, end_s)."""
    present = {str(row[1]) for row in store.conn.execute("PRAGMA table_info(process_samples)")}
    asked = [c for c in _COLUMNS if c in present]
    arr = blocks.fetch(store, "process_samples", asked, codec.to_ms(start_s), codec.to_ms(end_s),
                       not_null=("ts", "gpu", "pid"))
    cols = {c: (arr[:, asked.index(c)] if c in asked else np.full(len(arr), np.nan)) for c in _COLUMNS}
    time_s = cols["ts"] / 1000.0
    gaps = np.diff(np.unique(time_s))
    period = float(np.median(gaps)) if len(gaps) else DEFAULT_PROCESS_PERIOD_S
    gpu_ids, gpu_of_row = np.unique(cols["gpu"].astype(np.int64), return_inverse=True)
    uuid_of = store.gpu_uuid_of_id()
    (user, command, container), labels = _ids_to_labels(store, [cols["user_id"], cols["command_id"],
                                                                 cols["container_id"]])
    return ProcessUsageRows(
        time_s=time_s, duration_s=np.full(len(arr), period), gpu=gpu_of_row.reshape(-1).astype(np.int64),
        pid=cols["pid"].astype(np.int64), vram_mib=cols["vram_mib"] / 10.0, sm_util_pct=cols["sm_util_pct"] / 10.0,
        user=user, command=command, container=container, labels=labels,
        gpu_uuids=tuple(uuid_of.get(int(g), f"gpu-{int(g)}") for g in gpu_ids),
        # A graphics-only process (Xorg, a compositor) holds GPU-hours but no busy ones (advisor.busy).
        compute=cols["kind"] != codec.PROCESS_KINDS.index("graphics") if "kind" in asked else None)


def gpu_energy(store: StoreApi, start_s: float, end_s: float) -> list[GpuEnergy]:
    """Each stored GPU's energy over the range: raw rows up to two days, minute rollups beyond."""
    resolution: Resolution = "minute" if end_s - start_s > RAW_SPAN_LIMIT_S else "raw"
    out = []
    for info in store.gpus():
        gpu_id = store.gpu_id(info.uuid)
        if gpu_id is None:
            continue
        time_s, cols = gpu_rows(store, gpu_id, start_s, end_s, resolution, metrics=["energy_used_mj", "busy_s"])
        if len(time_s):
            out.append(GpuEnergy(info.uuid, time_s, cols["dur_s"], cols["energy_used_mj"] / 3.6e6,
                                 busy_s=cols["busy_s"]))
    return out

