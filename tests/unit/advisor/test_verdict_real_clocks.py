"""The verdict on real clocks (issue 11, defect 5): a power cap is not throttling, a fall or a slowdown is.

Figures from public captures (../shared/realdata/README.md and the nvidia-smi -q files it
lists): every Ada card reports a 3105 MHz max SM clock it never sustains; an H800 FP16 GEMM
has the SW power cap bit in ~77 % of loaded samples at 1425-1965 MHz (median 1800) of a
1980 MHz max; A10, A40 and RTX 5090 report SW power cap Active at idle.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from advisor.causes import CAUSE_COUNTER_FIELDS
from advisor.verdict import RunTrace, judge
from desktop.history.nvsmi_csv import parse_nvsmi_csv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def power_capped_clocks(n: int, seed: int, median_mhz: float = 1800.0, share: float = 0.77) -> tuple[
        np.ndarray, np.ndarray]:
    """An H800-like GEMM at its power cap: (SM clock, reason mask) per second, the cap bit in ``share`` of samples."""
    rng = np.random.default_rng(seed)
    capped = rng.random(n) < share
    clocks = np.where(capped, rng.normal(median_mhz - 40.0, 70.0, n), rng.normal(median_mhz + 90.0, 40.0, n))
    return np.clip(np.round(clocks / 15.0) * 15.0, 1425.0, 1965.0), np.where(capped, 4.0, 0.0)


def percentages(sentence: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) %", sentence)]


def test_gemm_at_its_power_limit_from_the_first_second_held_its_speed() -> None:
    """The old verdict called a GPU held at 80 % of its max clock by the power cap "throttled all run"."""
    n = 300
    time_s = np.arange(n, dtype=np.float64)
    verdict = judge(RunTrace(time_s=time_s, throughput=np.full(n, 50.0), unit="TFLOP/s",
                             sm_clock_mhz=np.full(n, 1632.0), sm_clock_max_mhz=2040.0,
                             clock_event_reasons=np.full(n, 0x4), power_limit_w=300.0))
    assert not verdict.throttled and verdict.status == "passed"
    assert verdict.cause == "power_cap" and verdict.power_limited
    assert verdict.sentence.startswith("Held its speed at its 300 W power limit")
    assert "80 % of the GPU's reported max (2,040 MHz)" in verdict.sentence


def test_h800_power_capped_clock_dither_is_not_a_fall() -> None:
    """Clock basis (a log without throughput): 1 Hz dither under the cap must not read as a drop."""
    for seed in range(20):
        clocks, reasons = power_capped_clocks(600, seed)
        verdict = judge(RunTrace(time_s=np.arange(600.0), sm_clock_mhz=clocks, sm_clock_max_mhz=1980.0,
                                 clock_event_reasons=reasons, power_limit_w=700.0,
                                 utilization_gpu_pct=np.full(600, 100.0)))
        assert verdict.status == "passed", (seed, verdict.sentence)
        assert verdict.sustained_ratio >= 0.97
        assert verdict.power_limited and abs(verdict.cause_shares["power_cap"] - 0.77) < 0.06
        assert "at its 700 W power limit" in verdict.sentence


def test_ada_max_clock_of_3105_mhz_is_not_the_reference() -> None:
    """RTX 4090 (nvsmi_q_RTX4090.txt: max SM 3105 MHz, 450 W limit) at its power cap around 2,650 MHz."""
    rng = np.random.default_rng(4090)
    n = 600
    clocks = np.round(rng.normal(2650.0, 40.0, n) / 15.0) * 15.0
    verdict = judge(RunTrace(time_s=np.arange(float(n)), throughput=rng.normal(160.0, 2.0, n), unit="TFLOP/s",
                             sm_clock_mhz=clocks, sm_clock_max_mhz=3105.0, power_limit_w=450.0,
                             clock_event_reasons=np.where(rng.random(n) < 0.7, 4.0, 0.0)))
    assert verdict.status == "passed" and not verdict.throttled
    # 3,105 MHz is the V/F curve's top, never reached: the run's early sustained clock is the reference.
    assert "3,105" not in verdict.sentence and verdict.clock_reference_basis == "early"
    assert "of its early sustained clock (2,6" in verdict.sentence


def test_a_clock_that_falls_under_the_power_cap_is_throttled() -> None:
    """Same cap, but the clock sinks as the GPU heats (more leakage, less clock per watt): that is a fall."""
    n = 600
    clocks, _reasons = power_capped_clocks(n, seed=3)
    clocks = clocks - np.clip((np.arange(n) - 200.0) * 0.8, 0.0, 240.0)
    verdict = judge(RunTrace(time_s=np.arange(float(n)), sm_clock_mhz=clocks, sm_clock_max_mhz=1980.0,
                             clock_event_reasons=np.full(n, 4.0), power_limit_w=700.0))
    assert verdict.throttled and verdict.cause == "power_cap"
    assert verdict.onset_s is not None and 150.0 <= verdict.onset_s <= 260.0
    assert verdict.sentence.startswith("Throttled after ")
    assert "sustained clock 8" in verdict.sentence and "MHz)" in verdict.sentence


def test_thermal_slowdown_appearing_is_throttled_even_before_throughput_falls() -> None:
    n = 600
    time_s = np.arange(float(n))
    reasons = np.where((time_s >= 220) & (time_s % 4 == 0), 0x20, 0x4).astype(np.float64)
    temps = np.where(time_s < 220, 70.0 + time_s / 20.0, 84.0)
    verdict = judge(RunTrace(time_s=time_s, throughput=np.full(n, 100.0), unit="TFLOP/s",
                             clock_event_reasons=reasons, temperature_c=temps, temp_slowdown_c=87.0))
    assert verdict.throttled and verdict.cause == "sw_thermal"
    assert verdict.onset_s == 220.0
    assert verdict.sentence.startswith("Throttled after 3 min 40 s: SW thermal slowdown at 84 °C (")
    assert "sustained throughput 100 % of its early sustained level" in verdict.sentence


def test_a_gpu_held_down_by_temperature_from_the_first_second_is_throttled_from_the_start() -> None:
    """An MX330 laptop whose platform sets max operating 57 C (realdata README): SW thermal slowdown all run."""
    n = 300
    verdict = judge(RunTrace(time_s=np.arange(float(n)), throughput=np.full(n, 1.2), unit="TFLOP/s",
                             clock_event_reasons=np.full(n, 0x20), temperature_c=np.full(n, 57.0)))
    assert verdict.throttled and verdict.cause == "sw_thermal" and verdict.onset_s == 0.0
    assert verdict.sentence.startswith("Throttled from the start: SW thermal slowdown at 57 °C (")


def test_sw_power_cap_at_idle_does_not_count(tmp_path: Path) -> None:
    """A10 (nvsmi_q_A10.txt) reports SW power cap Active in P8 with no load; only loaded samples count."""
    imported = parse_nvsmi_csv(FIXTURES / "nvsmi_a10_idle_power_cap.csv")
    ((time_s, columns),) = imported.series.values()
    verdict = judge(RunTrace.from_columns(time_s, columns, sm_clock_max_mhz=1695.0, power_limit_w=150.0))
    assert verdict.status == "passed" and not verdict.throttled
    assert verdict.cause_shares["power_cap"] == 0.0 and verdict.cause is None
    assert "power" not in verdict.sentence
    assert abs(verdict.load_s - 180.0) <= 2.0


def test_no_ratio_above_100_percent_reaches_a_sentence() -> None:
    """A run that gets faster (a long warm-up): the peak is the best level seen, so the ratio stays <= 100 %."""
    n = 300
    time_s = np.arange(float(n))
    throughput = np.where(time_s < 90, 80.0, 100.0)
    verdict = judge(RunTrace(time_s=time_s, throughput=throughput, unit="TFLOP/s"))
    assert not verdict.throttled and verdict.sustained_ratio <= 1.0
    assert max(percentages(verdict.sentence)) <= 100.0


# --- exact time under each cause (NVML's clock-event counters, issue 11 section 4) -----------

def _counter_columns(n: int) -> dict[str, np.ndarray]:
    """Seconds under each cause since the previous 1 Hz sample."""
    columns = {name: np.zeros(n) for name in CAUSE_COUNTER_FIELDS.values()}
    columns["clock_event_sw_thermal_s"][143:] = 0.25  # short episodes the 1 Hz bits catch only from 150 s
    columns["clock_event_sw_power_cap_s"][:] = 0.5
    return columns


def test_exact_counters_give_the_time_and_the_onset() -> None:
    n = 400
    time_s = 1_000.0 + np.arange(float(n))
    throughput = np.where(np.arange(n) < 150, 100.0, 80.0)
    reasons = np.where(np.arange(n) < 150, 0x4, 0x24).astype(np.float64)
    columns = {"clock_event_reasons": reasons, "temperature_c": np.full(n, 86.0), **_counter_columns(n)}
    verdict = judge(RunTrace.from_columns(time_s, columns, throughput=throughput, unit="TFLOP/s",
                                          temp_slowdown_c=87.0))
    assert verdict.cause_timing == "counters"
    assert verdict.throttled and verdict.cause == "sw_thermal"
    assert verdict.onset_s == 143.0  # the first sample whose counter grew, before any bit showed it
    assert abs(verdict.cause_seconds["sw_thermal"] - 0.25 * (n - 143)) < 1e-6
    assert abs(verdict.cause_shares["sw_thermal"] - 0.25 * (n - 143) / n) < 1e-6
    # The bits alone would say 100 % of the time from 150 s and 100 % power cap.
    assert abs(verdict.cause_shares["power_cap"] - 0.5) < 1e-6


def test_unsupported_counters_fall_back_to_the_bits() -> None:
    n = 400
    time_s = np.arange(float(n))
    throughput = np.where(time_s < 150, 100.0, 80.0)
    reasons = np.where(time_s < 150, 0x4, 0x24).astype(np.float64)
    columns = {"clock_event_reasons": reasons, **{name: np.full(n, np.nan) for name in CAUSE_COUNTER_FIELDS.values()}}
    verdict = judge(RunTrace.from_columns(time_s, columns, throughput=throughput, unit="TFLOP/s"))
    assert verdict.cause_timing == "samples"
    assert verdict.throttled and verdict.cause == "sw_thermal"
    assert verdict.onset_s is not None and abs(verdict.onset_s - 150.0) <= 2.0
    assert abs(verdict.cause_seconds["sw_thermal"] - 250.0) <= 1.0


def test_counters_count_only_under_load() -> None:
    """The power-cap counter runs at idle too (A10 / A40 / RTX 5090): idle seconds are not load seconds."""
    n = 300
    time_s = np.arange(float(n))
    util = np.where((time_s >= 60) & (time_s < 240), 100.0, 0.0)
    columns = {"utilization_gpu_pct": util, "sm_clock_mhz": np.where(util > 0, 1695.0, 0.0),
               **{name: np.zeros(n) for name in CAUSE_COUNTER_FIELDS.values()}}
    columns["clock_event_sw_power_cap_s"] = np.where(util > 0, 0.0, 1.0)
    verdict = judge(RunTrace.from_columns(time_s, columns, sm_clock_max_mhz=1695.0))
    assert verdict.cause_seconds["power_cap"] == 0.0 and verdict.cause is None
    assert verdict.status == "passed"
