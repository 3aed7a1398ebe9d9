"""The throttle verdict: from a stress run's trace, did the GPU hold its speed, and if not, when, how much and why.

Pure numpy (no torch, Qt or SQL), so it judges a live run, a stored time range and an
nvidia-smi log the same way. The performance signal is the workload's throughput when there
is one, otherwise the SM clock against its maximum. Every decision reads a rolling median,
so single noisy samples cannot trigger it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from advisor.frame import StressResult
from desktop.telemetry.model import ClockEventReason

FloatArray = npt.NDArray[np.float64]

#: Sustained below this share of peak = throttled (DCGM's targeted_stress passes at >= 95 %).
DROP_THRESHOLD = 0.95
#: Held below this share of the max SM clock by a throttle reason most of the run = throttled.
CLOCK_HELD_THRESHOLD = 0.90
#: Rolling-median window for every decision (seconds).
SMOOTH_WINDOW_S = 5.0
#: The peak is read from the first minute (or the first third of a shorter run).
PEAK_WINDOW_S = 60.0

# Causes, in the order they are reported; each maps to the reason bits that stand for it.
CAUSE_BITS: dict[str, int] = {
    "hw_thermal": int(ClockEventReason.HW_THERMAL_SLOWDOWN),
    "sw_thermal": int(ClockEventReason.SW_THERMAL_SLOWDOWN),
    "power_cap": int(ClockEventReason.SW_POWER_CAP),
    "power_brake": int(ClockEventReason.HW_POWER_BRAKE_SLOWDOWN),
    "hw_slowdown": int(ClockEventReason.HW_SLOWDOWN),
}
CAUSE_LABELS: dict[str, str] = {
    "hw_thermal": "HW thermal slowdown",
    "sw_thermal": "SW thermal slowdown",
    "power_cap": "power cap",
    "power_brake": "power brake",
    "hw_slowdown": "HW slowdown",
    "unexplained": "unexplained slowdown",
}
#: The coarse cause family each detailed cause belongs to ("thermal", "power", ...).
CAUSE_FAMILY: dict[str, str] = {
    "hw_thermal": "thermal",
    "sw_thermal": "thermal",
    "power_cap": "power",
    "power_brake": "power",
    "hw_slowdown": "hw_slowdown",
    "unexplained": "unexplained",
}


@dataclass(frozen=True)
class RunTrace:
    """What the verdict reads: per-sample arrays (NaN = unknown) plus the GPU's limits."""

    time_s: FloatArray
    throughput: FloatArray | None = None
    unit: str = ""
    sm_clock_mhz: FloatArray | None = None
    temperature_c: FloatArray | None = None
    power_w: FloatArray | None = None
    clock_event_reasons: FloatArray | None = None
    sm_clock_max_mhz: float | None = None
    power_limit_w: float | None = None
    temp_slowdown_c: float | None = None
    errors: int = 0
    checks: int = 0

    @classmethod
    def from_columns(cls, time_s: FloatArray, columns: Mapping[str, FloatArray], **kwargs: object) -> RunTrace:
        """From arrays named like GpuSample fields (history, nvidia-smi import, simulator)."""

        def col(name: str) -> FloatArray | None:
            values = columns.get(name)
            return None if values is None else np.asarray(values, dtype=np.float64)

        return cls(time_s=np.asarray(time_s, dtype=np.float64), sm_clock_mhz=col("sm_clock_mhz"),
                   temperature_c=col("temperature_c"), power_w=col("power_w"),
                   clock_event_reasons=col("clock_event_reasons"), **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Verdict:
    """The answer: throttled or not, since when, by how much, why — and one plain sentence."""

    status: str  # passed | throttled | errors | aborted | no_data
    throttled: bool
    onset_s: float | None
    peak: float
    sustained: float
    sustained_ratio: float
    unit: str
    basis: str  # "throughput" | "clock"
    clock_ratio: float | None
    cause: str | None  # a key of CAUSE_LABELS
    cause_family: str | None
    onset_temperature_c: float | None
    cause_shares: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    checks: int = 0
    duration_s: float = 0.0
    sentence: str = ""
    comparison: str = ""

    def as_dict(self) -> dict[str, object]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def rolling_median(values: FloatArray, window: int) -> FloatArray:
    """Centred rolling median that ignores NaN (edges use the samples available)."""
    n = values.shape[0]
    if n == 0 or window <= 1:
        return values.copy()
    half = window // 2
    padded = np.concatenate([np.full(half, np.nan), values, np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    out = np.full(n, np.nan)
    finite_rows = np.isfinite(windows).any(axis=1)
    if finite_rows.any():
        out[finite_rows] = np.nanmedian(windows[finite_rows], axis=1)
    return out


def _interval_s(time_s: FloatArray) -> float:
    if time_s.shape[0] < 2:
        return 1.0
    step = float(np.median(np.diff(time_s)))
    return step if step > 0 else 1.0


def _reason_bits(trace: RunTrace, n: int) -> npt.NDArray[np.int64] | None:
    if trace.clock_event_reasons is None:
        return None
    raw = trace.clock_event_reasons
    if not np.isfinite(raw).any():
        return None
    return np.where(np.isfinite(raw), raw, 0.0).astype(np.int64)[:n]


def judge(trace: RunTrace) -> Verdict:
    """The verdict for one run (or one logged time range)."""
    time_s = np.asarray(trace.time_s, dtype=np.float64)
    basis, unit, signal = _signal(trace)
    n = time_s.shape[0]
    if n < 3 or signal is None or not np.isfinite(signal).any():
        errors = (f"{trace.errors} result error(s) in {trace.checks} checks — the GPU computed wrong results. "
                  if trace.errors else "")
        return Verdict(status="errors" if trace.errors else "no_data", throttled=False, onset_s=None,
                       peak=math.nan, sustained=math.nan,
                       sustained_ratio=math.nan, unit=unit, basis=basis, clock_ratio=None, cause=None,
                       cause_family=None, onset_temperature_c=None, errors=trace.errors, checks=trace.checks,
                       sentence=errors + "Not enough samples for a throttle verdict.")
    start = float(time_s[0])
    rel = time_s - start
    duration = float(rel[-1] - rel[0]) + _interval_s(time_s)
    window = max(1, round(SMOOTH_WINDOW_S / _interval_s(time_s)))
    smooth = rolling_median(signal, window)
    peak_end = min(PEAK_WINDOW_S, duration / 3.0)
    peak_mask = (rel <= peak_end) & np.isfinite(smooth)
    if not peak_mask.any():
        peak_mask = np.isfinite(smooth)
    peak = float(np.percentile(smooth[peak_mask], 95))
    last_third = (rel >= duration * 2.0 / 3.0) & np.isfinite(signal)
    sustained = float(np.median(signal[last_third])) if last_third.any() else float(np.nanmedian(signal))
    ratio = sustained / peak if peak > 0 else math.nan
    clock_ratio = _clock_ratio(trace, rel, duration)
    bits = _reason_bits(trace, n)
    shares = _cause_shares(bits, smooth, peak)
    held = (clock_ratio is not None and clock_ratio < CLOCK_HELD_THRESHOLD and bits is not None
            and float(np.mean((bits & sum(CAUSE_BITS.values())) != 0)) > 0.5)
    dropped = bool(np.isfinite(ratio) and ratio < DROP_THRESHOLD)
    throttled = dropped or held
    onset: float | None = None
    if dropped:
        onset = _onset(rel, smooth, peak, bits, peak_mask)
    cause = _cause(trace, bits, smooth, peak, peak_mask=peak_mask, onset=onset, rel=rel, dropped=dropped)
    onset_temp = _temperature_near(trace, rel, onset) if onset is not None else None
    status = "errors" if trace.errors > 0 else "throttled" if throttled else "passed"
    verdict = Verdict(status=status, throttled=throttled, onset_s=onset, peak=peak, sustained=sustained,
                      sustained_ratio=ratio, unit=unit, basis=basis, clock_ratio=clock_ratio, cause=cause,
                      cause_family=CAUSE_FAMILY.get(cause) if cause else None, onset_temperature_c=onset_temp,
                      cause_shares=shares, errors=trace.errors, checks=trace.checks, duration_s=duration)
    return _with_sentence(verdict, trace)


def _signal(trace: RunTrace) -> tuple[str, str, FloatArray | None]:
    if trace.throughput is not None and np.isfinite(trace.throughput).any() and np.nanmax(trace.throughput) > 0:
        return "throughput", trace.unit, np.asarray(trace.throughput, dtype=np.float64)
    if trace.sm_clock_mhz is not None and trace.sm_clock_max_mhz:
        percent = np.asarray(trace.sm_clock_mhz, dtype=np.float64) / trace.sm_clock_max_mhz * 100.0
        return "clock", "% of max clock", percent
    if trace.sm_clock_mhz is not None:
        return "clock", "MHz", np.asarray(trace.sm_clock_mhz, dtype=np.float64)
    return "throughput", trace.unit, None


def _clock_ratio(trace: RunTrace, rel: FloatArray, duration: float) -> float | None:
    if trace.sm_clock_mhz is None or not trace.sm_clock_max_mhz:
        return None
    clocks = trace.sm_clock_mhz
    last = (rel >= duration * 2.0 / 3.0) & np.isfinite(clocks)
    if not last.any():
        return None
    return float(np.median(clocks[last])) / trace.sm_clock_max_mhz


def _cause_shares(bits: npt.NDArray[np.int64] | None, smooth: FloatArray, peak: float) -> dict[str, float]:
    """Share of the run under each cause; "unexplained" = slow with no throttle reason set."""
    n = smooth.shape[0]
    shares: dict[str, float] = {}
    slow = np.isfinite(smooth) & (smooth < DROP_THRESHOLD * peak)
    if bits is None:
        shares["unexplained"] = float(np.mean(slow)) if n else 0.0
        return shares
    any_reason = np.zeros(n, dtype=bool)
    for name, bit in CAUSE_BITS.items():
        on = (bits & bit) != 0
        any_reason |= on
        shares[name] = float(np.mean(on))
    shares["unexplained"] = float(np.mean(slow & ~any_reason))
    return shares


def _onset(rel: FloatArray, smooth: FloatArray, peak: float, bits: npt.NDArray[np.int64] | None,
           peak_mask: npt.NDArray[np.bool_]) -> float | None:
    """When the slowdown began: the first persistent fall below peak, moved back to the reason that came with it."""
    # The plateau is the typical early level; the p95 peak sits above the noise and would pull onset early.
    plateau = float(np.median(smooth[peak_mask])) if peak_mask.any() else peak
    early = smooth[peak_mask] if peak_mask.any() else smooth[np.isfinite(smooth)]
    noise_band = 1.4826 * float(np.median(np.abs(early - plateau))) if early.size else 0.0
    below = np.isfinite(smooth) & (smooth < 0.97 * plateau)
    # Persistent: the first slow sample after which the median stays slow for most of the next 30 s.
    candidates = np.flatnonzero(below)
    first = None
    for i in candidates:
        ahead = below[i:i + 30]
        if ahead.mean() >= 0.5:
            first = int(i)
            break
    if first is None:
        if not candidates.size:
            return None
        first = int(candidates[0])
    onset_index = first
    # The median lags the true change and the fall may be gradual: walk back to the last sample
    # at plateau level (within the noise seen on the plateau).
    while (onset_index > 0 and first - onset_index < 30 and smooth[onset_index - 1] < plateau - noise_band
           and not peak_mask[onset_index - 1]):
        onset_index -= 1
    if bits is not None:
        usual = int(np.bitwise_or.reduce(bits[peak_mask])) if peak_mask.any() else 0
        new_bits = (bits & sum(CAUSE_BITS.values()) & ~usual) != 0
        lookback = np.flatnonzero(new_bits[max(0, first - 15):first + 1])
        if lookback.size:
            # The driver's own record of when it started holding clocks beats any estimate from the signal.
            onset_index = max(0, first - 15) + int(lookback[0])
    return float(rel[onset_index])


def _cause(trace: RunTrace, bits: npt.NDArray[np.int64] | None, smooth: FloatArray, peak: float, *,
           peak_mask: npt.NDArray[np.bool_], onset: float | None, rel: FloatArray, dropped: bool) -> str | None:
    """The reason behind the drop: the one that became more common when throughput fell."""
    slow = np.isfinite(smooth) & (smooth < 0.97 * peak)
    if onset is not None:
        slow &= rel >= onset
    if bits is not None:
        if dropped and slow.any():
            scores = {}
            for name, bit in CAUSE_BITS.items():
                during = float(np.mean((bits[slow] & bit) != 0))
                before = float(np.mean((bits[peak_mask] & bit) != 0)) if peak_mask.any() else 0.0
                scores[name] = during - before
            best = max(scores, key=lambda k: scores[k])
            return best if scores[best] > 0.05 else "unexplained"
        # Not dropped: name what held the clocks (the most common reason), if any.
        counts = {name: float(np.mean((bits & bit) != 0)) for name, bit in CAUSE_BITS.items()}
        best = max(counts, key=lambda k: counts[k])
        return best if counts[best] > 0.2 else None
    if not dropped or not slow.any():
        return None
    # No reason bits (older logs): infer from temperature and power against their limits.
    if trace.temperature_c is not None and trace.temp_slowdown_c:
        hot = np.nanmedian(trace.temperature_c[slow]) if np.isfinite(trace.temperature_c[slow]).any() else math.nan
        if hot >= trace.temp_slowdown_c - 2.0:
            return "sw_thermal"
    if trace.power_w is not None and trace.power_limit_w:
        draw = np.nanmedian(trace.power_w[slow]) if np.isfinite(trace.power_w[slow]).any() else math.nan
        if draw >= 0.97 * trace.power_limit_w:
            return "power_cap"
    return "unexplained"


def _temperature_near(trace: RunTrace, rel: FloatArray, at_s: float) -> float | None:
    if trace.temperature_c is None:
        return None
    near = (np.abs(rel - at_s) <= 5.0) & np.isfinite(trace.temperature_c)
    return float(np.max(trace.temperature_c[near])) if near.any() else None


def format_duration(seconds: float) -> str:
    """``145`` -> "2 min 25 s"."""
    total = round(seconds)
    minutes, secs = divmod(total, 60)
    if minutes and secs:
        return f"{minutes} min {secs} s"
    return f"{minutes} min" if minutes else f"{secs} s"


def _fmt(value: float) -> str:
    if abs(value) < 10:
        return f"{value:.3g}"
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def _with_sentence(verdict: Verdict, trace: RunTrace) -> Verdict:
    unit = f" {verdict.unit}" if verdict.unit else ""
    label = CAUSE_LABELS.get(verdict.cause or "", "")
    pct = verdict.sustained_ratio * 100.0
    figures = f"sustained {verdict.basis} {pct:.0f} % of peak ({_fmt(verdict.sustained)} vs {_fmt(verdict.peak)}{unit})"
    if verdict.onset_s is not None:
        where = ""
        if verdict.onset_temperature_c is not None and "thermal" in (verdict.cause or ""):
            where = f" at {verdict.onset_temperature_c:.0f} °C"
        if verdict.cause in ("power_cap", "power_brake") and trace.power_limit_w:
            where = f" at the {trace.power_limit_w:.0f} W limit"
        text = f"Throttled after {format_duration(verdict.onset_s)}: {label}{where}; {figures}"
    elif verdict.throttled and verdict.sustained_ratio < DROP_THRESHOLD:
        text = f"Throttled: {label or CAUSE_LABELS['unexplained']}; {figures}"
    elif verdict.throttled:
        clock = f"{(verdict.clock_ratio or 0.0) * 100:.0f} %"
        text = f"Throttled all run: clocks held at {clock} of max by the {label}; {figures}"
    else:
        text = f"Held its speed: {figures}"
        if verdict.cause and verdict.clock_ratio is not None:
            text += (f"; clocks at {verdict.clock_ratio * 100:.0f} % of max, limited by the {label} "
                     f"{verdict.cause_shares.get(verdict.cause, 0.0) * 100:.0f} % of the time")
    if verdict.errors:
        text = f"{verdict.errors} result error(s) in {verdict.checks} checks — the GPU computed wrong results. " + text
    return _replace(verdict, sentence=text + ".")


def _replace(verdict: Verdict, **changes: object) -> Verdict:
    values = dict(verdict.__dict__)
    values.update(changes)
    return Verdict(**values)


def compare_with_history(verdict: Verdict, earlier: Sequence[StressResult], regression_pct: float = 5.0) -> Verdict:
    """Add a comparison with earlier runs of the same workload on the same GPU (already filtered).

    The baseline is the best sustained result among the last ten earlier runs without errors:
    a machine that once held that speed can again, so a shortfall points at dust, fan mode or
    driver rather than the silicon.
    """
    usable = [r for r in earlier[:10] if r.errors == 0 and r.sustained_throughput > 0 and r.unit == verdict.unit]
    if not usable or not np.isfinite(verdict.sustained):
        return verdict
    base = max(usable, key=lambda r: r.sustained_throughput)
    when = datetime.fromtimestamp(base.started_s, tz=UTC).astimezone()
    date = f"{when.day} {when.strftime('%b')}"
    delta_pct = (verdict.sustained / base.sustained_throughput - 1.0) * 100.0
    if delta_pct <= -regression_pct:
        text = f"{-delta_pct:.0f} % below your baseline from {date} — check dust, fan mode, driver"
    elif delta_pct >= regression_pct:
        text = f"{delta_pct:.0f} % above your baseline from {date}"
    else:
        text = f"within {abs(delta_pct):.0f} % of your baseline from {date}"
    return _replace(verdict, comparison=text)
