"""The numpy core of rollups: per-row durations, bucket aggregation, and scaling to table columns.

Rows are dicts of float64 columns with these names: a GpuSample metric = time-weighted
mean, ``<metric>_min``/``_max``, ``energy_used_mj`` (energy used within the row),
``busy_s`` (seconds with utilization above the busy threshold, ``advisor.busy``: the process
lists are applied when the rows are read), ``dur_s`` (seconds covered), ``reasons_any``
(OR of the clock-event masks), ``r_<bit>_s`` (seconds under that reason bit, from the
sampled masks) and the ``clock_event_*_s`` metrics (seconds under each cause as NVML counted
them, summed: each sample carries the time since the previous one). A raw
sample is a row too (``raw_as_rollup``), so minute rows, hour rows and query buckets are
all made by the same ``aggregate``. ``capped_s`` is the seconds under a power reason (the
sampled SW power cap or HW power brake bit) and ``power_capped_w`` the mean power over those
seconds only (weighted by them when buckets merge): a minute half capped at 580 W and half
idle at 70 W is "580 W while capped", not 325 W.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from advisor.busy import DEFAULT_BUSY_UTIL_PCT, utilization_busy
from advisor.clock_events import POWER_REASONS
from desktop.history.layout import (
    COUNTER_METRICS,
    GPU_SCALES,
    HOST_ROLLUP_METRICS,
    HOST_SCALES,
    MEAN_METRICS,
    MINMAX_METRICS,
    ON_AC_ROLLUP_SCALE,
    REASON_BITS,
    rollup_columns,
)

FloatArray = npt.NDArray[np.float64]
Columns = dict[str, FloatArray]

#: Table column names of gpu_minute / gpu_hour (scaled integers).
ROLLUP_COLUMNS: tuple[str, ...] = tuple(rollup_columns())
_SUMS = frozenset(("energy_used_mj", "busy_s", "dur_s", "capped_s", *(f"r_{b}_s" for b in REASON_BITS),
                   *COUNTER_METRICS))
#: Means weighted by another column than the duration: the power while capped by the capped seconds.
_WEIGHTS: dict[str, str] = {"power_capped_w": "capped_s"}
#: A gap longer than this many typical intervals is a pause in recording, not a long sample.
_GAP_FACTOR = 3.0


def row_durations(time_s: FloatArray, nominal_s: float | None = None) -> FloatArray:
    """Seconds each sample stands for: the time to the next one, or the typical interval across gaps."""
    n = len(time_s)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    diffs = np.diff(time_s)
    positive = diffs[diffs > 0]
    typical = nominal_s or (float(np.median(positive)) if len(positive) else 1.0)
    out = np.empty(n, dtype=np.float64)
    out[:-1] = np.where(diffs > _GAP_FACTOR * typical, typical, np.maximum(diffs, 0.0))
    out[-1] = typical
    return out


def raw_as_rollup(time_s: FloatArray, raw: Columns, *, busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> Columns:
    """Raw samples (GpuSample columns) as one-row buckets, with their durations and derived sums."""
    dur = row_durations(time_s)
    out: Columns = {m: raw[m] for m in MEAN_METRICS}
    for m in MINMAX_METRICS:
        out[f"{m}_min"] = raw[m]
        out[f"{m}_max"] = raw[m]
    for m in COUNTER_METRICS:
        out[m] = raw[m]
    counter = raw["energy_mj"]
    out["energy_mj"] = counter
    # Energy counter delta to the next sample where it is sane; otherwise power x time.
    delta = np.full(len(time_s), np.nan)
    if len(time_s) > 1:
        d = counter[1:] - counter[:-1]
        ok = np.isfinite(d) & (d >= 0) & (np.diff(time_s) <= _GAP_FACTOR * max(float(np.median(dur)), 1e-9))
        delta[:-1] = np.where(ok, d, np.nan)
    by_power = raw["power_w"] * dur * 1000.0
    out["energy_used_mj"] = np.where(np.isfinite(delta), delta, by_power)
    util = raw["utilization_gpu_pct"]
    out["busy_s"] = dur * utilization_busy(util, threshold_pct=busy_util_pct)
    out["dur_s"] = dur
    mask = np.nan_to_num(raw["clock_event_reasons"], nan=0.0).astype(np.int64)
    out["reasons_any"] = mask.astype(np.float64)
    for bit in REASON_BITS:
        out[f"r_{bit}_s"] = dur * ((mask & bit) != 0)
    capped = (mask & int(POWER_REASONS)) != 0
    out["capped_s"] = np.where(np.isfinite(raw["clock_event_reasons"]), dur * capped, np.nan)
    out["power_capped_w"] = np.where(capped, raw["power_w"], np.nan)
    return out


def _reduce(starts: npt.NDArray[np.intp], cols: Columns) -> Columns:
    weight = cols["dur_s"]
    out: Columns = {}
    for name, values in cols.items():
        if name == "energy_mj":  # a counter: meaningless once merged (energy_used_mj carries it)
            continue
        finite = np.isfinite(values)
        if name.endswith("_min"):
            out[name] = np.fmin.reduceat(values, starts)
        elif name.endswith("_max"):
            out[name] = np.fmax.reduceat(values, starts)
        elif name == "reasons_any":
            out[name] = np.bitwise_or.reduceat(values.astype(np.int64), starts).astype(np.float64)
        elif name in _SUMS:
            total = np.add.reduceat(np.where(finite, values, 0.0), starts)
            out[name] = np.where(np.add.reduceat(finite.astype(np.int64), starts) > 0, total, np.nan)
        else:  # a time-weighted mean over the rows that have a value
            by = np.nan_to_num(cols[_WEIGHTS[name]]) if name in _WEIGHTS and _WEIGHTS[name] in cols else weight
            w = np.where(finite, by, 0.0)
            num = np.add.reduceat(np.where(finite, values * by, 0.0), starts)
            den = np.add.reduceat(w, starts)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[name] = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


def _group_starts(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def aggregate(time_s: FloatArray, cols: Columns, bucket_s: int) -> tuple[FloatArray, Columns]:
    """Rows (sorted by time) into fixed buckets aligned to the epoch; returns (bucket start, columns)."""
    if len(time_s) == 0:
        return np.empty(0), {k: np.empty(0) for k in cols if k != "energy_mj"}
    keys = np.floor(time_s / bucket_s).astype(np.int64)
    starts = _group_starts(keys)
    return keys[starts].astype(np.float64) * bucket_s, _reduce(starts, cols)


def merge_buckets(time_s: FloatArray, cols: Columns, start_s: float, end_s: float,
                  max_points: int) -> tuple[FloatArray, Columns]:
    """At most ``max_points`` rows over [start_s, end_s); each keeps its first row's time."""
    width = max((end_s - start_s) / max_points, 1e-9)
    keys = np.clip(np.floor((time_s - start_s) / width), 0, max_points - 1).astype(np.int64)
    starts = _group_starts(keys)
    return time_s[starts], _reduce(starts, cols)


