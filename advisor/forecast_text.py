"""The temperature forecast in words, and the Quick test's sentence for a run that ended still heating up.

A forecast is always said as one ("forecast, not measured"), with its interval and what it rests on;
what the run did measure (the power limit in force, clocks against their reference, throughput) is
said first. Pure Python.
"""

from __future__ import annotations

from advisor.baseline import INCONCLUSIVE_PREFIX
from advisor.forecast import TemperatureForecast
from advisor.verdict_model import Verdict
from advisor.wording import format_duration

#: Still warming faster than this (°C per minute) at the end: a short run's forecast is said (the same line
#: as ``advisor.verdict.RISING_C_PER_MIN``, which cannot be imported here: verdict imports this module's words).
WARMING_C_PER_MIN = 1.0

#: What the verdict says to measure what a forecast only estimates.
LONGER_TEST = "the Sustained preset, or `rigscope stress --minutes 10`"


def _load_length(seconds: float) -> str:
    """The load's length as the preset named it: "2 min" for 121 s of 1 Hz samples (the last sample's second
    counts), else to the second."""
    minutes = round(seconds / 60.0)
    if minutes >= 1 and abs(seconds - 60.0 * minutes) <= 2.0:
        return f"{minutes} min"
    return format_duration(seconds)


def forecast_clause(forecast: TemperatureForecast) -> str:
    """ "forecast, not measured: the temperature settles near 100 °C (99-101 °C; ...), above its 87 °C slowdown
    temperature, which it reaches after about 2 min 25 s of load: a longer run will likely throttle"."""
    lo, hi = forecast.interval_c
    text = (f"forecast, not measured: the temperature settles near {forecast.steady_temperature_c:.0f} °C "
            f"({lo:.0f}-{hi:.0f} °C; a first-order fit of {format_duration(forecast.fit_to_s)} of heating, "
            f"time constant {format_duration(forecast.time_constant_s)})")
    slowdown = forecast.slowdown_c
    if slowdown is None:
        return text + "; its slowdown temperature is unknown"
    if forecast.straddles_slowdown:
        return text + f", around its {slowdown:.0f} °C slowdown temperature: a longer run decides"
    if forecast.reaches_slowdown:
        when = (f", which it reaches after about {format_duration(forecast.slowdown_after_s)} of load"
                if forecast.slowdown_after_s is not None else "")
        return text + f", above its {slowdown:.0f} °C slowdown temperature{when}: a longer run will likely throttle"
    return text + f", below its {slowdown:.0f} °C slowdown temperature: no thermal slowdown expected at this load"


def forecast_title(verdict: Verdict) -> str | None:
    """The verdict card's title for a run that held its speed and carries a forecast (None otherwise)."""
    forecast = verdict.forecast
    if forecast is None or verdict.status not in ("inconclusive", "passed") or forecast.slowdown_c is None:
        return None
    if verdict.status == "passed" and not still_warming(verdict):
        return None  # at its steady temperature: the verdict is a measurement, not a forecast
    if forecast.straddles_slowdown:
        return "Held its speed so far; forecast: near its slowdown temperature"
    if forecast.reaches_slowdown:
        return "Held its speed so far; forecast: reaches its slowdown temperature"
    return "Held its speed so far; forecast: stays below its slowdown temperature"


def still_warming(verdict: Verdict) -> bool:
    """The run's temperature still rose faster than ``WARMING_C_PER_MIN`` at its end."""
    return (verdict.rising_c_per_min or 0.0) > WARMING_C_PER_MIN


def still_heating_sentence(verdict: Verdict, cap: str, clock: str, figures: str) -> str:
    """An inconclusive run (still heating up at the end): why, then what its load could judge, then the forecast.

    ``cap`` is the power-cap clause, ``clock`` the clock against its reference ("clock at 99 % of ..."),
    ``figures`` the sustained throughput: each "" where unknown.
    """
    rising = verdict.rising_c_per_min or 0.0
    text = (f"{INCONCLUSIVE_PREFIX} not at thermal steady state (still rising {rising:.1f} °C/min) — run a longer "
            f"test ({LONGER_TEST}) to measure the heat")
    held = f"held its speed{' ' if cap.startswith('at ') else ': '}{cap}" if cap else "held its speed"
    parts = [f"what {_load_length(verdict.load_s)} of load can judge: {held}", figures]
    if clock and clock.removeprefix("clock at ") not in cap:
        parts.append(clock)
    if verdict.forecast is not None:
        parts.append(forecast_clause(verdict.forecast))
    elif verdict.forecast_unavailable:
        parts.append(f"no temperature forecast: {verdict.forecast_unavailable}")
    return text + "; " + "; ".join(p for p in parts if p)
