"""Live limits: the enforced power limit and T.Limit thresholds are read again on a slow period and on an
AC/battery change, stored as ``limits`` events when they change, and the stress guard follows them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from desktop.telemetry.limits import LimitsWatch
from desktop.telemetry.model import HostSample
from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.nvml.backend import LIMITS_PERIOD_S
from desktop.telemetry.sampler import Sampler
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import ada_laptop


def _open(monkeypatch: pytest.MonkeyPatch) -> tuple[NvmlDriver, NvmlBackend]:
    driver = NvmlDriver(ada_laptop())
    return driver, NvmlBackend.open(driver.install(monkeypatch))


def test_the_enforced_limit_and_thresholds_follow_the_driver_on_the_slow_period(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver, backend = _open(monkeypatch)
    try:
        spec = driver.personality.gpus[0]
        first = backend.sample(1000.0)[0].info
        # nvsmi_q_RTX4070Laptop_WSL_566.36.txt: 61.24 W enforced; 42 C + margin 33 = limit 75, slowdown -2.
        assert first.power_limit_enforced_w == pytest.approx(61.24) and first.temp_slowdown_c == 77.0
        spec.power_limit_w = 35.0  # on battery
        assert backend.sample(1000.0 + LIMITS_PERIOD_S - 1)[0].info.power_limit_enforced_w == pytest.approx(61.24)
        later = backend.sample(1000.0 + LIMITS_PERIOD_S)[0].info
        assert later.power_limit_enforced_w == pytest.approx(35.0)
    finally:
        backend.close()


def test_a_threshold_read_on_a_busy_gpu_is_corrected_by_a_later_idle_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVML's margin is against the nearest threshold across sensors: on a busy GPU the HBM/hot spot
    # sits closer to its limit than the core, so core + margin reads the limit 6 °C low.
    driver = NvmlDriver(ada_laptop())
    driver.personality.gpus[0].tlimit_margin_c = 27  # at open: busy
    backend = NvmlBackend.open(driver.install(monkeypatch))
    try:
        assert backend.sample(0.0)[0].info.temp_slowdown_c == 71.0
        driver.personality.gpus[0].tlimit_margin_c = 33  # idle again: the true limit, 75 C
        assert backend.sample(LIMITS_PERIOD_S)[0].info.temp_slowdown_c == 77.0
        driver.personality.gpus[0].tlimit_margin_c = 27  # busy again: the higher value is kept
        assert backend.sample(2 * LIMITS_PERIOD_S)[0].info.temp_slowdown_c == 77.0
    finally:
        backend.close()


class _Host:
    def __init__(self) -> None:
        self.on_ac = True

    def sample(self) -> HostSample:
        return HostSample(on_ac_power=self.on_ac)

    def describe(self, processes: list) -> list:  # type: ignore[type-arg]
        return processes


def test_unplugging_reads_the_limits_at_the_next_tick_and_the_change_is_an_event(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver, backend = _open(monkeypatch)
    host = _Host()
    clock = [1000.0]
    sampler = Sampler(backend, host, clock=lambda: clock[0], monotonic=lambda: clock[0])  # type: ignore[arg-type]
    watch = LimitsWatch()
    try:
        assert watch.events(sampler.tick()) == []
        spec = driver.personality.gpus[0]
        spec.power_limit_w = 35.0
        spec.tlimit_margin_c = 36  # read at a cooler moment: the limit reads 3 °C higher
        host.on_ac = False
        clock[0] += 1.0
        assert watch.events(sampler.tick()) == []  # this tick saw the power source change...
        clock[0] += 1.0
        snapshot = sampler.tick()  # ...the next reads the limits, well inside the period
        assert snapshot.gpus[0].info.power_limit_enforced_w == pytest.approx(35.0)  # (stored as envelope.limit)
        assert watch.events(snapshot) == [
            (1002.0, "limits", "GPU-1b724e78-eef5-4163-d43c-e4da15d41176",
             "slowdown temperature 77 °C -> 80 °C; shutdown temperature 87 °C -> 90 °C; "
             "max operating temperature 75 °C -> 78 °C")]
        clock[0] += 1.0
        assert watch.events(sampler.tick()) == []  # stored once, when it changed
    finally:
        sampler.close()


def test_the_stress_guard_follows_the_current_thresholds() -> None:
    from desktop.stress.devices import GpuTarget
    from desktop.stress.run_model import StressConfig
    from desktop.stress.runner import StressRunner
    from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample, Snapshot, SourceInfo

    info = GpuInfo(index=0, uuid="GPU-x", name="NVIDIA GeForce RTX 4070 Laptop GPU", temp_slowdown_c=71.0,
                   temp_shutdown_c=81.0, temp_max_operating_c=69.0, temp_thresholds_relative=True)
    runner = StressRunner(StressConfig(target=GpuTarget("sim"), duration_s=10.0))
    runner._arm(info)
    assert runner.guard_c == 72.0  # max operating + 3, read on a busy start
    fixed = replace(info, temp_slowdown_c=77.0, temp_shutdown_c=87.0, temp_max_operating_c=75.0)
    reading = GpuReading(fixed, DeviceState.OK, GpuSample(temperature_c=73.0))
    snapshot = Snapshot(time_s=1.0, monotonic_s=1.0, source=SourceInfo("nvml", "NVML"), gpus=(reading,))
    assert runner._guard_stop(snapshot, 1.0) is None  # 73 °C: under the current guard (78 °C), not the stale 72
    assert runner.guard_c == 78.0
