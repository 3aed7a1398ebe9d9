"""Effective load: the estimate from power and clock against a calibration, and the advice rule on it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from advisor.effective_load import (
    MIN_CLOCK_RATIO,
    Calibration,
    at_power_cap,
    estimate,
    estimate_array,
    from_stress_run,
    rough_calibration,
)
from advisor.frame import GpuSeries
from advisor.rules import run_rules
from advisor.thresholds import Thresholds
from tests.unit.advisor.crafted import busy_mask, frame, gpu, laptop_meta

#: A card drawing 110 W flat out at 2,000 MHz and 10 W at rest.
CAL = Calibration(idle_w=10.0, full_w=110.0, full_clock_mhz=2000.0)
BUSY = busy_mask()


# --- the estimate ------------------------------------------------------------------------------


def test_share_of_the_dynamic_power_at_the_calibration_clock() -> None:
    assert estimate(CAL, 60.0, 2000.0, 100.0) == pytest.approx(50.0)
    assert estimate(CAL, 110.0, 2000.0, 100.0) == pytest.approx(100.0)
    assert estimate(CAL, 10.0, 2000.0, 100.0) == pytest.approx(0.0)


def test_full_power_scales_with_the_cube_of_the_clock() -> None:
    # At half the clock a full load draws 10 + 100 / 8 W: a throttled GPU at full tilt is still 100 %.
    assert estimate(CAL, 22.5, 1000.0, 100.0) == pytest.approx(100.0)
    assert estimate(CAL, 16.25, 1000.0, 100.0) == pytest.approx(50.0)
    # Above the calibration clock a full load draws more than full_w: 110 W there is less than 100 %.
    assert estimate(CAL, 110.0, 2200.0, 100.0) == pytest.approx(100.0 / 1.331, abs=0.1)


def test_clipped_to_0_100_and_never_above_utilization() -> None:
    assert estimate(CAL, 300.0, 2000.0, 100.0) == 100.0
    assert estimate(CAL, 5.0, 2000.0, 100.0) == 0.0
    assert estimate(CAL, 110.0, 2000.0, 40.0) == 40.0  # busier than kernels ran is impossible
    # Idle: the clock collapses, noise over idle power would read as load; utilization 0 keeps it 0.
    assert estimate(CAL, 10.4, 210.0, 0.0) == 0.0


def test_no_load_at_a_low_clock_reads_100_percent_by_construction() -> None:
    """The old floor (0.3 of the calibration clock, cubed: 2.7 % of the dynamic power) read any load there at 100 %."""
    assert estimate(CAL, 12.7, 210.0, None) is None  # 2.7 W over idle at a tenth of the clock: not estimated
    assert estimate(CAL, 30.0, 0.45 * 2000.0, 60.0) is None  # under half the calibration clock: the voltage floor
    assert estimate(CAL, 10.4, 210.0, 0.0) == 0.0  # no kernel ran: 0, whatever the clock
    # From half the calibration clock up the law holds: a third of the full load reads a third.
    for ratio in (0.5, 0.7, 1.0):
        third = CAL.idle_w + (CAL.full_w - CAL.idle_w) * ratio ** 3 / 3.0
        assert estimate(CAL, third, ratio * CAL.full_clock_mhz, 100.0) == pytest.approx(33.3, abs=0.1)
    assert MIN_CLOCK_RATIO == 0.5


def test_a_compute_bound_gemm_at_its_power_cap_never_reads_under_80_percent() -> None:
    """Real-shaped H800 / H100 PCIe GEMM logs (tests/fixtures): the cube law read them at 42-64 %.

    Each is judged against its own stress-run calibration (its load's settled half), the only one
    a real GPU is estimated against."""
    from desktop.history.nvsmi_csv import parse_nvsmi_csv

    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    for name, limit_w in (("nvsmi_h800_power_capped_gemm.csv", 700.0), ("nvsmi_h800_three_power_columns.csv", 700.0),
                          ("nvsmi_h800_gemm_bursts.csv", 700.0), ("nvsmi_h100_pcie_power_capped.csv", 350.0)):
        ((_time_s, c),) = parse_nvsmi_csv(fixtures / name).series.values()
        load = c["utilization_gpu_pct"] >= 50.0
        cal = from_stress_run(100.0 if limit_w == 700.0 else 48.0, c["power_w"][load], c["sm_clock_mhz"][load], None)
        assert cal is not None
        effective = estimate_array(cal, c["power_w"], c["sm_clock_mhz"], c["utilization_gpu_pct"],
                                   power_limit_w=limit_w, clock_event_reasons=c.get("clock_event_reasons"))[load]
        assert np.isfinite(effective).all() and float(effective.min()) >= 80.0, (name, float(effective.min()))
    # A memory-bound load under the same calibration still reads what it is: never capped, a third.
    hollow = estimate_array(Calibration(100.0, 700.0, 1800.0, "stress run"), [300.0] * 10, [1800.0] * 10,
                            [97.0] * 10, power_limit_w=700.0, clock_event_reasons=[0] * 10)
    assert hollow == pytest.approx(np.full(10, 33.3), abs=0.1)


def test_missing_values() -> None:
    assert estimate(CAL, None, 2000.0, 100.0) is None
    assert estimate(CAL, 60.0, None, None) == pytest.approx(50.0)  # no clock: taken at the calibration clock
    arr = estimate_array(CAL, [60.0, np.nan, 60.0], [2000.0, 2000.0, np.nan], [np.nan, 100.0, 30.0])
    assert arr[0] == pytest.approx(50.0) and math.isnan(arr[1]) and arr[2] == pytest.approx(30.0)


def test_an_unusable_calibration_is_refused() -> None:
    with pytest.raises(ValueError):
        Calibration(idle_w=50.0, full_w=40.0, full_clock_mhz=2000.0)
    with pytest.raises(ValueError):
        Calibration(idle_w=5.0, full_w=40.0, full_clock_mhz=0.0)


def test_calibration_from_a_stress_run_uses_its_settled_half() -> None:
    # Boost first (2,200 MHz at 150 W), then settled at 1,800 MHz and 140 W.
    power = np.r_[np.full(60, 150.0), np.full(60, 140.0)]
    clock = np.r_[np.full(60, 2200.0), np.full(60, 1800.0)]
    clock[100] = np.nan  # a missed reading is skipped, not averaged as 0
    cal = from_stress_run(12.0, power, clock, 61.5)
    assert cal is not None
    assert (cal.idle_w, cal.full_w, cal.full_clock_mhz, cal.source, cal.tflops) == (12.0, 140.0, 1800.0,
                                                                                     "stress run", 61.5)
    assert cal.describe() == "estimated ±20 % against its stress run: 140 W at 1,800 MHz (61.5 TFLOP/s)"
    assert from_stress_run(12.0, np.full(10, 13.0), np.full(10, 300.0), 0.1) is None  # never loaded the GPU
    assert from_stress_run(12.0, np.full(10, np.nan), np.full(10, 1800.0), 50.0) is None



def test_an_unknown_card_is_calibrated_roughly_from_its_power_limit_and_max_clock() -> None:
    cal = rough_calibration(150.0, 3105.0)
    assert cal is not None
    assert (cal.idle_w, cal.full_w, cal.full_clock_mhz, cal.source) == (pytest.approx(12.0), 150.0,
                                                                         pytest.approx(2794.5), "datasheet")
    assert rough_calibration(None, 3105.0) is None and rough_calibration(150.0, None) is None
    assert rough_calibration(0.0, 3105.0) is None


def test_the_power_cap_binds_on_its_bit_or_at_95_percent_of_the_limit_as_in_the_array_estimate() -> None:
    assert at_power_cap(0x4, 10.0, 150.0)  # SW power cap bit, whatever the power
    assert at_power_cap(0x4 | 0x1, None, None)
    assert at_power_cap(0, 142.5, 150.0) and not at_power_cap(0, 142.4, 150.0)
    assert not at_power_cap(0x20, 100.0, 150.0)  # SW thermal is not the cap
    assert not at_power_cap(None, 150.0, None) and not at_power_cap(None, 150.0, 0.0)
    # The same judgement as estimate_array's, sample by sample (there the cap reads the utilization).
    for reasons, power_w in [(0x4, 40.0), (0, 142.5), (0, 100.0), (0x20, 100.0)]:
        capped = estimate_array(CAL, power_w, 600.0, 77.0, power_limit_w=150.0, clock_event_reasons=reasons,
                                hold_samples=1)
        assert (float(capped) == 77.0) == at_power_cap(reasons, power_w, 150.0)


# --- the rule ----------------------------------------------------------------------------------


def _hollow_gpu(effective_busy: float, util_busy: float = 97.0, mem_busy: float = 85.0) -> GpuSeries:
    return gpu(laptop_meta(), utilization_gpu_pct=np.where(BUSY, util_busy, 0.0),
               utilization_mem_pct=np.where(BUSY, mem_busy, 0.0), power_w=np.where(BUSY, 62.0, 12.0),
               sm_clock_mhz=np.where(BUSY, 2040.0, 210.0), effective_load_pct=np.where(BUSY, effective_busy, 0.0))


def test_fires_on_high_utilization_at_a_third_of_the_calibrated_load() -> None:
    recs = run_rules(frame(gpus=(_hollow_gpu(34.0),)))
    (rec,) = [r for r in recs if r.rule_id == "low_effective_load"]
    assert [r.rule_id for r in recs] == ["low_effective_load"]
    assert rec.severity == "warning" and rec.gpu_index == 0
    assert rec.title == "GPU 0: utilization 97 % but working at ~34 % of its calibrated load"
    assert rec.evidence_value("Mean GPU utilization meanwhile") == pytest.approx(97.0)
    assert rec.evidence_value("Mean effective load meanwhile") == pytest.approx(34.0)
    assert rec.evidence_value("Uncertainty of an estimate (a GPU without GPM), +/-") == 20.0
    assert rec.evidence_value("Time affected") == pytest.approx(6.0)
    assert rec.evidence_value("Mean power meanwhile") == pytest.approx(62.0)
    assert rec.evidence_value("Power limit") == 150.0
    assert "wait on DRAM" in rec.action and "batch size" in rec.action
    assert rec.chart_metric == "effective_load_pct"
    assert rec.time_ranges and all(end - start > 5 * 3600 for start, end in rec.time_ranges)


def test_with_an_idle_memory_controller_it_points_at_small_kernels_or_input() -> None:
    (rec,) = run_rules(frame(gpus=(_hollow_gpu(30.0, mem_busy=20.0),)))
    assert "too small to fill the GPU or wait on input" in rec.action


def test_silent_when_the_gpu_works_near_its_calibrated_load_or_utilization_is_low() -> None:
    assert run_rules(frame(gpus=(_hollow_gpu(90.0),))) == []
    # Low utilization is low_utilization's business (and an effective load below it is expected).
    recs = run_rules(frame(gpus=(_hollow_gpu(30.0, util_busy=60.0),)))
    assert "low_effective_load" not in [r.rule_id for r in recs]


def test_silent_without_effective_load_in_the_history() -> None:
    assert run_rules(frame(gpus=(gpu(laptop_meta()),))) == []  # a frame from before schema v9: None
    all_nan = gpu(laptop_meta(), effective_load_pct=np.full(len(BUSY), np.nan))
    assert run_rules(frame(gpus=(all_nan,))) == []


def test_thresholds_come_from_the_settings() -> None:
    hollow = frame(gpus=(_hollow_gpu(45.0),))
    assert [r.rule_id for r in run_rules(hollow)] == ["low_effective_load"]
    assert run_rules(hollow, Thresholds(low_effective_load_pct=40.0)) == []
    assert run_rules(frame(gpus=(_hollow_gpu(34.0, util_busy=85.0),)), Thresholds(hollow_util_pct=90.0)) == []


def test_a_real_gpu_gets_no_estimate_before_its_own_stress_run() -> None:
    """An unknown Ada card (3105 MHz max) read 100 % above ~45 % of its limit on a rough datasheet guess."""
    from desktop.telemetry.effective_load import EffectiveLoad
    from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample

    info = GpuInfo(index=0, uuid="GPU-ada", name="NVIDIA RTX 4000 Ada Generation", power_limit_enforced_w=130.0,
                   sm_clock_max_mhz=3105.0)
    reading = GpuReading(info, DeviceState.OK, GpuSample(utilization_gpu_pct=100.0, power_w=0.6 * 130.0,
                                                         sm_clock_mhz=2700.0, clock_event_reasons=0))
    effective = EffectiveLoad()
    (before,) = effective.apply([reading])
    assert before.sample is not None and before.sample.effective_load_pct is None
    effective.calibrate(info.uuid, Calibration(12.0, 128.0, 2700.0, "stress run", 20.0))
    (after,) = effective.apply([reading])
    assert after.sample is not None and after.sample.effective_load_pct == pytest.approx((78.0 - 12.0) / 116.0 * 100,
                                                                                          abs=0.1)
