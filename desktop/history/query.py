"""Range queries: one GPU's metrics over a time range as numpy arrays, raw or rolled up.

The resolution is chosen from the span and the number of points asked: the finest of
raw (~1 s), minute and hour rows that needs at most ``_OVERSAMPLE`` x ``max_points`` rows
and still has data at the range start (raw rows expire first). More rows than
``max_points`` are merged into equal time buckets (time-weighted means, min of minimums,
max of maximums, sums of seconds and energy). Minute and hour tables lag the raw rows by
up to one bucket; the missing tail is aggregated from raw rows on the fly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import numpy.typing as npt

from advisor.wording import plural_word
from desktop.history import blocks, codec, limits, packing, rollup_math
from desktop.history.layout import GPU_SCALES, MINMAX_METRICS, REASON_BITS
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuProcess, ProcessKind

if TYPE_CHECKING:
    from desktop.history.store_api import StoreApi

FloatArray = npt.NDArray[np.float64]
Resolution = Literal["raw", "minute", "hour"]

_OVERSAMPLE = 6
_STEP_S: dict[str, float] = {"raw": 1.0, "minute": 60.0, "hour": 3600.0}
_TABLES = {"minute": "gpu_minute", "hour": "gpu_hour"}

#: Names ``query`` accepts beyond the GpuSample fields.
DERIVED: tuple[str, ...] = (
    "duration_s", "busy_s", "energy_used_mj",
    *(f"{m}_min" for m in MINMAX_METRICS), *(f"{m}_max" for m in MINMAX_METRICS),
    *(f"reason_s_{bit}" for bit in REASON_BITS), "capped_s", "power_capped_w",
    # The enforced power limit in force at each row (schema v11's stored changes; NaN: none stored).
    "power_limit_w",
)
QUERYABLE: frozenset[str] = frozenset((*GPU_METRIC_NAMES, *DERIVED))


@dataclass(frozen=True)
class QueryResult:
    """Rows of one GPU: ``time_s`` (row start), one float64 column per metric (NaN = missing)."""

    time_s: FloatArray
    columns: dict[str, FloatArray]
    resolution: Resolution
    #: Seconds each row stands for (the sampling interval, or the covered part of a bucket).
    duration_s: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.time_s.shape[0])


def read_raw(store: StoreApi, gpu_id: int, start_s: float, end_s: float,
             metrics: Sequence[str] = GPU_METRIC_NAMES) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Raw ``metrics`` of one GPU in [start_s, end_s), unscaled; the other metrics come back all-NaN."""
    wanted = [m for m in GPU_METRIC_NAMES if m in metrics]
    ts, stored = packing.read_columns(store.conn, gpu_id, codec.to_ms(start_s), codec.to_ms(end_s), wanted)
    time_s = ts / 1000.0
    out = {m: stored[m] / GPU_SCALES[m] for m in wanted}
    missing = np.full(len(time_s), np.nan)
    return time_s, {m: out.get(m, missing) for m in GPU_METRIC_NAMES}


