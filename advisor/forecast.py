"""Where a stress run's temperature settles: a first-order fit of its heating curve, always said as a forecast.

A GPU under a steady load heats like a first-order system (one thermal mass behind one thermal
resistance, the simulated GPU's own model):

    T(t) = T_inf - (T_inf - T0) * exp(-t / tau)

For a fixed ``tau`` that is a straight line in ``exp(-t/tau)``, so the fit is linear least squares
over a grid of time constants, refined around the best. The uncertainty comes from the data: a
moving-block bootstrap of the fit's residuals (blocks keep the sensor's 1 °C steps and slow drifts
together) refitted ``BOOTSTRAP_RUNS`` times; the interval is the 2.5-97.5th percentile of ``T_inf`` (on
synthetic noisy 2-minute curves it held the true value in 86-92 % of runs: a percentile bootstrap of an
extrapolation is a little narrow, so the 95 % one is used for a ~90 % promise; tests/unit/advisor/test_forecast.py).
A curve that has not bent yet (the best ``tau`` at the top of the grid, or far beyond the time
fitted) cannot tell where it settles: no forecast then, with the reason.

The fit reads the load from ``SKIP_S`` after its start (the die's own fast rise) up to the first thermal
slowdown (after it the driver holds the temperature, which is no longer the free heating curve); time is
counted from the start of the load. Pure numpy; deterministic for a seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The fit starts this long after the load does (less where that would leave under ``MIN_FIT_S``): a real GPU
#: heats as two masses, the die in seconds and the heatsink in minutes, and a fit from the first second takes
#: the die's jump for the whole curve. A synthetic die 8 s + heatsink 90 s curve (true level 90 °C): fitted
#: from 0 s, 80 °C; from 30 s, within 1 °C (median over seeds). With a 150 s heatsink (true 105 °C) 2 minutes
#: are too few either way: 83 °C from 0 s, ~99 °C from 30 s. Single-mass curves lose precision only (median
#: error 0.4 -> 0.8 °C, interval ~2 -> ~5 °C wide; tests/unit/advisor/test_forecast.py).
SKIP_S = 30.0
#: At least this much load, and this many readings, to fit a curve.
MIN_FIT_S = 60.0
MIN_FIT_POINTS = 20
#: Time constants tried (s): laptops 1-2 min, desktops and servers a few minutes.
TAU_GRID_S = np.geomspace(5.0, 3600.0, 161)
#: A best time constant beyond this many times the span fitted: the curve is still straight, T_inf unknown.
MAX_TAU_PER_SPAN = 3.0
#: Bootstrap refits for the interval, its percentiles, and the block length (samples).
BOOTSTRAP_RUNS = 300
INTERVAL_PCT = (2.5, 97.5)
BLOCK_SAMPLES = 10
#: A long run (a 30-minute Soak, a day) is thinned to at most this many readings, evenly: the curve is smooth,
#: and the bootstrap's (runs x readings) arrays stay a few MB (a day at 1 Hz took 9 s and ~0.5 GB unthinned).
MAX_FIT_POINTS = 1200
#: A temperature sensor reads whole °C: an interval is never narrower than this either side.
SENSOR_STEP_C = 0.5


@dataclass(frozen=True)
class FirstOrderFit:
    """``T(t) = steady_c - (steady_c - start_c) * exp(-t / tau_s)`` and how well it fits."""

    steady_c: float
    start_c: float
    tau_s: float
    rms_c: float

    def at(self, t_s: FloatArray | float) -> FloatArray:
        return np.asarray(self.steady_c - (self.steady_c - self.start_c) * np.exp(-np.asarray(t_s) / self.tau_s))

    def time_to(self, temperature_c: float) -> float | None:
        """Seconds from the start until the curve reaches ``temperature_c`` (0 if it starts there; None: never)."""
        if (temperature_c - self.start_c) * (self.steady_c - self.start_c) <= 0:
            return 0.0 if self.start_c >= temperature_c else None
        if (self.steady_c - temperature_c) * (self.steady_c - self.start_c) <= 0:
            return None
        return self.tau_s * math.log((self.steady_c - self.start_c) / (self.steady_c - temperature_c))


@dataclass(frozen=True)
class TemperatureForecast:
    """Where the temperature settles under this load, per the fit, with its interval; a forecast, not a reading."""

    steady_temperature_c: float
    interval_c: tuple[float, float]
    time_constant_s: float
    start_c: float
    #: Seconds of load fitted; ``fit_to_s``: where that stretch ends (counted from the start of the load).
    fitted_s: float
    rms_c: float
    slowdown_c: float | None
    #: Whether the settled temperature (the point forecast) is at or above the slowdown temperature; None: unknown.
    reaches_slowdown: bool | None
    #: Seconds of load after which the fitted curve crosses the slowdown temperature; None: it does not.
    slowdown_after_s: float | None
    fit_to_s: float = 0.0

    @property
    def fit_from_s(self) -> float:
        return self.fit_to_s - self.fitted_s

    @property
    def basis(self) -> str:
        return (f"first-order fit T(t) = T_inf - (T_inf - T0)·e^(-t/tau) of the load from {self.fit_from_s:.0f} s "
                f"to {self.fit_to_s:.0f} s (T0 {self.start_c:.0f} °C, tau {self.time_constant_s:.0f} s, "
                f"rms residual {self.rms_c:.2f} °C); "
                f"interval: {INTERVAL_PCT[0]:g}-{INTERVAL_PCT[1]:g}th percentile of a block bootstrap of the "
                "residuals")

    @property
    def straddles_slowdown(self) -> bool:
        """The interval holds the slowdown temperature: the run may or may not reach it."""
        return self.slowdown_c is not None and self.interval_c[0] < self.slowdown_c <= self.interval_c[1]

    def as_json(self) -> dict[str, object]:
        """The ``"forecast"`` object of ``rigscope stress --json``."""
        return {"steady_temperature_c": round(self.steady_temperature_c, 1),
                "interval_c": [round(self.interval_c[0], 1), round(self.interval_c[1], 1)],
                "reaches_slowdown": self.reaches_slowdown, "slowdown_c": self.slowdown_c,
                "time_constant_s": round(self.time_constant_s, 1), "start_c": round(self.start_c, 1),
                "fitted_s": round(self.fitted_s, 1), "fit_from_s": round(self.fit_from_s, 1),
                "fit_to_s": round(self.fit_to_s, 1), "slowdown_after_s":
                    None if self.slowdown_after_s is None else round(self.slowdown_after_s, 1),
                "basis": self.basis, "measured": False}


def _grid_fit(t: FloatArray, y: FloatArray, taus: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For each tau, the least-squares (T_inf, b) of ``y = T_inf + b·exp(-t/tau)`` and its squared error.

    ``y`` may be one series (n,) or several (k, n): the answers are then (k, len(taus)).
    """
    x = np.exp(-t[:, None] / taus[None, :])  # (n, g)
    xc = x - x.mean(axis=0)
    sxx = np.sum(xc * xc, axis=0)  # (g,)
    yy = np.atleast_2d(y)
    yc = yy - yy.mean(axis=1, keepdims=True)  # (k, n)
    sxy = yc @ xc  # (k, g)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(sxx > 1e-12, sxy / sxx, 0.0)
    a = yy.mean(axis=1, keepdims=True) - b * x.mean(axis=0)
    sse = np.sum(yc * yc, axis=1, keepdims=True) - b * sxy
    return a, b, sse


