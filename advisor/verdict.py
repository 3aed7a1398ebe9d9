"""The throttle verdict: from a stress run's trace, did the GPU hold its speed, and if not, when, how much and why.

Pure numpy (no torch, Qt or SQL), so it judges a live run, a stored time range and an
nvidia-smi log the same way. The performance signal is the workload's throughput when there
is one, otherwise the SM clock in MHz. Throttled means the signal FELL during the run (the
end of the run against the best sustained level of its first minute after warm-up), or a
thermal or hardware slowdown appeared under load. The GPU's reported max clock is not a
reference unless the run reached it: on Ada it is the top of the V/F curve (3105 MHz) and never
sustained, so the clock is said against a sustained reference (``advisor.clock_reference``); and a
GEMM held at its power limit from the first second is the normal state of a datacenter GPU, so
the SW power cap alone is reported (named: ``power_cap``), not judged. Reasons count only under
load (A10, A40 and RTX 5090 report SW power cap Active at idle). Every decision reads a
rolling median, so single noisy samples cannot trigger it.

This module measures the fall; its parts live beside it: the signal's levels (``advisor.signal_level``),
the cause behind the fall and its onset (``advisor.verdict_cause``), the limit in force and the power
figures (``advisor.limit_series``), the sentence (``advisor.verdict_text``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from advisor.causes import CAUSE_FAMILY, CauseTiming, cause_times, reason_bits, sample_intervals
from advisor.clock_events import ClockEventReason
from advisor.clock_reference import ClockBasis, ClockReference, choose_reference
from advisor.forecast import TemperatureForecast, run_forecast
from advisor.limit_series import PowerFields, power_fields, run_against_limit
from advisor.signal_level import best_level, level, rolling_median
from advisor.verdict_cause import (
    JudgedRun,
    cause_shares,
    fall_cause,
    fall_onset,
    first_on,
    slowdown_cause,
    unexplained_share,
)
from advisor.verdict_model import Basis, ClockMaxSource, RunTrace, Verdict, VerdictStatus
from advisor.verdict_text import sentence_for
from advisor.wording import count_text

# The judge's input and answer live in verdict_model (verdict_text reads them too); offered here as well, since
# the stress run, the job card, the log verdict and the window all take them with ``judge``.
__all__ = ["DROP_THRESHOLD", "LOAD_UTIL_PCT", "MIN_STRESS_LOAD_S", "MIN_SUSTAINED_S",
           "REFERENCE_SMOOTH_S", "REFERENCE_WINDOW_S", "RISING_C_PER_MIN", "RISING_HORIZON_S", "RISING_WINDOW_S",
           "SMOOTH_WINDOW_S", "WARMUP_S", "RunTrace", "Verdict", "judge"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Sustained below this share of the early reference = throttled (DCGM's targeted_stress passes at >= 95 %).
DROP_THRESHOLD = 0.95
#: Rolling-median window for onset detection (seconds).
SMOOTH_WINDOW_S = 5.0
#: Clocks ramp and caches fill in the first seconds of a load: the reference starts after this.
WARMUP_S = 10.0
#: The reference is the best sustained level in this long a window after warm-up (or the first third of a shorter run).
REFERENCE_WINDOW_S = 60.0
#: "Sustained" = the level of this long a stretch: 1 Hz dither under a power cap (H800: 1425-1965 MHz) averages out.
REFERENCE_SMOOTH_S = 45.0
#: A sample is under load at this GPU utilization or above (when the trace has no throughput).
LOAD_UTIL_PCT = 50.0
#: A run shorter than this gets no sustained verdict where the caller asks for one (``rigscope analyze``).
MIN_SUSTAINED_S = 60.0
#: A stress run with less load than this is too short to judge at all (``rigscope stress --minutes 0.05``).
MIN_STRESS_LOAD_S = 30.0
#: The temperature's rise is read from this last stretch of the load (a least-squares slope).
RISING_WINDOW_S = 60.0
#: Still rising faster than this (°C per minute) at the end = not at thermal steady state ...
RISING_C_PER_MIN = 1.0
#: ... when, at that rate, it would reach the slowdown temperature within this long (unknown slowdown: always).
RISING_HORIZON_S = 300.0


def judge(trace: RunTrace, *, min_load_s: float = 0.0, steady_state: bool = False) -> Verdict:
    """The verdict for one run (or one load segment of a log); under ``min_load_s`` of load it says so instead.

    With ``steady_state`` (a stress run), a run that held its speed while its temperature was still
    rising towards the slowdown temperature at the end is "inconclusive": it ended before the heat
    could slow it. A throttled run stays throttled.
    """
    time_s = np.asarray(trace.time_s, dtype=np.float64)
    basis, unit, raw_signal = _signal(trace)
    n = time_s.shape[0]
    loaded = _load_mask(trace, raw_signal, basis, n)
    if n < 3 or raw_signal is None or int(loaded.sum()) < 3:
        return _no_data(trace, basis, unit)
    run, step, span = _run_of(trace, time_s, loaded, raw_signal)
    rel, signal, reference = run.rel, run.signal, run.reference
    load_s = float(np.sum(run.interval_s[loaded]))
    clock_max = trace.sm_clock_max_mhz if trace.sm_clock_max_mhz and trace.sm_clock_max_mhz > 0 else None
    shares, seconds = cause_shares(run)
    trace, cap, steps = run_against_limit(trace, loaded, run.interval_s, run.causes, shares.get("power_cap", 0.0))
    # Under a limit that moved, the early level is the first limit's clock, not one to measure the rest by.
    clock_ref = _clock_reference(trace, loaded, reference if len(steps) <= 1 else None, clock_max, step)
    ref_mhz = clock_ref.mhz if clock_ref else None
    common: _Common = dict(unit=unit, basis=basis, errors=trace.errors, checks=trace.checks, duration_s=span,
                           load_s=load_s, cause_timing=run.causes.timing if run.causes else "none",
                           sm_clock_max_mhz=clock_max,
                           sm_clock_max_source=trace.sm_clock_max_source if clock_max else None,
                           power_limit_steps=steps,
                           clock_reference_mhz=ref_mhz, clock_reference_basis=clock_ref.basis if clock_ref else None,
                           **power_fields(trace, cap))
    said = _forecast(trace, time_s, loaded) if steady_state else _Forecast(forecast=None, forecast_unavailable=None)
    if load_s < min_load_s:
        typical = float(np.nanmedian(signal))
        verdict = Verdict(status="errors" if trace.errors else "too_short", throttled=False, onset_s=None,
                          peak=math.nan, sustained=typical, sustained_ratio=math.nan,
                          clock_ratio=_clock_ratio(trace, loaded, ref_mhz),
                          cause="power_cap" if cap.limited else None, cause_family="power" if cap.limited else None,
                          onset_temperature_c=None, cause_shares=shares, cause_seconds=seconds,
                          **said, **common)
        return _with_sentence(verdict, trace, min_load_s)
    best_early = best_level(signal, reference, max(1, min(round(REFERENCE_SMOOTH_S / step), int(reference.sum()))))
    sustained = level(signal[run.end]) if np.isfinite(signal[run.end]).any() else level(signal)
    # The peak is the best sustained level seen: a run that gets faster (a long warm-up, lighter
    # data later) is at 100 % of it, never above.
    peak = float(np.nanmax([best_early, sustained]))
    ratio = sustained / peak if peak > 0 else math.nan
    slow = np.isfinite(run.smooth) & (run.smooth < DROP_THRESHOLD * peak)
    shares["unexplained"] = unexplained_share(run, slow)
    dropped = bool(np.isfinite(ratio) and ratio < DROP_THRESHOLD)
    slowdown = slowdown_cause(shares) if run.causes is not None else None
    onset = fall_onset(run, peak) if dropped else None
    if slowdown is not None:
        appeared = first_on(run, slowdown)
        if appeared is not None and (onset is None or appeared < onset):
            onset = appeared
    cause = fall_cause(trace, run, shares, peak, onset=onset, dropped=dropped, slowdown=slowdown)
    if cause == "unexplained" and cap.kind == "plateau":
        cause = "power_cap"  # held at a limit the log does not name: its power plateau says so (power_plateau)
    throttled = dropped or slowdown is not None
    if not throttled and cause in (None, "power_cap"):
        # A run that held its speed names the cap exactly when it was power-limited (power_cap's judgement).
        cause = "power_cap" if cap.limited else None
    status: VerdictStatus = "errors" if trace.errors > 0 else "throttled" if throttled else "passed"
    rising = temperature_rise(trace, rel, loaded)
    if steady_state and status == "passed" and _still_heating(trace, rising) and not _settles_below(said["forecast"]):
        status = "inconclusive"
    verdict = Verdict(status=status, rising_c_per_min=rising, throttled=throttled,
                      onset_s=onset, peak=peak, sustained=sustained,
                      sustained_ratio=ratio, clock_ratio=_clock_ratio(trace, run.end, ref_mhz), cause=cause,
                      cause_family=CAUSE_FAMILY.get(cause) if cause else None,
                      onset_temperature_c=_temperature_near(trace, rel, onset) if onset is not None else None,
                      cause_shares=shares, cause_seconds=seconds,
                      **said, **common)
    return _with_sentence(verdict, trace, min_load_s)


def _run_of(trace: RunTrace, time_s: FloatArray, loaded: BoolArray,
            raw_signal: FloatArray) -> tuple[JudgedRun, float, float]:
    """The run's time line, load and reference stretch; with its sample step and its span (s)."""
    interval_s = sample_intervals(time_s)
    step = float(np.median(interval_s))
    first = int(np.flatnonzero(loaded)[0])
    rel = time_s - time_s[first]
    span = float(rel[np.flatnonzero(loaded)[-1]]) + step
    signal = np.where(loaded, raw_signal, np.nan)
    warmup = min(WARMUP_S, span / 6.0)
    reference = loaded & (rel >= warmup) & (rel <= warmup + min(REFERENCE_WINDOW_S, span / 3.0))
    if not reference.any():
        reference = loaded.copy()
    run = JudgedRun(rel=rel, interval_s=interval_s, loaded=loaded, signal=signal,
                    smooth=rolling_median(signal, max(1, round(SMOOTH_WINDOW_S / step))), reference=reference,
                    end=loaded & (rel >= span * 2.0 / 3.0), warmup_s=warmup,
                    causes=cause_times(trace.clock_event_reasons, trace.cause_time_s, interval_s))
    return run, step, span


