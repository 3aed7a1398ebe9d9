"""The job card's figures against a hand-checked example (the hand calculation is written beside each)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.costs import CloudOffer, GpuSpec
from advisor.frame import GpuMeta, GpuSeries
from advisor.job_card import CloudInputs, JobCard, JobInputs, job_card, mean_throughput
from advisor.job_figures import gpu_figures

T0 = 1_795_000_000.0
STEP = 60.0
N = 14

# The example: one RTX 4070 Laptop GPU (8,188 MiB), 14 raw rows a minute apart, row i = [60 i, 60 i + 60) s.
# The job runs from 150 s (halfway into row 2) to 720 s (the start of row 12): 570 s.
# The guard paused it from 360 s to 480 s (rows 6 and 7): 120 s paused, 450 s running.
START, END = T0 + 150.0, T0 + 720.0
PAUSES = ((T0 + 360.0, T0 + 480.0),)
#          row:   0  1    2    3    4    5  6  7   8   9 10 11 12 13
UTIL = np.array([0, 0, 100, 100, 100, 100, 0, 0, 50, 50, 0, 0, 0, 0], dtype=np.float64)
VRAM = np.array([500, 500] + [6000] * 7 + [7800] + [6000] * 2 + [9000] * 2, dtype=np.float64)
# Energy used in each row (mJ): 7.2e6 mJ = 2 Wh a row (120 W for 60 s) for rows 2-10; row 11 has no counter
# value and is integrated from its 90 W instead; rows 0, 1, 12, 13 lie outside the job.
ENERGY = np.array([1e6, 1e6] + [7.2e6] * 9 + [np.nan] + [5e6] * 2)
POWER = np.array([15, 15] + [120] * 9 + [90] + [80] * 2, dtype=np.float64)
# NVML's SW power cap counter, as raw samples hold it: seconds since the sample before (row i covers
# (60 (i-1), 60 i]). Row 3's 24 s belong to row 2's minute, of which half is inside the job.
POWER_CAP = np.zeros(N)
POWER_CAP[[3, 4, 5, 10, 13]] = [24.0, 18.0, 60.0, 36.0, 60.0]
# HW thermal: this GPU keeps no counter (NaN), so the sampled bit 0x40 (rows 8 and 9) stands in.
REASONS = np.zeros(N, dtype=np.int64)
REASONS[[8, 9]] = 0x40 | 0x20


def _gpu() -> GpuSeries:
    meta = GpuMeta(index=0, uuid="GPU-lap-0", name="NVIDIA GeForce RTX 4070 Laptop GPU", vram_total_mib=8188.0)
    nan = np.full(N, np.nan)
    return GpuSeries(
        meta=meta, time_s=T0 + STEP * np.arange(N, dtype=np.float64), duration_s=np.full(N, STEP),
        utilization_gpu_pct=UTIL,
        utilization_mem_pct=nan, vram_used_mib=VRAM, temperature_c=np.linspace(50.0, 76.0, N), power_w=POWER,
        energy_mj=ENERGY, sm_clock_mhz=nan, mem_clock_mhz=nan, fan_pct=nan, pcie_gen=nan, pcie_width=nan,
        clock_event_reasons=REASONS,
        counted_seconds={0x4: POWER_CAP, 0x20: np.where(REASONS & 0x20, 60.0, 0.0), 0x40: nan, 0x80: np.zeros(N)},
    )


SPECS = [GpuSpec("RTX 4070 Laptop", 35.0, 8.0), GpuSpec("L4", 121.0, 24.0), GpuSpec("H100 SXM", 989.0, 80.0),
         GpuSpec("T4", 65.0, 16.0)]
OFFERS = [
    CloudOffer("Big", "H100 SXM", 80.0, 3.00, 2.00, "test", "2026"),
    CloudOffer("Cheap", "L4", 24.0, 0.80, None, "test", "2026"),
    # Cheapest of all, but 4 GB cannot hold the job's 7,800 MiB: left out.
    CloudOffer("Tiny", "T4", 4.0, 0.10, None, "test", "2026"),
]


def _card(**changes: object) -> JobCard:
    job = JobInputs(job_id=7, name="train", command="python train.py", started_s=START, ended_s=END, exit_code=0,
                    gpus=[_gpu()], pauses=PAUSES, paused_s=120.0, verdict="Held its speed.",
                    throughput_time_s=T0 + np.array([150.0, 300.0, 450.0, 600.0, 720.0]),
                    throughput=np.array([10.0, 12.0, 8.0, 11.0, 99.0]), throughput_unit="it/s")
    inputs = CloudInputs(OFFERS, SPECS, measured_tflops=28.0)
    return job_card(job, electricity_price_per_kwh=0.30, currency="EUR", cloud=inputs, **changes)


def test_duration_busy_share_and_mean_utilization_leave_the_pauses_out() -> None:
    card = _card()
    gpu = card.gpus[0]
    assert card.duration_s == 570.0 and card.paused_s == 120.0 and card.running_s == 450.0 and card.pauses == 1
    # Running time inside the job: row 2 half (30 s), rows 3-5 (180 s), rows 8-11 (240 s) = 450 s.
    # Busy (utilization > 0): 30 + 180 + rows 8, 9 (120 s) = 330 s; share 330 / 450 = 0.7333.
    assert gpu.sampled_s == 570.0
    assert gpu.busy_s == pytest.approx(330.0)
    assert gpu.busy_share == pytest.approx(330.0 / 450.0)
    # Mean utilization over running time: (100 x 30 + 100 x 180 + 50 x 120 + 0 x 120) / 450 = 27,000 / 450 = 60 %.
    assert gpu.mean_util_pct == pytest.approx(60.0)


def test_peak_vram_and_headroom_within_the_span_only() -> None:
    gpu = _card().gpus[0]
    # Row 9 holds 7,800 MiB; rows 12-13 (9,000 MiB) start at or after the end. Headroom 8,188 - 7,800 = 388 MiB.
    assert gpu.peak_vram_mib == 7800.0 and gpu.vram_total_mib == 8188.0 and gpu.headroom_mib == pytest.approx(388.0)


def test_throttle_seconds_from_the_counters_else_the_sampled_bits() -> None:
    gpu = _card().gpus[0]
    # Power cap, counted: row 2's 24 s x 0.5 inside = 12, row 3's 18, row 4's 60, row 9's 36 (counted at row 10);
    # row 12's 60 s (counted at row 13) is after the end. 12 + 18 + 60 + 36 = 126 s.
    assert gpu.throttle_s["sw_power_cap"] == pytest.approx(126.0)
    # SW thermal, counted: 60 s at rows 8 and 9; shifted one row back, rows 7 and 8 hold them. Row 7 lies in the
    # guard's pause (360-480 s): a stopped job is not throttled, so only row 8 counts: 60 s.
    assert gpu.throttle_s["sw_thermal"] == pytest.approx(60.0)
    # HW thermal, no counter: the bit is set on rows 8 and 9, a minute each: 120 s.
    assert gpu.throttle_s["hw_thermal"] == pytest.approx(120.0)
    assert gpu.throttle_s["hw_power_brake"] == 0.0
    assert gpu.throttle_timing == "mixed"
    assert gpu.throttled_s == pytest.approx(126.0)


def test_energy_from_the_counter_else_power_and_its_cost() -> None:
    card = _card()
    # Row 2: 2 Wh x 0.5 = 1 Wh; rows 3-10: 8 x 2 Wh = 16 Wh; row 11 (no counter): 90 W x 60 s = 1.5 Wh. 18.5 Wh.
    assert card.gpus[0].energy_wh == pytest.approx(18.5)
    assert card.gpus[0].energy_source == "counter+power"
    assert card.energy_wh == pytest.approx(18.5)
    # 0.0185 kWh x 0.30 EUR/kWh = 0.00555 EUR.
    assert card.energy_cost == pytest.approx(0.00555)
    assert card.currency == "EUR"


def test_cloud_equivalents_at_the_measured_speed_cheapest_first() -> None:
    card = _card()
    assert card.speed_basis == "measured" and card.local_tflops == 28.0
    assert [(c.provider, c.gpu_model) for c in card.cloud] == [("Cheap", "L4"), ("Big", "H100 SXM")]
    cheap, big = card.cloud
    # L4: speed 121 x 0.8 / 28 = 3.4571. Busy share 11/15 runs 3.4571x faster, the other 4/15 does not:
    # 450 s x ((11/15) / 3.4571 + 4/15) = 450 x (0.21212 + 0.26667) = 215.45 s = 0.059848 h; x 0.80 $/h = 0.047879 $.
    assert cheap.relative_speed == pytest.approx(121.0 * 0.8 / 28.0)
    assert cheap.hours == pytest.approx(0.0598485, rel=1e-5)
    assert cheap.on_demand_usd == pytest.approx(0.0478788, rel=1e-5)
    assert cheap.spot_usd is None
    # H100 SXM: speed 989 x 0.8 / 28 = 28.257; 450 x (0.025952 + 0.26667) = 131.68 s = 0.036577 h;
    # x 3.00 = 0.10973 $ on demand, x 2.00 = 0.073155 $ spot.
    assert big.hours == pytest.approx(0.0365774, rel=1e-5)
    assert big.on_demand_usd == pytest.approx(0.109732, rel=1e-5)
    assert big.spot_usd == pytest.approx(0.0731549, rel=1e-5)
    assert "Cloud prices are in USD; energy is in EUR." in card.notes


def test_datasheet_speed_without_a_stress_test_and_no_spec_no_rows() -> None:
    job = JobInputs(job_id=1, name="x", command="x", started_s=START, ended_s=END, exit_code=0, gpus=[_gpu()])
    card = job_card(job, electricity_price_per_kwh=0.17, currency="USD", cloud=CloudInputs(OFFERS, SPECS))
    assert card.speed_basis == "datasheet" and card.local_tflops == 35.0
    assert card.cloud[0].relative_speed == pytest.approx(121.0 / 35.0)
    bare = job_card(job, electricity_price_per_kwh=0.17, currency="USD", cloud=CloudInputs(OFFERS, SPECS[1:]))
    assert bare.cloud == () and bare.speed_basis is None
    assert any("No spec for" in n for n in bare.notes)


def test_mean_throughput_leaves_the_pause_out() -> None:
    # [150, 300) 10 it/s for 150 s; [300, 450) 12 it/s, paused from 360: 60 s; [450, 600) 8 it/s, paused until
    # 480: 120 s; [600, 720) 11 it/s for 120 s. (1,500 + 720 + 960 + 1,320) / 450 = 10.0 it/s.
    assert _card().throughput_mean == pytest.approx(10.0)
    assert mean_throughput(np.array([1.0]), np.array([5.0])) == 5.0
    assert mean_throughput(np.zeros(0), np.zeros(0)) is None


def test_rollup_rows_count_their_own_interval() -> None:
    # Rollup buckets hold their own interval's counted seconds: no shift.
    gpu = gpu_figures(_gpu(), START, END, counters_since_previous=False)
    # Row 2 holds 0 s; rows 3, 4, 5 hold 24 + 18 + 60, row 10 holds 36; row 13 is after the end: 138 s.
    assert gpu.throttle_s["sw_power_cap"] == pytest.approx(138.0)


def test_no_samples_says_so() -> None:
    job = JobInputs(job_id=1, name="x", command="x", started_s=START, ended_s=END, exit_code=None, gpus=[])
    card = job_card(job, electricity_price_per_kwh=0.17, currency="USD")
    assert card.gpus == () and card.energy_wh is None and card.energy_cost is None and card.busy_share is None
    assert "No GPU samples" in card.notes[0]


def test_as_dict_round_trips_through_json() -> None:
    card = _card()
    data = json.loads(json.dumps(card.as_dict()))
    assert data["version"] == 1 and data["gpus"][0]["throttle_s"]["sw_power_cap"] == pytest.approx(126.0)
    assert JobCard.from_dict(data) == card


@pytest.mark.parametrize("bad", [[], {"version": 99}, {"version": 1, "gpus": []}])
def test_from_dict_refuses_a_damaged_card(bad: object) -> None:
    with pytest.raises(ValueError):
        JobCard.from_dict(bad)  # type: ignore[arg-type]
