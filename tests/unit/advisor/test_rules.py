"""Every advice rule: fires on a crafted frame with the right evidence, stays silent on a healthy one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from advisor.costs import CloudOffer
from advisor.frame import Event, StressResult
from advisor.rules import Recommendation, run_rules
from advisor.thresholds import Thresholds
from tests.unit.advisor.crafted import (
    START_S,
    STEP_S,
    N,
    busy_mask,
    desktop_meta,
    frame,
    gpu,
    host,
    laptop_meta,
    processes,
)

BUSY = busy_mask()
MINUTE = np.arange(N)


def only(recs: list[Recommendation], rule_id: str) -> Recommendation:
    ids = [r.rule_id for r in recs]
    assert ids == [rule_id], ids
    return recs[0]


def test_healthy_desktop_and_laptop_frames_give_no_advice() -> None:
    assert run_rules(frame()) == []
    assert run_rules(frame(gpus=(gpu(laptop_meta()),))) == []
    assert run_rules(frame(platform="windows")) == []


# --- VRAM headroom --------------------------------------------------------------------------


def test_vram_headroom_fires_with_share_peak_and_cloud_option() -> None:
    # 3 of the 6 busy hours at 23,000 of 24,564 MiB (6.4 % free < 10 %): 50 % of busy time.
    tight = BUSY & (MINUTE >= 240)
    g = gpu(vram_used_mib=np.where(tight, 23000.0, np.where(BUSY, 12000.0, 400.0)))
    offers = (CloudOffer("RunPod", "RTX 4090", 24, 0.69, 0.34, "t", "2026"),
              CloudOffer("Lambda", "A100 40GB", 40, 1.29, None, "t", "2026"),
              CloudOffer("AWS", "A100 40GB", 40, 2.74, None, "t", "2026"),
              CloudOffer("Lambda", "A100 80GB", 80, 1.79, None, "t", "2026"))
    rec = only(run_rules(frame(gpus=(g,)), offers=offers), "vram_headroom")
    assert rec.evidence_value("Busy time with less than 10 % VRAM free") == pytest.approx(50.0)
    assert rec.evidence_value("Peak VRAM used") == 23000.0
    assert rec.time_ranges == ((START_S + 240 * STEP_S, START_S + 420 * STEP_S),)
    # needs 23000 / 1024 / 0.9 = 25.0 GB: the 24 GB card is too small, the cheapest 40 GB one wins
    assert "A100 40GB (40 GB) at Lambda, $1.29/h" in rec.action
    assert "gradient checkpointing" in rec.action and "LoRA" in rec.action


def test_vram_headroom_silent_below_share_and_respects_threshold() -> None:
    # 30 busy minutes tight = 8 % of busy time, and no single run >= 20 %.
    tight = BUSY & (MINUTE >= 390)
    g = gpu(vram_used_mib=np.where(tight, 23000.0, np.where(BUSY, 12000.0, 400.0)))
    assert run_rules(frame(gpus=(g,))) == []
    assert only(run_rules(frame(gpus=(g,)), Thresholds(vram_tight_share_pct=5.0)), "vram_headroom")


# --- low utilization ------------------------------------------------------------------------


def test_low_utilization_with_saturated_cpu_points_at_the_data_loader() -> None:
    g = gpu(utilization_gpu_pct=np.where(BUSY, 55.0, 0.0))
    f = frame(gpus=(g,), host=host(cpu_pct=np.where(BUSY, 97.0, 5.0)))
    rec = only(run_rules(f), "low_utilization")
    assert "starved by the CPU" in rec.title
    assert rec.evidence_value("Mean GPU utilization while busy (train.py)") == pytest.approx(55.0)
    assert rec.evidence_value("Mean CPU utilization meanwhile") == pytest.approx(97.0)
    assert rec.evidence_value("Busy time affected") == pytest.approx(6.0)
    assert "num_workers" in rec.action and "pin_memory" in rec.action
    assert "__main__" not in rec.action  # the Windows spawn note is for Windows only
    win = only(run_rules(dataclasses.replace(f, platform="windows")), "low_utilization")
    assert "__main__" in win.action


def test_low_utilization_with_idle_cpu_points_at_syncs_and_batch_size() -> None:
    g = gpu(utilization_gpu_pct=np.where(BUSY, 50.0, 0.0))
    rec = only(run_rules(frame(gpus=(g,))), "low_utilization")
    assert "low utilization" in rec.title
    assert rec.evidence_value("Mean CPU utilization meanwhile") == pytest.approx(35.0)
    assert "batch size" in rec.action


def test_low_utilization_ignores_inference_serving() -> None:
    g = gpu(utilization_gpu_pct=np.where(BUSY, 20.0, 0.0))
    f = frame(gpus=(g,), processes=processes([(0, 77, "llama-server", 9000.0, BUSY)]))
    assert run_rules(f) == []


# --- thermal throttling ---------------------------------------------------------------------


def _thermal_gpu(meta=None):
    hot = BUSY & (MINUTE >= 120)  # 5 of 6 busy hours throttled, 1 h of it at the HW slowdown
    reasons = np.where(hot, 0x20, np.where(BUSY, 0, 1)) | np.where(BUSY & (MINUTE >= 360), 0x40, 0)
    return gpu(meta, clock_event_reasons=reasons.astype(np.int64), temperature_c=np.where(hot, 88.0, 60.0))


def test_thermal_throttling_on_a_laptop_advises_performance_mode_not_pl() -> None:
    rec = only(run_rules(frame(gpus=(_thermal_gpu(laptop_meta()),))), "thermal_throttling")
    assert rec.severity == "critical"  # 83 % of busy time
    assert rec.evidence_value("Busy time thermally throttled") == pytest.approx(300 / 360 * 100)
    assert rec.evidence_value("Time throttled") == pytest.approx(300.0)
    assert rec.evidence_value("Of it at the HW thermal slowdown") == pytest.approx(60.0)
    assert rec.evidence_value("Peak temperature") == 88.0
    assert "performance" in rec.action and "-pl" not in rec.action
    win = only(run_rules(frame(gpus=(_thermal_gpu(laptop_meta()),), platform="windows")), "thermal_throttling")
    assert "Cooler Boost" in win.action


def test_thermal_throttling_on_a_desktop_advises_fans_and_a_lower_limit() -> None:
    rec = only(run_rules(frame(gpus=(_thermal_gpu(),))), "thermal_throttling")
    assert "fan curve" in rec.action and "-pl 385" in rec.action  # 450 W x 0.85, rounded to 5 W
    no_pl = desktop_meta(power_limit_settable=False)
    rec = only(run_rules(frame(gpus=(_thermal_gpu(no_pl),))), "thermal_throttling")
    assert "-pl" not in rec.action


def test_thermal_throttling_silent_under_its_share() -> None:
    # 10 minutes of 360 busy = 2.8 % < 5 %
    reasons = np.where(BUSY & (MINUTE < 70), 0x20, np.where(BUSY, 0, 1)).astype(np.int64)
    assert run_rules(frame(gpus=(gpu(clock_event_reasons=reasons),))) == []


# --- power cap ------------------------------------------------------------------------------


def test_power_cap_on_laptop_never_advises_pl_and_mentions_battery() -> None:
    capped = BUSY & (MINUTE >= 180)  # 4 of 6 busy hours
    g = gpu(laptop_meta(), clock_event_reasons=np.where(capped, 0x4, np.where(BUSY, 0, 1)).astype(np.int64),
            power_w=np.where(capped, 150.0, np.where(BUSY, 120.0, 10.0)))
    on_ac = np.where(MINUTE >= 300, 0.0, 1.0)  # the last 2 busy hours on battery
    rec = only([r for r in run_rules(frame(gpus=(g,), host=host(on_ac=on_ac))) if r.rule_id == "power_cap"],
               "power_cap")
    assert rec.evidence_value("Busy time at the power limit") == pytest.approx(240 / 360 * 100)
    assert rec.evidence_value("Mean power while capped") == pytest.approx(150.0)
    assert rec.evidence_value("Of it on battery") == pytest.approx(50.0)
    assert "-pl" not in rec.action and "charger" in rec.action and "performance mode" in rec.action


def test_power_cap_on_desktop_offers_pl_only_when_settable() -> None:
    capped = BUSY & (MINUTE >= 180)
    reasons = np.where(capped, 0x4, np.where(BUSY, 0, 1)).astype(np.int64)
    rec = only(run_rules(frame(gpus=(gpu(clock_event_reasons=reasons),))), "power_cap")
    assert "sudo nvidia-smi -i 0 -pl" in rec.action
    win = only(run_rules(frame(gpus=(gpu(clock_event_reasons=reasons),), platform="windows")), "power_cap")
    assert "nvidia-smi.exe -i 0 -pl" in win.action
    locked = gpu(desktop_meta(power_limit_settable=False), clock_event_reasons=reasons)
    assert "-pl" not in only(run_rules(frame(gpus=(locked,))), "power_cap").action


def test_power_cap_silent_under_its_share() -> None:
    reasons = np.where(BUSY & (MINUTE < 100), 0x4, np.where(BUSY, 0, 1)).astype(np.int64)  # 11 %
    assert run_rules(frame(gpus=(gpu(clock_event_reasons=reasons),))) == []


def test_thermal_throttling_from_the_counted_time_the_sampled_bits_missed() -> None:
    # Short slowdowns between samples: no sampled bit ever set, but the driver counted 12 s of SW
    # thermal in every busy minute (20 % of busy time), 3 s of it at the HW slowdown in the last hour.
    sw = np.where(BUSY, 12.0, 0.0)
    hw = np.where(BUSY & (MINUTE >= 360), 3.0, 0.0)
    g = dataclasses.replace(gpu(), counted_seconds={0x20: sw, 0x40: hw, 0x4: np.zeros(N), 0x80: np.zeros(N)})
    assert not np.any(g.clock_event_reasons & 0x60)
    rec = only(run_rules(frame(gpus=(g,))), "thermal_throttling")
    assert rec.evidence_value("Busy time thermally throttled") == pytest.approx(20.0)
    assert rec.evidence_value("Time throttled") == pytest.approx(360 * 12 / 60)
    assert rec.evidence_value("Of it at the HW thermal slowdown") == pytest.approx(60 * 3 / 60)


def test_power_cap_counted_time_wins_over_the_bits_and_falls_back_to_them_where_missing() -> None:
    capped = np.where(BUSY, 0x4, 1).astype(np.int64)  # the bit at every busy sample: 100 % by the bits
    # Counted: 5 s of each busy minute from minute 240 on; no counter before (an older recording).
    counted = np.where(MINUTE >= 240, np.where(BUSY, 5.0, 0.0), np.nan)
    g = dataclasses.replace(gpu(clock_event_reasons=capped), counted_seconds={0x4: counted})
    rec = only(run_rules(frame(gpus=(g,))), "power_cap")
    # Minutes 60-240 by the bits (180 min), then 180 busy minutes x 5 s counted (15 min).
    assert rec.evidence_value("Time power-capped") == pytest.approx(180 + 15)
    assert rec.evidence_value("Busy time at the power limit") == pytest.approx(195 / 360 * 100)
    only_counted = dataclasses.replace(g, counted_seconds={0x4: np.where(BUSY, 5.0, 0.0)})  # 8 %: under 20 %
    assert [r.rule_id for r in run_rules(frame(gpus=(only_counted,)))] == []


# --- idle memory ----------------------------------------------------------------------------


def test_idle_memory_names_the_process_and_how_long() -> None:
    # the GPU works 1 h (hours 1-2); a notebook holds 6 GiB all 8 h: idle-held 0-1 h and 2-8 h
    short = (MINUTE >= 60) & (MINUTE < 120)
    g = gpu(utilization_gpu_pct=np.where(short, 95.0, 0.0))
    f = frame(gpus=(g,), processes=processes([(0, 5120, "ipykernel_launcher", 6144.0, np.ones(N, dtype=bool))]))
    rec = only(run_rules(f), "idle_memory")
    assert rec.evidence_value("ipykernel_launcher (PID 5120) held VRAM while the GPU was idle") == pytest.approx(6.0)
    assert rec.evidence_value("VRAM held") == 6144.0
    assert rec.evidence_value("Share of the GPU's VRAM") == pytest.approx(6144 / 24564 * 100)
    assert rec.time_ranges == ((START_S + 120 * STEP_S, START_S + N * STEP_S),)
    assert "notebook kernel (PID 5120)" in rec.action


def test_idle_memory_silent_for_short_idle_stretches_and_small_holders() -> None:
    # held through the whole frame, but the GPU idles only 1 h before and 1 h after the run
    held = np.ones(N, dtype=bool)
    f = frame(processes=processes([(0, 1234, "train.py", 14000.0, BUSY),
                                   (0, 5120, "ipykernel_launcher", 6144.0, held)]))
    assert run_rules(f) == []
    assert only(run_rules(f, Thresholds(idle_memory_hours=0.5)), "idle_memory")
    small = frame(gpus=(gpu(utilization_gpu_pct=np.zeros(N)),),
                  processes=processes([(0, 9, "Xorg", 300.0, held)]))
    assert run_rules(small) == []


def test_idle_memory_action_on_windows_uses_taskkill() -> None:
    short = (MINUTE >= 60) & (MINUTE < 120)
    g = gpu(utilization_gpu_pct=np.where(short, 95.0, 0.0))
    f = frame(gpus=(g,), platform="windows",
              processes=processes([(0, 42, "python.exe", 4000.0, np.ones(N, dtype=bool))]))
    assert "taskkill /PID 42" in only(run_rules(f), "idle_memory").action


# --- persistence mode -----------------------------------------------------------------------


def test_persistence_mode_off_on_linux_only() -> None:
    off = gpu(desktop_meta(persistence_mode=False))
    rec = only(run_rules(frame(gpus=(off,))), "persistence_mode")
    assert rec.severity == "info" and "nvidia-persistenced" in rec.action
    assert run_rules(frame(gpus=(off,), platform="windows")) == []
    assert run_rules(frame(gpus=(gpu(desktop_meta(persistence_mode=None)),))) == []  # unknown: say nothing
    laptop = only(run_rules(frame(gpus=(gpu(laptop_meta(persistence_mode=False)),))), "persistence_mode")
    assert "battery" in laptop.action


# --- stress history -------------------------------------------------------------------------


def _stress(run_id: int, day: float, sustained: float, driver: str = "560.35", errors: int = 0) -> StressResult:
    start = START_S - 86400 * day
    return StressResult(run_id=run_id, started_s=start, ended_s=start + 600, gpu_uuid="GPU-desk-0",
                        gpu_name="NVIDIA GeForce RTX 4090", workload="gemm", dtype="bf16", unit="TFLOP/s",
                        peak_throughput=sustained * 1.05, sustained_throughput=sustained, throttled=False,
                        errors=errors, driver_version=driver, summary="", device="cuda:0")


def test_driver_change_since_the_last_stress_test() -> None:
    f = frame(stress_results=(_stress(1, 10, 150.0, driver="555.42"),))
    rec = only(run_rules(f), "driver_change")
    assert "555.42" in rec.evidence[0].label and "560.35" in rec.evidence[0].label
    assert rec.evidence_value("Days since that test") == pytest.approx(10 + 8 / 24 - 600 / 86400)
    assert "stress" in rec.action
    # an event after the test says so even when versions are unknown
    meta = desktop_meta(driver_version=None)
    f = frame(gpus=(gpu(meta),), stress_results=(_stress(1, 10, 150.0, driver=None),),
              events=(Event(START_S - 86400, "driver_change", "GPU-desk-0", "555 -> 560"),))
    assert only(run_rules(f), "driver_change").time_ranges[0][1] == START_S - 86400


def test_driver_change_offers_the_quick_test_and_names_the_run_before_it() -> None:
    """Issue 32: the card is the time to rerun the Quick test, with the last run before the change named (its
    number, date, figures and driver) for the before/after comparison, and the change as stored."""
    older, before = _stress(3, 30, 140.0, driver="550.54"), _stress(7, 10, 150.0, driver="555.42")
    f = frame(stress_results=(older, before),
              events=(Event(START_S - 86400, "driver_change", "GPU-desk-0", "555.42 -> 560.35"),))
    action = only(run_rules(f), "driver_change").action
    assert "Quick test" in action and "rigscope stress --minutes 2" in action
    assert "run 7 of " in action and "150 TFLOP/s sustained" in action and "driver 555.42" in action
    assert "(555.42 -> 560.35)" in action and "run 3" not in action


def test_driver_change_silent_when_unchanged_or_before_the_test() -> None:
    f = frame(stress_results=(_stress(1, 10, 150.0),),
              events=(Event(START_S - 20 * 86400, "driver_change", "GPU-desk-0"),))
    assert run_rules(f) == []


def test_stress_result_below_its_baseline() -> None:
    f = frame(stress_results=(_stress(1, 20, 150.0), _stress(2, 10, 149.0), _stress(3, 1, 135.0)))
    rec = only(run_rules(f), "stress_regression")
    assert rec.evidence_value("Drop against the baseline") == pytest.approx(10.0)  # 1 - 135/150
    assert rec.evidence_value("Latest (sustained)") == 135.0
    assert rec.severity == "warning"
    crash = frame(stress_results=(_stress(1, 20, 150.0), _stress(3, 1, 100.0)))
    assert only(run_rules(crash), "stress_regression").severity == "critical"  # 33 % >= 3 x 5 %


def test_stress_result_within_tolerance_or_failed_runs_are_silent() -> None:
    f = frame(stress_results=(_stress(1, 20, 150.0), _stress(2, 1, 145.0)))  # 3.3 % < 5 %
    assert run_rules(f) == []
    failed = frame(stress_results=(_stress(1, 20, 150.0), _stress(2, 1, 10.0, errors=3)))
    assert run_rules(failed) == []


# --- PCIe link ------------------------------------------------------------------------------


def test_pcie_link_below_maximum_under_load() -> None:
    g = gpu(pcie_width=np.full(N, 8.0))
    rec = only(run_rules(frame(gpus=(g,))), "pcie_link")
    assert rec.evidence_value("Heavy-load time with a slower link") == pytest.approx(100.0)
    assert rec.evidence_value("Link width under load (median)") == 8.0
    assert "x16 slot" in rec.action


def test_pcie_gen_drop_at_idle_is_normal() -> None:
    g = gpu(pcie_gen=np.where(BUSY, 4.0, 1.0))
    assert run_rules(frame(gpus=(g,))) == []


# --- battery --------------------------------------------------------------------------------


def test_heavy_work_on_battery() -> None:
    on_ac = np.where((MINUTE >= 60) & (MINUTE < 90), 0.0, 1.0)  # 30 busy minutes unplugged
    rec = only(run_rules(frame(host=host(on_ac=on_ac))), "battery_heavy")
    assert rec.evidence_value("Heavy GPU work on battery") == pytest.approx(30.0)
    assert rec.evidence_value("Mean GPU utilization meanwhile") == pytest.approx(95.0)
    assert "charger" in rec.action


def test_light_or_short_battery_use_is_silent() -> None:
    on_ac = np.where((MINUTE >= 60) & (MINUTE < 65), 0.0, 1.0)  # 5 min < 10 min
    assert run_rules(frame(host=host(on_ac=on_ac))) == []
    idle_unplugged = np.where(MINUTE >= 420, 0.0, 1.0)  # unplugged only while idle
    assert run_rules(frame(host=host(on_ac=idle_unplugged))) == []


# --- ordering -------------------------------------------------------------------------------


def test_recommendations_are_ordered_by_severity() -> None:
    f = frame(gpus=(_thermal_gpu(desktop_meta(persistence_mode=False)),))
    assert [r.rule_id for r in run_rules(f)] == ["thermal_throttling", "persistence_mode"]
