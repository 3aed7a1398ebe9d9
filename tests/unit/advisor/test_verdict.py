"""The throttle verdict on simulated traces: onset, cause, noise robustness, errors, history comparison."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from advisor.baseline import pick_baseline
from advisor.frame import StressResult
from advisor.signal_level import rolling_median
from advisor.verdict import RunTrace, Verdict, judge
from advisor.verdict_text import compare_with_baseline, format_duration
from desktop.telemetry.model import THERMAL_REASONS
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, Trace, parse_profile_list


def simulate(profile: str, seconds: float = 600.0, seed: int = 1) -> tuple[Trace, RunTrace]:
    """A full-load run on the simulated GPU, as the verdict would see it from the runner."""
    manual = ManualLoad()
    backend = SimulatedBackend(parse_profile_list(profile), manual, seed=seed)
    backend.model.advance(0.0)
    manual.set(0, 1.0, 12000.0)
    trace = backend.model.trace(0, 0.0, seconds, 1.0)
    p = backend.model.profiles[0]
    run = RunTrace.from_columns(trace.time_s, trace.columns, throughput=trace.throughput_tflops, unit="TFLOP/s",
                                sm_clock_max_mhz=p.sm_clock_max_mhz, power_limit_w=p.power_limit_w,
                                temp_slowdown_c=p.temp_slowdown_c)
    return trace, run


def true_thermal_onset_s(trace: Trace) -> float:
    """The simulator's own answer: the first sample with a thermal reason bit, relative to the first sample."""
    bits = trace.columns["clock_event_reasons"].astype(np.int64)
    first = int(np.flatnonzero(bits & int(THERMAL_REASONS))[0])
    return float(trace.time_s[first] - trace.time_s[0])


def test_laptop_thermal_throttling_found_with_onset_and_cause() -> None:
    trace, run = simulate("rtx4090-laptop")
    verdict = judge(run)
    assert verdict.throttled
    assert verdict.status == "throttled"
    assert verdict.cause_family == "thermal"
    assert verdict.onset_s is not None
    assert abs(verdict.onset_s - true_thermal_onset_s(trace)) <= 10.0
    assert verdict.sustained < verdict.peak * 0.95
    assert verdict.sentence.startswith(f"Throttled after {format_duration(verdict.onset_s)}: SW thermal slowdown at 8")
    assert "TFLOP/s" in verdict.sentence
    # The power cap is there from the first second; it is not what made throughput fall.
    assert verdict.cause_shares["power_cap"] > 0.2
    assert verdict.cause_shares["sw_thermal"] > 0.5


@pytest.mark.parametrize("seed", range(5))
def test_laptop_onset_holds_with_noisy_throughput(seed: int) -> None:
    trace, run = simulate("rtx4090-laptop", seed=seed)
    rng = np.random.default_rng(seed)
    assert run.throughput is not None
    noisy = run.throughput * rng.normal(1.0, 0.02, run.throughput.shape)
    noisy[rng.integers(0, noisy.size, 10)] *= 0.5  # single-sample dips (a GC pause, a sync)
    verdict = judge(RunTrace(**{**run.__dict__, "throughput": noisy}))
    assert verdict.cause_family == "thermal"
    assert verdict.onset_s is not None
    assert abs(verdict.onset_s - true_thermal_onset_s(trace)) <= 10.0


def test_clock_basis_without_throughput_finds_the_same_onset() -> None:
    trace, run = simulate("rtx4090-laptop")
    verdict = judge(RunTrace(**{**run.__dict__, "throughput": None}))
    assert verdict.basis == "clock"
    assert verdict.throttled and verdict.cause_family == "thermal"
    assert verdict.onset_s is not None and abs(verdict.onset_s - true_thermal_onset_s(trace)) <= 10.0


def test_without_reason_bits_the_temperature_names_the_cause() -> None:
    trace, run = simulate("rtx4090-laptop")
    verdict = judge(RunTrace(**{**run.__dict__, "clock_event_reasons": None}))
    assert verdict.throttled and verdict.cause_family == "thermal"
    assert verdict.onset_s is not None and abs(verdict.onset_s - true_thermal_onset_s(trace)) <= 10.0


def test_desktop_power_capping_is_named_and_not_a_drop() -> None:
    _trace, run = simulate("rtx4090")
    verdict = judge(run)
    assert verdict.cause == "power_cap" and verdict.cause_family == "power"
    assert verdict.onset_s is None
    assert verdict.sustained_ratio > 0.97
    # The simulated RTX 4090 reports Ada's 3,105 MHz V/F top; the cap holds the clock at its early level.
    assert verdict.clock_reference_basis == "early" and "3,105" not in verdict.sentence
    assert verdict.clock_ratio is not None and 0.97 <= verdict.clock_ratio <= 1.0
    assert verdict.cause_shares["power_cap"] > 0.9
    assert "power cap" in verdict.sentence