def _settles_below(forecast: TemperatureForecast | None) -> bool:
    """The forecast's whole interval lies below the slowdown temperature: heating, but towards a safe level."""
    return forecast is not None and forecast.slowdown_c is not None and forecast.interval_c[1] < forecast.slowdown_c


def _forecast(trace: RunTrace, time_s: FloatArray, loaded: BoolArray) -> _Forecast:
    """Where a stress run's temperature settles (``advisor.forecast``), or why that cannot be said."""
    found = run_forecast(time_s, trace.temperature_c, loaded, trace.temp_slowdown_c,
                         reason_bits(trace.clock_event_reasons, loaded.shape[0]))
    return _Forecast(forecast=found if isinstance(found, TemperatureForecast) else None,
                     forecast_unavailable=found if isinstance(found, str) else None)


class _Forecast(TypedDict):
    """A stress run's temperature forecast (``advisor.forecast``), or why there is none."""

    forecast: TemperatureForecast | None
    forecast_unavailable: str | None


class _Common(PowerFields):
    """The Verdict fields every judged run gets the same way, passed whole to both of ``judge``'s answers."""

    unit: str
    basis: Basis
    errors: int
    checks: int
    duration_s: float
    load_s: float
    cause_timing: CauseTiming
    sm_clock_max_mhz: float | None
    sm_clock_max_source: ClockMaxSource | None
    power_limit_steps: list[dict[str, object]]
    clock_reference_mhz: float | None
    clock_reference_basis: ClockBasis | None