def public_column(cols: Columns, name: str) -> FloatArray:
    """A column under its query name (``duration_s``, ``reason_s_64``, ...), from rollup names."""
    if name in cols:
        return cols[name]
    alias = {"duration_s": "dur_s", "clock_event_reasons": "reasons_any", "energy_mj": "energy_used_mj"}
    if name in alias:
        return cols[alias[name]]
    if name.startswith("reason_s_"):
        return cols[f"r_{name.removeprefix('reason_s_')}_s"]
    raise KeyError(name)


def _db_name(name: str) -> str:
    return name[:-2] + "_ds" if name in ("busy_s", "dur_s", "capped_s") or (
        name.startswith("r_") and name.endswith("_s")) else name


def _scale_of(db_name: str) -> int:
    if db_name.endswith("_ds"):
        return 10
    if db_name in ("energy_used_mj", "reasons_any"):
        return 1
    if db_name == "power_capped_w":
        return GPU_SCALES["power_w"]
    base = db_name.removesuffix("_min").removesuffix("_max")
    return GPU_SCALES[base]


def unscale(db_cols: Columns) -> Columns:
    """Table columns (scaled ints, NaN for NULL) -> rollup rows in natural units."""
    out: Columns = {}
    for db_name, values in db_cols.items():
        name = db_name[:-3] + "_s" if db_name.endswith("_ds") else db_name
        out[name] = values / _scale_of(db_name)
    return out


def to_table(cols: Columns) -> dict[str, FloatArray]:
    """Rollup rows -> table columns (still float; ``codec.int_column`` makes the ints)."""
    return {_db_name(n): v * _scale_of(_db_name(n)) for n, v in cols.items() if _db_name(n) in ROLLUP_COLUMNS}


def host_scale(name: str) -> int:
    if name == "on_ac_power":
        return ON_AC_ROLLUP_SCALE
    if name == "dur_s":
        return 10
    return HOST_SCALES[name]


HOST_ROLLUP_COLUMNS: tuple[str, ...] = (*HOST_ROLLUP_METRICS, "dur_ds")