def test_power_cap_drop_is_attributed_to_power() -> None:
    """A GPU whose power cap tightens mid-run: the drop comes with the power bit, not heat."""
    n = 600
    time_s = np.arange(n, dtype=np.float64)
    throughput = np.where(time_s < 200, 100.0, 85.0)
    reasons = np.where(time_s < 200, 0.0, 0x4)
    temps = np.full(n, 70.0)
    verdict = judge(RunTrace(time_s=time_s, throughput=throughput, unit="TFLOP/s", clock_event_reasons=reasons,
                             temperature_c=temps, temp_slowdown_c=87.0, power_w=np.full(n, 300.0),
                             power_limit_w=300.0))
    assert verdict.throttled and verdict.cause == "power_cap"
    assert verdict.onset_s is not None and abs(verdict.onset_s - 200.0) <= 10.0
    assert "at the 300 W limit" in verdict.sentence


def test_steady_noisy_runs_are_never_called_throttled() -> None:
    false_positives = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(60, 900))
        time_s = np.arange(n, dtype=np.float64) + rng.uniform(-0.05, 0.05, n)
        level = rng.uniform(1.0, 200.0)
        throughput = level * rng.normal(1.0, 0.02, n)
        # Spikes both ways, as a shared desktop produces: a few samples far off.
        outliers = rng.integers(0, n, max(1, n // 50))
        throughput[outliers] *= rng.choice([0.3, 0.6, 1.4], outliers.size)
        clocks = np.round(2000.0 * rng.normal(1.0, 0.005, n) / 15.0) * 15.0
        verdict = judge(RunTrace(time_s=time_s, throughput=throughput, unit="TFLOP/s", sm_clock_mhz=clocks,
                                 sm_clock_max_mhz=2040.0, clock_event_reasons=np.zeros(n)))
        if verdict.throttled:
            false_positives.append((seed, verdict.sentence))
    assert false_positives == []


def test_result_errors_are_reported_first() -> None:
    _trace, run = simulate("rtx4090", seconds=120)
    verdict = judge(RunTrace(**{**run.__dict__, "errors": 3, "checks": 60}))
    assert verdict.status == "errors"
    assert verdict.errors == 3
    assert verdict.sentence.startswith("3 result errors in 60 checks")


def test_too_few_samples_give_no_verdict() -> None:
    verdict = judge(RunTrace(time_s=np.arange(2.0), throughput=np.ones(2)))
    assert verdict.status == "no_data" and not verdict.throttled


def _earlier(sustained: float, started_s: float, errors: int = 0) -> StressResult:
    return StressResult(run_id=1, started_s=started_s, ended_s=started_s + 600, gpu_uuid="GPU-1", gpu_name="x",
                        workload="gemm", dtype="bf16", unit="TFLOP/s", peak_throughput=sustained,
                        sustained_throughput=sustained, throttled=False, errors=errors, driver_version=None,
                        summary="", device="cuda:0")


def compare_with_history(verdict: Verdict, earlier: list[StressResult]) -> Verdict:
    """The comparison as the stress run makes it (records.judge_run): the shared baseline, then the words."""
    return compare_with_baseline(verdict, pick_baseline(earlier, "gemm", "bf16", "GPU-1", unit=verdict.unit))


def test_comparison_with_the_baseline_names_its_date() -> None:
    _trace, run = simulate("rtx4090", seconds=180)
    verdict = judge(run)
    nov_2 = 1_793_620_800.0  # 2026-11-02 12:00 UTC
    better = verdict.sustained / 0.92
    compared = compare_with_history(verdict, [_earlier(verdict.sustained, nov_2 + 86400 * 5), _earlier(better, nov_2),
                                              _earlier(better * 2, nov_2, errors=1)])
    assert compared.comparison.startswith("8 % below your baseline from 2 Nov")
    assert compared.comparison.endswith("check dust, fan mode, driver")
    same = compare_with_history(verdict, [_earlier(verdict.sustained * 1.01, nov_2)])
    assert same.comparison.startswith("within 1 % of your baseline")
    assert compare_with_history(verdict, []).comparison == ""
    # Which run: its id (when stored) and its length.
    named = compare_with_history(verdict, [dataclasses.replace(_earlier(better, nov_2), run_id=7, ended_s=nov_2 + 900)])
    assert named.comparison.startswith("8 % below your baseline from 2 Nov (run 7, 15 min)")


def test_rolling_median_ignores_nan_and_single_spikes() -> None:
    values = np.array([1.0, 1.0, 9.0, 1.0, np.nan, 1.0, 1.0])
    assert np.allclose(rolling_median(values, 5), 1.0)


def test_format_duration() -> None:
    assert format_duration(145) == "2 min 25 s"
    assert format_duration(120) == "2 min"
    assert format_duration(9.6) == "10 s"