def read_rollup(store: StoreApi, table: str, gpu_id: int, start_s: float, end_s: float, *,
                names: Sequence[str] = rollup_math.ROLLUP_COLUMNS) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Rollup rows in [start_s, end_s), unscaled, named as ``rollup_math`` names them."""
    arr = blocks.fetch(store, table, ["ts", *names], int(np.floor(start_s)), int(np.ceil(end_s)), gpu_id=gpu_id)
    return arr[:, 0].copy(), rollup_math.unscale({n: arr[:, i + 1] for i, n in enumerate(names)})


def _oldest(store: StoreApi, table: str, gpu_id: int) -> float | None:
    row = store.conn.execute(f"SELECT min(ts) FROM {table} WHERE gpu = ?", (gpu_id,)).fetchone()
    if row[0] is None:
        return None
    return float(row[0]) / (1000.0 if table == "gpu_samples" else 1.0)


def _available(store: StoreApi, gpu_id: int, resolution: str, start_s: float) -> bool:
    """Whether ``resolution`` has data reaching back to ``start_s`` (or as far as anything does)."""
    order = ["gpu_samples", "gpu_minute", "gpu_hour"]
    table = order[["raw", "minute", "hour"].index(resolution)]
    oldest = _oldest(store, table, gpu_id)
    if oldest is None:
        return resolution == "raw" and all(_oldest(store, t, gpu_id) is None for t in order[1:])
    if oldest <= start_s + 120.0:
        return True
    coarser = [o for o in (_oldest(store, t, gpu_id) for t in order[order.index(table) + 1:]) if o is not None]
    return not coarser or oldest <= min(coarser) + 3600.0


def choose_resolution(store: StoreApi, gpu_id: int, start_s: float, end_s: float, max_points: int) -> Resolution:
    span = max(0.0, end_s - start_s)
    candidates: tuple[Resolution, ...] = ("raw", "minute")
    for res in candidates:
        if span / _STEP_S[res] <= max_points * _OVERSAMPLE and _available(store, gpu_id, res, start_s):
            return res
    return "hour"


def _raw_needs(metrics: Sequence[str]) -> set[str]:
    """The raw metrics needed to compute the query names ``metrics``."""
    needs = set()
    for name in metrics:
        base = name.removesuffix("_min").removesuffix("_max")
        if base in GPU_METRIC_NAMES:
            needs.add(base)
        elif name == "busy_s":
            needs.add("utilization_gpu_pct")
        elif name == "energy_used_mj":
            needs.update(("energy_mj", "power_w"))
        elif name.startswith("reason_s_"):
            needs.add("clock_event_reasons")
        elif name in ("capped_s", "power_capped_w"):
            needs.update(("clock_event_reasons", "power_w"))
    if "energy_mj" in needs:
        needs.add("power_w")
    return needs


def _rollup_needs(metrics: Sequence[str]) -> list[str]:
    """The rollup table columns holding the query names ``metrics`` (plus the duration)."""
    alias = {"energy_mj": "energy_used_mj", "clock_event_reasons": "reasons_any", "busy_s": "busy_ds",
             "duration_s": "dur_ds", "capped_s": "capped_ds"}
    needs = {"dur_ds"}
    for name in metrics:
        if name.startswith("reason_s_"):
            needs.add(f"r_{name.removeprefix('reason_s_')}_ds")
        else:
            needs.add(alias.get(name, name))
    if "power_capped_w" in needs:  # merged weighted by the capped seconds
        needs.add("capped_ds")
    return [c for c in rollup_math.ROLLUP_COLUMNS if c in needs]


def gpu_rows(store: StoreApi, gpu_id: int, start_s: float, end_s: float, resolution: Resolution, *,
             metrics: Sequence[str] | None = None) -> tuple[FloatArray, dict[str, FloatArray]]:
    """Columns (``rollup_math`` names) at ``resolution``, all of them or enough for query names ``metrics``."""
    raw_metrics = GPU_METRIC_NAMES if metrics is None else tuple(_raw_needs(metrics))
    if resolution == "raw":
        time_s, raw = read_raw(store, gpu_id, start_s, end_s, raw_metrics)
        return time_s, rollup_math.raw_as_rollup(time_s, raw)
    bucket_s = 60 if resolution == "minute" else 3600
    # A bucket that starts before the range but reaches into it belongs to it.
    start_s = float(np.floor(start_s / bucket_s) * bucket_s)
    names = rollup_math.ROLLUP_COLUMNS if metrics is None else _rollup_needs(metrics)
    time_s, cols = read_rollup(store, _TABLES[resolution], gpu_id, start_s, end_s, names=names)
    # The newest buckets are not rolled up yet: aggregate them from finer rows now.
    key = "rollup_minute_until" if resolution == "minute" else "rollup_hour_until"
    until = float(store.meta(key) or "-inf")
    if resolution == "hour":
        until = min(until, float(store.meta("rollup_minute_until") or "-inf"))
    tail_start = max(start_s, until, float(time_s[-1]) + bucket_s if len(time_s) else start_s)
    if tail_start < end_s:
        rt, raw = read_raw(store, gpu_id, tail_start, end_s, raw_metrics)
        if len(rt):
            bt, bc = rollup_math.aggregate(rt, rollup_math.raw_as_rollup(rt, raw), bucket_s)
            time_s = np.concatenate([time_s, bt])
            cols = {k: np.concatenate([v, bc[k]]) for k, v in cols.items()}
    return time_s, cols


def run_query(store: StoreApi, gpu_uuid: str, metrics: Sequence[str], start_s: float, end_s: float, *,
              max_points: int = 2000, resolution: Resolution | None = None) -> QueryResult:
    unknown = [m for m in metrics if m not in QUERYABLE]
    if unknown:
        raise ValueError(f"unknown {plural_word(len(unknown), 'metric')} {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(QUERYABLE))}")
    gpu_id = store.gpu_id(gpu_uuid)
    if gpu_id is None:
        empty = np.empty(0, dtype=np.float64)
        return QueryResult(empty, {m: empty.copy() for m in metrics}, resolution or "raw", empty.copy())
    res = resolution or choose_resolution(store, gpu_id, start_s, end_s, max_points)
    measured = [m for m in metrics if m != "power_limit_w"]
    time_s, cols = gpu_rows(store, gpu_id, start_s, end_s, res, metrics=measured)
    if max_points > 0 and len(time_s) > max_points:
        time_s, cols = rollup_math.merge_buckets(time_s, cols, start_s, end_s, max_points)
    out = {m: rollup_math.public_column(cols, m) for m in measured}
    if "power_limit_w" in metrics:  # a step, never a mean: the limit in force at each row's start
        out["power_limit_w"] = limits.limits_at(store.conn, gpu_id, time_s)["power_limit_w"]
    return QueryResult(time_s, {m: out[m] for m in metrics}, res, cols["dur_s"])


_PROCESS_QUERY = """
    SELECT p.ts, g.idx, p.pid, n.text, u.text, p.vram_mib, p.kind, p.cpu_pct, p.started_ms, p.own,
           p.sm_util_pct, p.mem_util_pct, p.enc_util_pct, p.dec_util_pct, c.text, k.text
    FROM process_samples p JOIN gpus g ON g.id = p.gpu JOIN strings n ON n.id = p.name_id
    LEFT JOIN strings u ON u.id = p.user_id LEFT JOIN strings c ON c.id = p.command_id
    LEFT JOIN strings k ON k.id = p.container_id
    WHERE p.ts >= ? AND p.ts < ? {pid} ORDER BY p.ts, p.gpu, p.pid"""


def process_history(store: StoreApi, start_s: float, end_s: float,
                    pid: int | None = None) -> list[tuple[float, GpuProcess]]:
    """The stored process samples in [start_s, end_s) (of one ``pid`` when given) as (time_s, GpuProcess).

    Row by row: for one process's history or a short span (the advisor's frames read weeks from blocks).
    Utilization stored before schema v8, or n/a when sampled, comes back as None, never 0.
    """
    sql = _PROCESS_QUERY.format(pid="AND p.pid = ?" if pid is not None else "")
    params: tuple[int, ...] = (codec.to_ms(start_s), codec.to_ms(end_s), *(() if pid is None else (pid,)))

    def tenth(value: int | None) -> float | None:
        return None if value is None else value / 10.0

    out = []
    for (ts, idx, proc_pid, name, user, vram, kind, cpu, started_ms, own, sm, mem, enc, dec, command,
         container) in store.conn.execute(sql, params):
        out.append((ts / 1000.0, GpuProcess(
            pid=int(proc_pid), gpu_index=int(idx), name=codec.text_from_db(name) or "", user=codec.text_from_db(user),
            vram_mib=tenth(vram),
            kind=cast("ProcessKind", codec.PROCESS_KINDS[int(kind)]), cpu_pct=tenth(cpu),
            started_s=None if started_ms is None else started_ms / 1000.0, own=bool(own),
            sm_util_pct=tenth(sm), mem_util_pct=tenth(mem), enc_util_pct=tenth(enc), dec_util_pct=tenth(dec),
            command=codec.text_from_db(command), container=codec.text_from_db(container))))
    return out