def _clock_reference(trace: RunTrace, loaded: BoolArray, reference: BoolArray | None, clock_max: float | None,
                     step: float) -> ClockReference | None:
    """What the clock is measured against (``advisor.clock_reference``): never a V/F top the run did not reach;
    without a ``reference`` stretch (the limit moved during the run) never the early level either."""
    early = highest = None
    if trace.sm_clock_mhz is not None:
        n = loaded.shape[0]
        clock = np.where(loaded, np.asarray(trace.sm_clock_mhz, dtype=np.float64)[:n], np.nan)
        if np.isfinite(clock).any():
            highest = float(np.nanmax(clock))
            if reference is not None:
                window = max(1, min(round(REFERENCE_SMOOTH_S / step), int(reference.sum())))
                early = best_level(clock, reference & np.isfinite(clock), window)
    return choose_reference(calibration_mhz=trace.sm_clock_calibration_mhz, reported_max_mhz=clock_max,
                            reported_from_log=trace.sm_clock_max_source == "log", highest_loaded_mhz=highest,
                            early_mhz=early, boost_mhz=trace.sm_clock_boost_mhz)


def temperature_rise(trace: RunTrace, rel: FloatArray, loaded: BoolArray) -> float | None:
    """°C per minute over the last ``RISING_WINDOW_S`` of the load (least squares); None without 10 readings."""
    if trace.temperature_c is None:
        return None
    temps = np.asarray(trace.temperature_c, dtype=np.float64)[:rel.shape[0]]
    end = float(rel[np.flatnonzero(loaded)[-1]])
    window = loaded[:temps.shape[0]] & (rel[:temps.shape[0]] >= end - RISING_WINDOW_S) & np.isfinite(temps)
    if int(window.sum()) < 10:
        return None
    t, y = rel[:temps.shape[0]][window], temps[window]
    if float(t[-1] - t[0]) <= 0.0:
        return None
    slope = float(np.polyfit(t, y, 1)[0])
    return slope * 60.0


