"""A memory-bound job on the simulated GPU: utilization high, power, temperature and effective load low.

The same job through the live path (SimulatedBackend -> Sampler, which estimates each reading's
effective load) and through the bulk path the demo week uses (``SimulatedGpuModel.trace``).
"""

from __future__ import annotations

import numpy as np
import pytest

from advisor.effective_load import Calibration
from desktop.telemetry.effective_load import EffectiveLoad, datasheet_calibration
from desktop.telemetry.model import ClockEventReason, GpuInfo, GpuSample
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import Demand, SimulatedBackend, SimulatedGpuModel, load_profiles, parse_profile_list
from desktop.telemetry.simulated.physics import profile_calibration

T0 = 1_790_000_000.0
POWER_CAP = int(ClockEventReason.SW_POWER_CAP)
THERMAL = int(ClockEventReason.SW_THERMAL_SLOWDOWN)


class _Steady:
    """One demand on GPU 0 forever."""

    def __init__(self, demand: Demand) -> None:
        self.demand_now = demand

    def demand(self, gpu_index: int, time_s: float) -> Demand:
        return self.demand_now if gpu_index == 0 else Demand()


def _trace(profile: str, load: float, intensity: float, minutes: float = 20.0) -> dict[str, np.ndarray]:
    model = SimulatedGpuModel(parse_profile_list(profile), _Steady(Demand(load=load, intensity=intensity)), seed=3)
    columns = model.trace(0, T0, T0 + minutes * 60).columns
    return {name: values[-300:] for name, values in columns.items()}  # the settled last five minutes


def test_memory_bound_keeps_utilization_and_clock_high_at_a_third_of_the_power() -> None:
    hollow = _trace("rtx4090-laptop", 0.97, 0.35)
    full = _trace("rtx4090-laptop", 0.97, 1.0)
    p = load_profiles()["rtx4090-laptop"]
    assert hollow["utilization_gpu_pct"].mean() == pytest.approx(97.0, abs=1.0)
    assert full["utilization_gpu_pct"].mean() == pytest.approx(97.0, abs=1.0)
    # P = P_idle + load x intensity x (P_demand - P_idle) at boost clock: no power cap, no throttle.
    expected_w = p.power_idle_w + 0.97 * 0.35 * (p.power_demand_w - p.power_idle_w)
    assert hollow["power_w"].mean() == pytest.approx(expected_w, rel=0.02)
    # The datasheet boost clock (2,040 MHz), not the 3,105 MHz V/F top the driver reports as the max.
    assert hollow["sm_clock_mhz"].min() == pytest.approx(p.sm_clock_boost_mhz, abs=15.0)
    assert not (hollow["clock_event_reasons"].astype(int) & POWER_CAP).any()
    # The compute-bound twin is held down (power cap, then heat) at nearly twice the power; the memory-bound
    # one stays cool.
    assert full["power_w"].mean() > 1.7 * hollow["power_w"].mean()
    assert (full["clock_event_reasons"].astype(int) & (POWER_CAP | THERMAL)).all()
    assert hollow["temperature_c"].mean() == pytest.approx(p.steady_state_temp_c(expected_w), abs=1.0)
    assert full["temperature_c"].mean() > hollow["temperature_c"].mean() + 15.0


def test_the_trace_estimates_effective_load_from_power_and_clock() -> None:
    hollow = _trace("rtx4090-laptop", 0.97, 0.35)
    full = _trace("rtx4090-laptop", 0.97, 1.0)  # throttled by power and heat: still ~97 % of its full load
    assert hollow["effective_load_pct"].mean() == pytest.approx(0.97 * 35.0, abs=2.0)
    assert full["effective_load_pct"].mean() == pytest.approx(97.0, abs=2.0)
    desktop = _trace("rtx4090", 0.5, 1.0)  # half load under the limit
    assert desktop["effective_load_pct"].mean() == pytest.approx(50.0, abs=2.0)
    idle = _trace("rtx4090-laptop", 0.0, 1.0)
    assert (idle["effective_load_pct"] == 0.0).all()


def test_the_sampler_estimates_each_live_reading() -> None:
    scenario = _Steady(Demand(load=0.97, intensity=0.35))
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), scenario, seed=1)
    clock = [T0]
    sampler = Sampler(backend, clock=lambda: clock[0], monotonic=lambda: clock[0])
    values: list[float] = []
    for _ in range(600):
        clock[0] += 1.0
        (reading,) = sampler.tick().gpus
        assert reading.sample is not None and reading.sample.effective_load_pct is not None
        values.append(reading.sample.effective_load_pct)
    assert np.mean(values[-300:]) == pytest.approx(34.0, abs=2.0)
    scenario.demand_now = Demand(load=0.97, intensity=1.0)
    for _ in range(300):
        clock[0] += 1.0
        (reading,) = sampler.tick().gpus
    assert reading.sample is not None and reading.sample.effective_load_pct == pytest.approx(97.0, abs=3.0)


