"""The simulated GPU behaves like its model says: thermals, power cap, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from desktop.telemetry.model import ClockEventReason, DeviceState
from desktop.telemetry.scenarios import WeekScenario, week_start
from desktop.telemetry.simulated import (
    ManualLoad,
    SimulatedBackend,
    SimulatedGpuModel,
    load_profiles,
    parse_profile_list,
)

T0 = 1_790_000_000.0
LAPTOPS = ["rtx4090-laptop", "rtx4080-laptop", "rtx4070-laptop"]


def _full_load(profile_key: str, load: float = 1.0, seed: int = 0) -> SimulatedGpuModel:
    scenario = ManualLoad()
    scenario.set(0, load, vram_mib=4000)
    return SimulatedGpuModel(parse_profile_list(profile_key), scenario, seed=seed)


def test_profiles_cover_the_required_gpus() -> None:
    profiles = load_profiles()
    for key in ("rtx4090-laptop", "rtx4080-laptop", "rtx4090", "h100"):
        assert key in profiles
    assert profiles["rtx4090-laptop"].vram_total_mib == 16376
    assert profiles["h100"].peak_bf16_tflops == 989.0


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"known: .*rtx4090-laptop"):
        parse_profile_list("rtx9999")


def test_steady_state_temperature_matches_the_model() -> None:
    # Half load on the desktop 4090 stays under its power limit, so no clock is cut:
    # P = 22 + 0.5 * (520 - 22) = 271 W, and T settles at 25 + 0.11 * 271 = 54.8 °C.
    model = _full_load("rtx4090", load=0.5)
    trace = model.trace(0, T0, T0 + 30 * 60)
    profile = model.profiles[0]
    expected_power = profile.power_idle_w + 0.5 * (profile.power_demand_w - profile.power_idle_w)
    expected_temp = profile.steady_state_temp_c(expected_power)
    assert expected_temp == pytest.approx(54.81, abs=0.01)
    assert trace.columns["temperature_c"][-60:].mean() == pytest.approx(expected_temp, abs=0.8)
    assert trace.columns["power_w"][-60:].mean() == pytest.approx(expected_power, rel=0.01)
    assert not (trace.columns["clock_event_reasons"].astype(int) & int(ClockEventReason.SW_POWER_CAP)).any()


def test_temperature_rises_as_a_first_order_response() -> None:
    # After one time constant the gap to the target has shrunk to 1/e.
    model = _full_load("rtx4090", load=0.5)
    profile = model.profiles[0]
    model.advance(T0)
    start = model._gpus[0].temp_c
    power = profile.power_idle_w + 0.5 * (profile.power_demand_w - profile.power_idle_w)
    target = profile.steady_state_temp_c(power)
    model.advance(T0 + profile.thermal_tau_s)
    expected = target + (start - target) / math.e
    assert model._gpus[0].temp_c == pytest.approx(expected, abs=0.3)


@pytest.mark.parametrize("key", LAPTOPS)
def test_sustained_full_load_on_a_laptop_throttles_thermally(key: str) -> None:
    model = _full_load(key)
    trace = model.trace(0, T0, T0 + 15 * 60)
    profile = model.profiles[0]
    reasons = trace.columns["clock_event_reasons"].astype(int)
    thermal = (reasons & int(ClockEventReason.SW_THERMAL_SLOWDOWN)) != 0
    assert trace.columns["temperature_c"].max() >= profile.temp_slowdown_c - 1
    assert thermal[-60:].all(), "the last minute should be thermally limited"
    assert not thermal[:30].any(), "a cool GPU does not start thermally limited"
    # The clock is cut below what the power limit alone allows at the start.
    first_minute = trace.columns["sm_clock_mhz"][:60].mean()
    assert trace.columns["sm_clock_mhz"][-60:].mean() < 0.97 * first_minute
    assert trace.columns["sm_clock_mhz"][-60:].mean() < profile.sm_clock_max_mhz
    # ... and the hardware bit appears once the slowdown temperature is reached.
    assert (reasons & int(ClockEventReason.HW_THERMAL_SLOWDOWN)).any()


def test_power_above_the_limit_sets_sw_power_cap_and_cuts_the_clock() -> None:
    model = _full_load("rtx4090")
    trace = model.trace(0, T0, T0 + 10 * 60)
    profile = model.profiles[0]
    reasons = trace.columns["clock_event_reasons"].astype(int)
    assert (reasons & int(ClockEventReason.SW_POWER_CAP) != 0).all()
    assert trace.columns["power_w"].mean() == pytest.approx(profile.power_limit_w, rel=0.02)
    assert trace.columns["sm_clock_mhz"].max() < profile.sm_clock_max_mhz
    # A desktop card stays below its slowdown temperature.
    assert trace.columns["temperature_c"].max() < profile.temp_slowdown_c
    assert not (reasons & int(ClockEventReason.SW_THERMAL_SLOWDOWN)).any()


def test_idle_gpu_reports_idle_reason_and_low_clock() -> None:
    model = _full_load("rtx4090-laptop", load=0.0)
    trace = model.trace(0, T0, T0 + 120)
    assert (trace.columns["clock_event_reasons"].astype(int) == int(ClockEventReason.GPU_IDLE)).all()
    assert (trace.columns["utilization_gpu_pct"] == 0).all()
    assert (trace.columns["sm_clock_mhz"] <= 300).all()


def test_same_seed_same_trace_and_another_seed_differs() -> None:
    a = _full_load("rtx4090-laptop", seed=7).trace(0, T0, T0 + 600)
    b = _full_load("rtx4090-laptop", seed=7).trace(0, T0, T0 + 600)
    c = _full_load("rtx4090-laptop", seed=8).trace(0, T0, T0 + 600)
    for name, column in a.columns.items():
        np.testing.assert_array_equal(column, b.columns[name], err_msg=name)
    assert not np.array_equal(a.columns["power_w"], c.columns["power_w"])


def test_live_sampling_follows_the_same_physics_as_the_bulk_trace() -> None:
    trace = _full_load("rtx4090-laptop").trace(0, T0, T0 + 400)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    assert backend.manual is not None
    backend.manual.set(0, 1.0, vram_mib=4000)
    backend.sample(T0)  # start where the trace starts
    temps, clocks = [], []
    for second in range(1, 401):
        sample = backend.sample(T0 + second)[0].sample
        assert sample is not None
        temps.append(sample.temperature_c)
        clocks.append(sample.sm_clock_mhz)
    np.testing.assert_allclose(np.asarray(temps, dtype=float), trace.columns["temperature_c"], atol=1.0)
    # The clock carries no sensor noise: the two paths must agree exactly.
    np.testing.assert_array_equal(np.asarray(clocks, dtype=float), trace.columns["sm_clock_mhz"])


def test_live_samples_are_deterministic_for_a_seed_and_clock() -> None:
    def run(seed: int) -> list[object]:
        backend = SimulatedBackend(parse_profile_list("rtx4090-laptop,rtx4090"), seed=seed)
        assert backend.manual is not None
        backend.manual.set(0, 0.8, 2000)
        backend.manual.set(1, 1.0, 9000)
        return [backend.sample(T0 + s) for s in range(0, 120, 3)]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_lost_gpu_is_a_state_and_reinit_brings_it_back() -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop,rtx4090"))
    backend.model.set_lost(1, True)
    readings = backend.sample(T0)
    assert [r.state for r in readings] == [DeviceState.OK, DeviceState.LOST]
    assert readings[1].sample is None and readings[0].sample is not None
    assert all(p.gpu_index != 1 for p in backend.processes())
    backend.reinit()
    assert [r.state for r in backend.sample(T0 + 1)] == [DeviceState.OK, DeviceState.OK]


def test_every_metric_is_present_or_deliberately_missing() -> None:
    laptop = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    laptop.sample(T0)
    supported = laptop.supported_metrics(0)
    assert supported["fan_pct"] is False  # laptops do not report their fan
    assert all(v for k, v in supported.items() if k != "fan_pct")
    desktop = SimulatedBackend(parse_profile_list("rtx4090"))
    desktop.sample(T0)
    assert desktop.supported_metrics(0)["fan_pct"] is True


def test_energy_counter_integrates_power() -> None:
    model = _full_load("rtx4090")
    trace = model.trace(0, T0, T0 + 600)
    energy = trace.columns["energy_mj"]
    assert np.all(np.diff(energy) >= 0)
    # 600 s at ~450 W = 270 kJ.
    assert (energy[-1] - energy[0]) / 1000.0 == pytest.approx(450 * 599, rel=0.03)


def test_the_demo_week_has_each_scenario() -> None:
    profiles = parse_profile_list("rtx4090-laptop")
    scenario = WeekScenario([p.vram_total_mib for p in profiles], seed=1)
    start = week_start(T0)
    trace = SimulatedGpuModel(profiles, scenario, seed=1).trace(0, start, start + 7 * 86400, interval_s=7.0)
    util = trace.columns["utilization_gpu_pct"]
    vram = trace.columns["vram_used_mib"]
    hours = trace.time_s
    busy_h = (util > 5).sum() * 7 / 3600
    assert 50 < busy_h < 120
    # The forgotten notebook: Thursday 03:00 UTC, nothing running but 6 GiB held.
    i = int(np.searchsorted(hours, start + 3 * 86400 + 3 * 3600))
    assert util[i] == 0 and vram[i] >= 6144
    # Monday's training run leaves under 10 % of VRAM free.
    i = int(np.searchsorted(hours, start + 15 * 3600))
    assert vram[i] / profiles[0].vram_total_mib > 0.9
    # The data-starved run averages ~55 % utilization.
    sel = (hours > start + 3 * 86400 + 14 * 3600) & (hours < start + 3 * 86400 + 23 * 3600)
    assert 40 < util[sel].mean() < 70
    assert scenario.host(start + 3 * 86400 + 15 * 3600).cpu_pct == pytest.approx(97.0)
    assert scenario.host(start + 6 * 86400 + 15.5 * 3600).on_ac_power is False


_COUNTED = (("clock_event_sw_power_cap_s", ClockEventReason.SW_POWER_CAP),
            ("clock_event_sw_thermal_s", ClockEventReason.SW_THERMAL_SLOWDOWN),
            ("clock_event_hw_thermal_s", ClockEventReason.HW_THERMAL_SLOWDOWN),
            ("clock_event_hw_power_brake_s", ClockEventReason.HW_POWER_BRAKE_SLOWDOWN))


def test_counted_seconds_agree_with_the_reason_bits_over_a_long_run() -> None:
    # Two hours of a laptop at full load, sampled at 1 Hz: it reaches its power cap and its slowdown
    # temperature. Each sample's counted time is the time under that cause since the previous one.
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    assert backend.manual is not None
    backend.manual.set(0, 1.0, vram_mib=8000)
    samples = [backend.sample(T0 + t)[0].sample for t in range(2 * 3600)]
    assert all(s is not None for s in samples)
    first, rest = samples[0], [s for s in samples[1:] if s is not None]
    assert first is not None and all(getattr(first, name) is None for name, _ in _COUNTED)
    for name, bit in _COUNTED:
        counted = [getattr(s, name) for s in rest]
        by_bits = [1.0 if (s.clock_event_reasons or 0) & bit else 0.0 for s in rest]
        assert counted == pytest.approx(by_bits, abs=1e-9), name
    total = {name: sum(getattr(s, name) for s in rest) for name, _ in _COUNTED}
    causes = ("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s", "clock_event_hw_thermal_s")
    assert min(total[name] for name in causes) > 10, total
    assert backend.supported_metrics(0)["clock_event_hw_thermal_s"] is True


def test_counted_seconds_are_exact_between_slower_ticks() -> None:
    # Sampled every 5 s the bits see one instant in five; the counters still hold every second.
    model = _full_load("rtx4090-laptop")
    fine = _full_load("rtx4090-laptop")
    coarse = model.trace(0, T0, T0 + 4 * 3600, interval_s=5.0)
    every = fine.trace(0, T0, T0 + 4 * 3600, interval_s=1.0)
    for name, bit in _COUNTED:
        per_second = float(np.sum((every.columns["clock_event_reasons"].astype(np.int64) & int(bit)) != 0))
        assert float(np.sum(every.columns[name])) == pytest.approx(per_second, abs=1e-6), name
        assert float(np.sum(coarse.columns[name])) == pytest.approx(per_second, abs=1e-6), name