def _still_heating(trace: RunTrace, rising: float | None) -> bool:
    """Rising faster than ``RISING_C_PER_MIN`` and, at that rate, reaching the slowdown temperature soon."""
    if rising is None or rising <= RISING_C_PER_MIN or trace.temperature_c is None:
        return False
    if not trace.temp_slowdown_c:
        return True
    temps = trace.temperature_c[np.isfinite(trace.temperature_c)]
    last = float(temps[-1])
    if last >= trace.temp_slowdown_c:  # at the limit already: no longer a question of time
        return False
    return last + rising * RISING_HORIZON_S / 60.0 >= trace.temp_slowdown_c


def _no_data(trace: RunTrace, basis: Basis, unit: str) -> Verdict:
    errors = (f"{count_text(trace.errors, 'result error')} in {count_text(trace.checks, 'check')} — "
              "the GPU computed wrong results. "
              if trace.errors else "")
    return Verdict(status="errors" if trace.errors else "no_data", throttled=False, onset_s=None, peak=math.nan,
                   sustained=math.nan, sustained_ratio=math.nan, unit=unit, basis=basis, clock_ratio=None, cause=None,
                   cause_family=None, onset_temperature_c=None, errors=trace.errors, checks=trace.checks,
                   sentence=errors + "Not enough samples under load for a throttle verdict.")


def _signal(trace: RunTrace) -> tuple[Basis, str, FloatArray | None]:
    if trace.throughput is not None and np.isfinite(trace.throughput).any() and np.nanmax(trace.throughput) > 0:
        return "throughput", trace.unit, np.asarray(trace.throughput, dtype=np.float64)
    if trace.sm_clock_mhz is not None and np.isfinite(trace.sm_clock_mhz).any():
        return "clock", "MHz", np.asarray(trace.sm_clock_mhz, dtype=np.float64)
    return "throughput", trace.unit, None


def _load_mask(trace: RunTrace, signal: FloatArray | None, basis: Basis, n: int) -> BoolArray:
    """Samples under load: the workload's own throughput says so; for a clock, the utilization and the idle bit do."""
    if signal is None:
        return np.zeros(n, dtype=bool)
    loaded: BoolArray = np.isfinite(signal[:n])
    if basis == "throughput":
        return loaded
    util = trace.utilization_gpu_pct
    if util is not None and np.isfinite(util).any():
        loaded &= ~(util[:n] < LOAD_UTIL_PCT)  # unknown utilization in a sample: keep it
    bits = reason_bits(trace.clock_event_reasons, n)
    if bits is not None:
        loaded &= (bits & int(ClockEventReason.GPU_IDLE)) == 0
    return loaded


def _clock_ratio(trace: RunTrace, mask: BoolArray, reference_mhz: float | None) -> float | None:
    if trace.sm_clock_mhz is None or reference_mhz is None:
        return None
    clocks = trace.sm_clock_mhz[mask]
    clocks = clocks[np.isfinite(clocks)]
    return float(np.median(clocks)) / reference_mhz if clocks.size else None


def _temperature_near(trace: RunTrace, rel: FloatArray, at_s: float) -> float | None:
    if trace.temperature_c is None:
        return None
    near = (np.abs(rel - at_s) <= 5.0) & np.isfinite(trace.temperature_c)
    return float(np.max(trace.temperature_c[near])) if near.any() else None


def _with_sentence(verdict: Verdict, trace: RunTrace, min_load_s: float) -> Verdict:
    return replace(verdict, sentence=sentence_for(verdict, trace, min_load_s))