def test_a_stress_run_calibration_replaces_the_datasheet() -> None:
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), _Steady(Demand(load=0.97, intensity=0.35)))
    clock = [T0]
    sampler = Sampler(backend, clock=lambda: clock[0], monotonic=lambda: clock[0])
    uuid = backend.devices()[0].uuid
    # This card's own run found it draws 200 W at max clock (a better cooled, higher-limit unit).
    sampler.effective_load.calibrate(uuid, Calibration(12.0, 200.0, 2040.0, "stress run", 70.0))
    for _ in range(400):
        clock[0] += 1.0
        (reading,) = sampler.tick().gpus
    assert reading.sample is not None and reading.sample.power_w is not None
    assert reading.sample.effective_load_pct == pytest.approx((reading.sample.power_w - 12.0) / 188.0 * 100, abs=1.5)


def test_a_measured_value_is_kept() -> None:
    info = GpuInfo(index=0, uuid="GPU-h100", name="NVIDIA H100 80GB HBM3", power_limit_enforced_w=700.0,
                   sm_clock_max_mhz=1980.0)
    from desktop.telemetry.model import DeviceState, GpuReading

    measured = GpuReading(info, DeviceState.OK, GpuSample(utilization_gpu_pct=100.0, power_w=300.0,
                                                          sm_clock_mhz=1980.0, effective_load_pct=41.0))
    (out,) = EffectiveLoad().apply([measured])
    assert out.sample is not None and out.sample.effective_load_pct == 41.0


def test_datasheet_calibration_by_card_name_or_from_the_gpus_own_limits() -> None:
    profiles = load_profiles()
    laptop = datasheet_calibration(GpuInfo(index=0, uuid="a", name="NVIDIA GeForce RTX 4090 Laptop GPU"))
    simulated = datasheet_calibration(GpuInfo(index=0, uuid="b", name="NVIDIA GeForce RTX 4090 Laptop GPU (simulated)"))
    assert laptop == simulated == profile_calibration(profiles["rtx4090-laptop"])
    assert laptop is not None and laptop.full_w == 150.0 and laptop.idle_w == 12.0 and laptop.tflops == 76.0
    # At 150 W the model's 172 W demand (at 2,040 MHz) is met at (138/160)^(1/3) of the boost clock.
    assert laptop.full_clock_mhz == pytest.approx(2040.0 * (138.0 / 160.0) ** (1 / 3))
    unknown = datasheet_calibration(GpuInfo(index=0, uuid="c", name="NVIDIA RTX A2000", power_limit_default_w=70.0,
                                            power_limit_enforced_w=60.0, sm_clock_max_mhz=1800.0))
    assert unknown is not None and (unknown.idle_w, unknown.full_w) == pytest.approx((5.6, 70.0))
    assert unknown.full_clock_mhz == pytest.approx(1620.0)
    assert datasheet_calibration(GpuInfo(index=0, uuid="d", name="Mystery GPU")) is None


def test_the_sampler_estimates_nvml_readings_too() -> None:
    from desktop.telemetry.nvml import NvmlBackend
    from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu

    # An RTX 4090 at 380 W, 2,040 MHz, utilization 87 %, no cap bit (where the cap binds it reads its utilization).
    fake = FakeNvml([desktop_gpu(clock_event_reasons=0)])
    backend = NvmlBackend.open(fake.module)
    try:
        sampler = Sampler(backend, clock=lambda: T0, monotonic=lambda: T0)
        fake.advance(1.0)
        (reading,) = sampler.tick().gpus
        assert reading.sample is not None
        # No estimate before the GPU's own stress run (issue 22): the datasheet guess is not fed to the advice.
        assert reading.sample.effective_load_pct is None
        sampler.effective_load.calibrate(reading.info.uuid, Calibration(22.0, 520.0, 2040.0, "stress run"))
        fake.advance(1.0)
        (reading,) = sampler.tick().gpus
        assert reading.sample is not None
        assert reading.sample.effective_load_pct == pytest.approx((380.0 - 22.0) / 498.0 * 100.0, abs=0.1)
    finally:
        backend.close()