def fit_first_order(t_s: FloatArray, temperature_c: FloatArray) -> FirstOrderFit | None:
    """The best first-order curve through (t, T), t from the start of the load; None without a usable fit."""
    t = np.asarray(t_s, dtype=np.float64)
    y = np.asarray(temperature_c, dtype=np.float64)
    if t.size < 3:
        return None
    a, b, sse = _grid_fit(t, y, TAU_GRID_S)
    best = int(np.argmin(sse[0]))
    # Refine between the neighbours on a finer log grid.
    lo, hi = TAU_GRID_S[max(best - 1, 0)], TAU_GRID_S[min(best + 1, TAU_GRID_S.size - 1)]
    fine = np.geomspace(lo, hi, 41)
    a, b, sse = _grid_fit(t, y, fine)
    pick = int(np.argmin(sse[0]))
    tau = float(fine[pick])
    steady, offset = float(a[0, pick]), float(b[0, pick])
    rms = math.sqrt(max(float(sse[0, pick]), 0.0) / t.size)
    return FirstOrderFit(steady_c=steady, start_c=steady + offset, tau_s=tau, rms_c=rms)


def _bootstrap_steady(t: FloatArray, fit: FirstOrderFit, residuals: FloatArray, seed: int) -> FloatArray:
    """T_inf of ``BOOTSTRAP_RUNS`` refits of the curve plus moving blocks of its own residuals."""
    rng = np.random.default_rng(seed)
    n = t.size
    block = max(1, min(BLOCK_SAMPLES, n // 4))
    blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(BOOTSTRAP_RUNS, blocks))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(BOOTSTRAP_RUNS, -1)[:, :n]
    samples = fit.at(t)[None, :] + residuals[index]
    a, _b, sse = _grid_fit(t, samples, TAU_GRID_S)
    best = np.argmin(sse, axis=1)
    # A replicate whose best tau is the grid's top has no settled level: it widens the interval to that edge.
    return np.asarray(a[np.arange(BOOTSTRAP_RUNS), best], dtype=np.float64)


def forecast_temperature(time_s: FloatArray, temperature_c: FloatArray, loaded: BoolArray,
                         slowdown_c: float | None, *, stop: BoolArray | None = None,
                         seed: int = 0) -> TemperatureForecast | str:
    """The forecast for one run's load, or the reason there is none (a plain sentence).

    ``stop`` marks samples from which the curve is no longer free (a thermal slowdown): the fit
    ends before the first of them under load.
    """
    time = np.asarray(time_s, dtype=np.float64)
    temps = np.asarray(temperature_c, dtype=np.float64)[:time.size]
    use = np.asarray(loaded, dtype=bool)[:temps.size] & np.isfinite(temps)
    if not use.any():
        return "no temperature readings under load"
    first = int(np.flatnonzero(use)[0])
    if stop is not None:
        stopped = np.flatnonzero(np.asarray(stop, dtype=bool)[:temps.size] & use)
        if stopped.size:
            use &= np.arange(temps.size) < stopped[0]
    since = time[:temps.size] - time[first]
    free_s = float(since[use].max()) if use.any() else 0.0
    use &= since >= min(SKIP_S, max(0.0, free_s - MIN_FIT_S))  # t stays counted from the start of the load
    t, y = since[use], temps[use]
    if t.size > MAX_FIT_POINTS:
        keep = np.unique(np.linspace(0, t.size - 1, MAX_FIT_POINTS).round().astype(np.int64))
        t, y = t[keep], y[keep]
    span = float(t[-1] - t[0]) if t.size else 0.0
    if t.size < MIN_FIT_POINTS or span < MIN_FIT_S:
        return (f"too little free heating to fit ({span:.0f} s, {t.size} readings under load before any slowdown; "
                f"needs {MIN_FIT_S:.0f} s)")
    fit = fit_first_order(t, y)
    if fit is None or fit.tau_s >= TAU_GRID_S[-1] * 0.999 or fit.tau_s > MAX_TAU_PER_SPAN * span:
        return (f"the heating curve is still nearly straight after {float(t[-1]):.0f} s: where it settles cannot "
                "be told from it (run the Sustained test)")
    residuals = y - fit.at(t)
    boot = _bootstrap_steady(t, fit, residuals, seed)
    lo, hi = (float(v) for v in np.percentile(boot, INTERVAL_PCT))
    lo, hi = min(lo, fit.steady_c - SENSOR_STEP_C), max(hi, fit.steady_c + SENSOR_STEP_C)
    reaches = None if not slowdown_c else fit.steady_c >= slowdown_c
    after = fit.time_to(slowdown_c) if slowdown_c else None
    return TemperatureForecast(steady_temperature_c=fit.steady_c, interval_c=(lo, hi), time_constant_s=fit.tau_s,
                               start_c=fit.start_c, fitted_s=span, rms_c=fit.rms_c, slowdown_c=slowdown_c,
                               reaches_slowdown=reaches, slowdown_after_s=after,
                               fit_to_s=float(t[-1]))


#: Reasons whose bits end the free heating curve (the driver holds the temperature from there).
THERMAL_SLOWDOWN_BITS = 0x8 | 0x20 | 0x40


def run_forecast(time_s: FloatArray, temperature_c: FloatArray | None, loaded: BoolArray, slowdown_c: float | None,
                 reason_bits: npt.NDArray[np.int64] | None) -> TemperatureForecast | str:
    """A stress run's forecast (``forecast_temperature``), or why there is none: no readings, or a slowdown the
    run measured itself (a measurement beats a forecast)."""
    if temperature_c is None:
        return "no temperature readings"
    stop = None
    if reason_bits is not None:
        stop = (reason_bits[:loaded.shape[0]] & THERMAL_SLOWDOWN_BITS) != 0
        if bool((stop & loaded[:stop.shape[0]]).any()):
            return "the run reached a thermal slowdown: measured, not forecast"
    return forecast_temperature(time_s, temperature_c, loaded, slowdown_c, stop=stop)
