"""Throttle verdicts for a recorded log: find the runs (load segments) in it and judge each one.

Pure numpy, used by ``rigscope analyze`` for nvidia-smi CSV logs and stored time ranges. A
log is mostly idle time with loads in it; judging it as one run compares one load with
another (an H800 log of short GEMM bursts came out as "112 % of peak"). A segment is a
stretch at or above the load threshold, with short dips (a data-loader stall, a checkpoint)
bridged; a hole in the log itself ends a segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from advisor.power_cap import datasheet_power_limit_w
from advisor.verdict import LOAD_UTIL_PCT, MIN_SUSTAINED_S, RunTrace, Verdict, judge
from advisor.verdict_model import ClockMaxSource, PowerLimitSource

FloatArray = npt.NDArray[np.float64]

#: Dips below the load threshold up to this long stay inside one run.
BRIDGE_S = 10.0
#: A segment needs this many loaded samples to be a run at all (a lone busy sample is noise).
MIN_SEGMENT_SAMPLES = 3


@dataclass(frozen=True)
class LoadSegment:
    """Samples [start, stop) of a log: one run."""

    start: int
    stop: int


@dataclass(frozen=True)
class RunVerdict:
    """One run of a log and its verdict."""

    run: int  # 1-based
    runs: int
    start_s: float  # first loaded sample
    end_s: float  # last loaded sample + one sample interval
    verdict: Verdict


def _step_s(time_s: FloatArray) -> float:
    if time_s.shape[0] < 2:
        return 1.0
    step = float(np.median(np.diff(time_s)))
    return step if step > 0 else 1.0


def load_segments(time_s: FloatArray, utilization_pct: FloatArray | None, *, threshold_pct: float = LOAD_UTIL_PCT,
                  bridge_s: float = BRIDGE_S) -> list[LoadSegment]:
    """The runs in a log: loaded stretches, gaps up to ``bridge_s`` bridged; the whole log without utilization."""
    n = time_s.shape[0]
    if n == 0:
        return []
    if utilization_pct is None or not np.isfinite(utilization_pct).any():
        return [LoadSegment(0, n)]
    step = _step_s(time_s)
    busy = np.flatnonzero(np.isfinite(utilization_pct) & (utilization_pct >= threshold_pct))
    segments: list[LoadSegment] = []
    start = previous = None
    for i in busy:
        # A new run when the load paused for longer than the bridge (counted in wall time, so a hole
        # in the log with no rows at all splits as well).
        if previous is not None and time_s[i] - time_s[previous] - step > bridge_s:
            segments.append(LoadSegment(int(start), int(previous) + 1))  # type: ignore[arg-type]
            start = None
        if start is None:
            start = i
        previous = i
    if start is not None and previous is not None:
        segments.append(LoadSegment(int(start), int(previous) + 1))
    return [s for s in segments if np.count_nonzero(utilization_pct[s.start:s.stop] >= threshold_pct)
            >= MIN_SEGMENT_SAMPLES]


def verdicts_for_log(time_s: FloatArray, columns: Mapping[str, FloatArray], *, sm_clock_max_mhz: float | None = None,
                     power_limit_w: float | None = None, power_limit_source: PowerLimitSource = "reported",
                     gpu_name: str | None = None, temp_slowdown_c: float | None = None,
                     min_load_s: float = MIN_SUSTAINED_S) -> list[RunVerdict]:
    """One verdict per run in the log; an empty list when nothing in it was under load.

    A ``"power_limit_w"`` column is the limit in force at each sample (``power_limit_w`` fills its gaps): each
    run is judged at the limit of its moment, piecewise where it moved (``advisor.limit_series``). Without
    either, the datasheet limit for ``gpu_name`` stands in, and the sentence says so."""
    time_s = np.asarray(time_s, dtype=np.float64)
    columns = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    source: ClockMaxSource = "reported"
    clocks = columns.get("sm_clock_mhz")
    if sm_clock_max_mhz is None and clocks is not None and np.isfinite(clocks).any():
        # A log rarely carries the max clock; the highest clock in it stands in, and the sentence says so.
        sm_clock_max_mhz, source = float(np.nanmax(clocks)), "log"
    limits = columns.get("power_limit_w")
    if not power_limit_w and (limits is None or not np.isfinite(limits).any()):
        power_limit_w, power_limit_source = datasheet_power_limit_w(gpu_name), "datasheet"
    segments = load_segments(time_s, columns.get("utilization_gpu_pct"))
    step = _step_s(time_s)
    out = []
    for number, segment in enumerate(segments, start=1):
        part = slice(segment.start, segment.stop)
        trace = RunTrace.from_columns(time_s[part], {k: v[part] for k, v in columns.items()},
                                      sm_clock_max_mhz=sm_clock_max_mhz, sm_clock_max_source=source,
                                      power_limit_w=power_limit_w, power_limit_source=power_limit_source,
                                      gpu_name=gpu_name, temp_slowdown_c=temp_slowdown_c)
        out.append(RunVerdict(run=number, runs=len(segments), start_s=float(time_s[segment.start]),
                              end_s=float(time_s[segment.stop - 1]) + step,
                              verdict=judge(trace, min_load_s=min_load_s)))
    return out
