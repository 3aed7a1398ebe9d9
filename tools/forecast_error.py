"""How far the Quick test's temperature forecast lands from where a longer run settles (issue 32 item 8).

Two sources, each cut to its first 2 minutes of load and forecast with the verdict's own function
(``advisor.forecast.run_forecast``), then compared with where the full run settles (the mean of its
last minute of load):

- the simulated profiles, a 10-minute (Sustained) run each on an injected clock;
- the real-style nvidia-smi logs in tests/fixtures, each load segment of at least ``MIN_SEGMENT_S``
  (their temperatures come from tests/fixtures/make_nvsmi_fixtures.py, a first-order relaxation with
  real logs' levels: a check of the pipeline on log data, not an independent test of the physics).

A run that reached its slowdown temperature settles where the driver holds it, not where the free
curve was heading: there the table compares the forecast time to the slowdown with the measured one.

    python tools/forecast_error.py            # the table (Markdown)
    python tools/forecast_error.py --json     # the rows

Deterministic (fixed seeds, an injected clock); takes a few seconds. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from advisor.causes import reason_bits  # noqa: E402
from advisor.forecast import THERMAL_SLOWDOWN_BITS, TemperatureForecast, run_forecast  # noqa: E402

FloatArray = npt.NDArray[np.float64]

#: The Quick test's length and the Sustained one's (advisor.baseline).
QUICK_S = 120.0
SUSTAINED_S = 600.0
#: Where a run settled: the mean temperature over its last this many seconds of load.
SETTLED_WINDOW_S = 60.0
#: A log segment shorter than this leaves too little after the 2-minute cut to say where it settled: left out
#: (the burst logs' 40-50 s segments).
MIN_SEGMENT_S = 170.0
#: A sample is under load at this utilization (advisor.verdict.LOAD_UTIL_PCT).
LOAD_UTIL_PCT = 50.0
FIXTURES = ROOT / "tests" / "fixtures"
LOGS = ("nvsmi_h800_power_capped_gemm.csv", "nvsmi_h100_pcie_power_capped.csv", "nvsmi_h800_three_power_columns.csv",
        "nvsmi_h800_gemm_bursts.csv", "nvsmi_a10_idle_power_cap.csv")


@dataclass(frozen=True)
class Row:
    """One compared run: the forecast from its first 2 minutes and what its whole run did."""

    source: str
    forecast_c: float | None
    interval_c: tuple[float, float] | None
    settled_c: float
    #: forecast - settled (°C); None where the run was held at its slowdown (the forecast is of the free curve).
    error_c: float | None
    slowdown_c: float | None
    forecast_reaches: bool | None
    measured_reaches: bool | None
    forecast_slowdown_s: float | None
    measured_slowdown_s: float | None
    note: str = ""


def _compare(source: str, time_s: FloatArray, temps: FloatArray, *, loaded: npt.NDArray[np.bool_],
             bits: npt.NDArray[np.int64] | None, slowdown_c: float | None) -> Row:
    """The forecast from the first ``QUICK_S`` of load against the whole stretch."""
    first = float(time_s[np.flatnonzero(loaded)[0]])
    quick = loaded & (time_s < first + QUICK_S)
    cut = int(np.flatnonzero(quick)[-1]) + 1
    forecast = run_forecast(time_s[:cut], temps[:cut], quick[:cut], slowdown_c, None if bits is None else bits[:cut])
    last = float(time_s[np.flatnonzero(loaded)[-1]])
    tail = loaded & (time_s > last - SETTLED_WINDOW_S) & np.isfinite(temps)
    settled = float(np.mean(temps[tail]))
    slowed = None if bits is None else (bits & THERMAL_SLOWDOWN_BITS) != 0
    held = bool(slowed is not None and (slowed & loaded).any())
    measured_s = None
    if slowdown_c is not None:
        crossed = np.flatnonzero(loaded & (temps >= slowdown_c))
        measured_s = float(time_s[crossed[0]] - first) if crossed.size else None
    measured_reaches = None if slowdown_c is None else measured_s is not None
    if not isinstance(forecast, TemperatureForecast):
        return Row(source, None, None, settled, None, slowdown_c, None, measured_reaches, None, measured_s,
                   note=f"no forecast: {forecast}")
    error = None if held else forecast.steady_temperature_c - settled
    note = "held at its slowdown temperature by the driver: compare the times" if held else ""
    return Row(source, forecast.steady_temperature_c, forecast.interval_c, settled, error, slowdown_c,
               forecast.reaches_slowdown, measured_reaches, forecast.slowdown_after_s, measured_s, note)


#: The simulated laptop's firmware modes and battery too: Eco and battery hold it far below its slowdown.
LAPTOP_STATES: tuple[tuple[str, dict[str, object]], ...] = (
    ("Extreme Performance", {"shift_mode": "turbo"}), ("Eco", {"shift_mode": "eco"}),
    ("on battery", {"on_ac": False, "battery_pct": 80.0}))


def simulated_rows(seed: int = 3) -> list[Row]:
    """A Sustained (10-minute) GEMM run on each simulated profile (the laptop in each state too), on an
    injected clock."""
    from desktop.telemetry.simulated import load_profiles

    runs: list[tuple[str, dict[str, object]]] = [(key, {}) for key in load_profiles()]
    runs += [("rtx4090-laptop", {**state, "label": label}) for label, state in LAPTOP_STATES]
    return [_simulated_row(key, state, seed) for key, state in runs]


def _simulated_row(key: str, state: dict[str, object], seed: int) -> Row:
    from desktop.stress.devices import GpuTarget
    from desktop.stress.run_model import SimClock, StressConfig
    from desktop.stress.runner import StressRunner
    from desktop.telemetry.sampler import Sampler
    from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, load_profiles

    label = str(state.pop("label", ""))
    clock = SimClock()
    backend = SimulatedBackend([load_profiles()[key]], ManualLoad(), seed=seed)
    if state:
        backend.machine.set_envelope(**state)  # type: ignore[arg-type]
    runner = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=SUSTAINED_S),
                          Sampler(backend, clock=clock.now), clock=clock)
    result = runner.run()
    columns = result.columns
    time_s = np.asarray(result.time_s, dtype=np.float64)
    loaded = np.isfinite(result.throughput) & (result.throughput > 0)
    bits = reason_bits(columns.get("clock_event_reasons"), time_s.shape[0])
    slowdown = result.gpu.temp_slowdown_c if result.gpu is not None else None
    limit = result.extra.get("power_limit_line")
    name = f"simulated {key}{', ' + label if label else ''}, 10 min{f' ({limit})' if limit and label else ''}"
    return _compare(name, time_s, np.asarray(columns["temperature_c"]), loaded=np.asarray(loaded, dtype=bool),
                    bits=bits, slowdown_c=slowdown)


def log_rows(names: tuple[str, ...] = LOGS) -> list[Row]:
    """Each load segment of at least ``MIN_SEGMENT_S`` in the fixture logs."""
    from advisor.log_verdict import load_segments
    from desktop.history.nvsmi_csv import parse_nvsmi_csv

    rows = []
    for name in names:
        imported = parse_nvsmi_csv(FIXTURES / name)
        for (series_s, columns) in imported.series.values():
            time_s = np.asarray(series_s, dtype=np.float64)
            util = columns.get("utilization_gpu_pct")
            temps = columns.get("temperature_c")
            if temps is None:
                continue
            for number, segment in enumerate(load_segments(time_s, util), start=1):
                part = slice(segment.start, segment.stop)
                t = time_s[part]
                if t[-1] - t[0] < MIN_SEGMENT_S:
                    continue
                loaded = np.ones(t.shape[0], dtype=bool) if util is None else ~(util[part] < LOAD_UTIL_PCT)
                bits = reason_bits(columns.get("clock_event_reasons"), time_s.shape[0])
                rows.append(_compare(f"{name} segment {number} ({t[-1] - t[0]:.0f} s)", t,
                                     np.asarray(temps[part], dtype=np.float64), loaded=np.asarray(loaded, dtype=bool),
                                     bits=None if bits is None else bits[part], slowdown_c=None))
    return rows


def _c(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| run (first 2 min forecast) | forecast °C | interval °C | settled °C | error °C | slowdown °C | "
             "reaches: forecast / measured | time to slowdown s: forecast / measured | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        interval = "—" if r.interval_c is None else f"{r.interval_c[0]:.1f}-{r.interval_c[1]:.1f}"
        error = "—" if r.error_c is None else f"{r.error_c:+.1f}"
        lines.append(f"| {r.source} | {_c(r.forecast_c)} | {interval} | {r.settled_c:.1f} | {error} | "
                     f"{_c(r.slowdown_c)} | {_yes(r.forecast_reaches)} / {_yes(r.measured_reaches)} | "
                     f"{_c(r.forecast_slowdown_s)} / {_c(r.measured_slowdown_s)} | {r.note} |")
    errors = [abs(r.error_c) for r in rows if r.error_c is not None]
    inside = [r for r in rows if r.error_c is not None and r.interval_c is not None
              and r.interval_c[0] <= r.settled_c <= r.interval_c[1]]
    if errors:
        lines.append("")
        lines.append(f"Free-heating runs: {len(errors)}; mean |error| {np.mean(errors):.2f} °C, "
                     f"max {max(errors):.2f} °C; settled inside the interval: {len(inside)} of {len(errors)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = simulated_rows() + log_rows()
    sys.stdout.write((json.dumps([asdict(r) for r in rows], indent=2) if args.json else table(rows)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
