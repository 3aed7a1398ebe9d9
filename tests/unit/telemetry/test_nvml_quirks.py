"""Real-GPU quirks in the NVML backend: a failing sensor, T.Limit thresholds, wrapping PCIe counters, MIG,
a GPU the driver put to sleep. Each test reproduces what a real machine does (captures in
/work/shared/realdata/nvidia-smi-q/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from desktop.telemetry.model import DeviceState
from desktop.telemetry.nvml import FAILED_RETRY_S, NvmlBackend
from desktop.telemetry.sampler import Sampler
from tests.fakes.fake_pynvml import (
    FakeGpu,
    FakeNvml,
    FakeProcess,
    ada_desktop_gpu,
    desktop_gpu,
    hopper_mig_gpu,
)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _open(fake: FakeNvml, clock: Clock, **kwargs: Any) -> NvmlBackend:
    return NvmlBackend.open(fake.module, monotonic=clock, sysfs_root=kwargs.pop("sysfs_root", None), **kwargs)


@pytest.fixture
def pair(clock: Clock) -> Iterator[tuple[FakeNvml, NvmlBackend]]:
    fake = FakeNvml([desktop_gpu(), desktop_gpu()])
    backend = _open(fake, clock)
    yield fake, backend
    backend.close()


# --- 1. one failing optional query is that metric n/a, never the whole GPU LOST --------------------


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_OPERATING_SYSTEM,
                                  pynvml.NVML_ERROR_IRQ_ISSUE])
def test_a_sensor_that_always_errs_is_that_metric_na_and_retried_rarely(clock: Clock, code: int) -> None:
    # nvidia-smi shows such a fan as "ERR!" (common on laptops); the rest of the GPU reads fine.
    fake = FakeNvml([desktop_gpu(), desktop_gpu()])
    fake.fail("nvmlDeviceGetFanSpeed", gpu=0, error=code)
    backend = _open(fake, clock)
    try:
        for t in range(1, 40):
            clock.now_s += 1.0
            fake.advance(1.0)
            first, second = backend.sample(float(t))
            assert first.state is DeviceState.OK and first.sample is not None
            assert first.sample.fan_pct is None
            assert first.sample.temperature_c == 78 and first.sample.power_w == 380.0
            assert second.sample is not None and second.sample.fan_pct == 55
        assert fake.calls_by_gpu["nvmlDeviceGetFanSpeed", 0] == 1  # asked once at open, then left alone
        assert "fan_pct" in backend.metric_errors(0) and backend.metric_errors(1) == {}
        assert backend.supported_metrics(0)["fan_pct"] is True  # failing is not "unsupported"
        clock.now_s += FAILED_RETRY_S
        fake.clear_failures()
        fake.advance(6.0)
        reading = backend.sample(100.0)[0]
        assert reading.sample is not None and reading.sample.fan_pct == 55  # retried, and it answers again
        assert backend.metric_errors(0) == {}
    finally:
        backend.close()


def test_a_field_entry_that_errs_is_that_metric_na(clock: Clock) -> None:
    fake = FakeNvml([desktop_gpu(field_errors={pynvml.NVML_FI_DEV_POWER_AVERAGE: pynvml.NVML_ERROR_UNKNOWN})])
    fake.fail("nvmlDeviceGetPowerUsage", error=pynvml.NVML_ERROR_UNKNOWN)
    backend = _open(fake, clock)
    try:
        fake.advance(1.0)
        (reading,) = backend.sample(1.0)
        assert reading.state is DeviceState.OK and reading.sample is not None
        assert reading.sample.power_w is None and reading.sample.energy_mj is not None
    finally:
        backend.close()


def test_an_undecodable_string_is_not_a_lost_gpu(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([desktop_gpu()])

    def bad_name(handle: Any) -> str:
        raise UnicodeDecodeError("utf-8", b"RTX \xff", 4, 5, "invalid start byte")

    monkeypatch.setattr(fake.module, "nvmlDeviceGetName", bad_name)
    backend = _open(fake, clock)
    try:
        (reading,) = backend.sample(1.0)
        assert reading.state is DeviceState.OK and reading.info.name == "GPU 0"
        assert reading.info.uuid == fake.gpus[0].uuid
    finally:
        backend.close()


def test_an_unforeseen_exception_in_a_tick_call_is_that_metric_na(
        clock: Clock, pair: tuple[FakeNvml, NvmlBackend], monkeypatch: pytest.MonkeyPatch) -> None:
    fake, backend = pair

    def broken(handle: Any) -> Any:
        raise ValueError("garbled struct")

    monkeypatch.setattr(fake.module, "nvmlDeviceGetUtilizationRates", broken)
    first, second = backend.sample(1.0)
    assert first.state is second.state is DeviceState.OK
    assert first.sample is not None and first.sample.utilization_gpu_pct is None
    assert first.sample.vram_used_mib is not None


def test_gpu_is_lost_is_still_lost(pair: tuple[FakeNvml, NvmlBackend]) -> None:
    fake, backend = pair
    fake.fail("nvmlDeviceGetClockInfo", gpu=0, error=pynvml.NVML_ERROR_GPU_IS_LOST, times=1)
    assert backend.sample(1.0)[0].state is DeviceState.LOST


def test_a_gpu_whose_every_query_errs_is_lost_and_comes_back(pair: tuple[FakeNvml, NvmlBackend]) -> None:
    fake, backend = pair
    for func in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
                 "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature",
                 "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPowerUsage",
                 "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetFanSpeed", "nvmlDeviceGetPerformanceState",
                 "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetCurrPcieLinkGeneration",
                 "nvmlDeviceGetCurrPcieLinkWidth"):
        fake.fail(func, gpu=0, error=pynvml.NVML_ERROR_UNKNOWN)
    first, second = backend.sample(1.0)
    assert first.state is DeviceState.LOST and "Unknown" in (first.state_detail or "")
    assert second.state is DeviceState.OK
    fake.clear_failures()
    backend.reinit()
    assert backend.sample(2.0)[0].state is DeviceState.OK


# --- 4. temperature thresholds: absolute or relative to the thermal limit ------------------------


def test_ada_thresholds_relative_to_the_thermal_limit_become_absolute(clock: Clock) -> None:
    # nvsmi_q_RTX4090.txt: 28 C now, T.Limit 56 C, shutdown -7, slowdown -2, max operating 0.
    fake = FakeNvml([ada_desktop_gpu()])
    backend = _open(fake, clock)
    try:
        (info,) = backend.devices()
        assert info.temp_thresholds_relative is True
        assert (info.temp_max_operating_c, info.temp_slowdown_c, info.temp_shutdown_c) == (84.0, 86.0, 91.0)
    finally:
        backend.close()


def test_older_gpus_give_absolute_thresholds(clock: Clock) -> None:
    # nvsmi_q_RTX3090.txt: shutdown 98, slowdown 95, max operating 93 C, no T.Limit.
    fake = FakeNvml([desktop_gpu(temp_shutdown_c=98, temp_slowdown_c=95, temp_max_operating_c=93),
                     FakeGpu(name="NVIDIA GeForce MX330", temp_shutdown_c=102, temp_slowdown_c=97,
                             temp_max_operating_c=57)])  # README: an MX330 laptop platform sets 57 C
    backend = _open(fake, clock)
    try:
        rtx3090, mx330 = backend.devices()
        assert rtx3090.temp_thresholds_relative is False
        assert (rtx3090.temp_max_operating_c, rtx3090.temp_slowdown_c, rtx3090.temp_shutdown_c) == (93, 95, 98)
        assert (mx330.temp_max_operating_c, mx330.temp_slowdown_c, mx330.temp_shutdown_c) == (57, 97, 102)
    finally:
        backend.close()


def test_tlimit_offsets_without_the_margin_fall_back_to_absolute(clock: Clock) -> None:
    fake = FakeNvml([ada_desktop_gpu(temp_margin_c=None, unsupported=set())])
    backend = _open(fake, clock)
    try:
        (info,) = backend.devices()
        assert info.temp_thresholds_relative is False
        assert (info.temp_slowdown_c, info.temp_shutdown_c) == (87, 95)
    finally:
        backend.close()


# --- 8a. PCIe byte counters wrap modulo their width ---------------------------------------------------


def test_a_32_bit_pcie_counter_that_wraps_gives_the_right_rate(clock: Clock) -> None:
    gpu = desktop_gpu(pcie_tx_bytes=2**32 - 1000 * 1024, pcie_rx_bytes=2**32 - 10, pcie_tx_kb_s=4000,
                      pcie_rx_kb_s=2000)
    fake = FakeNvml([gpu])
    backend = _open(fake, clock)
    try:
        fake.advance(1.0)
        # A driver with 32-bit counters: the value wraps at 2^32 instead of growing past it.
        gpu.pcie_tx_bytes %= 2**32
        gpu.pcie_rx_bytes %= 2**32
        assert gpu.pcie_tx_bytes < 2**32 - 1000 * 1024  # it did wrap
        (reading,) = backend.sample(1.0)
        assert reading.sample is not None
        assert reading.sample.pcie_tx_kib_s == pytest.approx(4000.0)
        assert reading.sample.pcie_rx_kib_s == pytest.approx(2000.0)
    finally:
        backend.close()


def test_a_64_bit_pcie_counter_that_goes_back_is_a_reset(clock: Clock) -> None:
    gpu = desktop_gpu(pcie_tx_bytes=50 * 2**32, pcie_rx_bytes=60 * 2**32)
    fake = FakeNvml([gpu])
    backend = _open(fake, clock)
    try:
        gpu.pcie_tx_bytes, gpu.pcie_rx_bytes = 1000, 2000  # the driver reloaded: counters start again
        fake.advance(1.0)
        (reading,) = backend.sample(1.0)
        assert reading.sample is not None and reading.sample.pcie_tx_kib_s is None  # no rate across a reset
        fake.advance(1.0)
        (reading,) = backend.sample(2.0)
        assert reading.sample is not None and reading.sample.pcie_tx_kib_s == pytest.approx(1200.0)
    finally:
        backend.close()


# --- 9. MIG ------------------------------------------------------------------------------------------


def test_mig_parent_utilization_is_not_available_and_instances_are_listed(clock: Clock) -> None:
    fake = FakeNvml([hopper_mig_gpu(), desktop_gpu()])  # the parent answers utilization 0 under MIG
    backend = _open(fake, clock)
    try:
        parent, other = backend.devices()
        assert parent.mig_enabled is True and other.mig_enabled is None
        fake.advance(1.0)
        reading = backend.sample(1.0)[0]
        assert reading.state is DeviceState.OK and reading.sample is not None
        assert reading.sample.utilization_gpu_pct is None and reading.sample.utilization_mem_pct is None
        assert reading.sample.vram_used_mib is not None
        supported = backend.supported_metrics(0)
        assert supported["utilization_gpu_pct"] is False and supported["vram_used_mib"] is True
        first, second = backend.mig_instances(0)
        assert (first.uuid, first.gpu_instance_id, first.vram_total_mib, first.vram_used_mib, first.pids) == (
            "MIG-fake-0001", 1, 40 * 1024.0, 2 * 1024.0, (4242,))
        assert second.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb" and second.pids == ()
        assert backend.mig_instances(1) == []
        assert backend.sample(2.0)[0].state is DeviceState.OK  # listing did not disturb the parent
    finally:
        backend.close()


# --- 10. a GPU the driver put to sleep ---------------------------------------------------------------


def _sysfs(root: Path, bus_id: str, status: str, vendor: str = "0x10de") -> Path:
    device = root / "bus" / "pci" / "devices" / bus_id
    (device / "power").mkdir(parents=True, exist_ok=True)
    (device / "vendor").write_text(vendor + "\n")
    status_file = device / "power" / "runtime_status"
    status_file.write_text(status + "\n")
    return status_file


def test_a_sleeping_gpu_is_not_polled_and_resumes_when_it_wakes(clock: Clock, tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu(processes=[FakeProcess(10)]), desktop_gpu(processes=[FakeProcess(11)])])
    status = _sysfs(tmp_path, "0000:01:00.0", "active")  # GPU 0: NVML bus id 00000000:01:00.0
    backend = _open(fake, clock, sysfs_root=tmp_path)
    try:
        status.write_text("suspended\n")
        fake.reset_counts()
        sampler = Sampler(backend, reinit_period_s=0.0, clock=lambda: 1e9, monotonic=clock)
        for _ in range(3):
            clock.now_s += 5.0
            snap = sampler.tick()
            assert snap.gpus[0].state is DeviceState.ASLEEP and snap.gpus[0].sample is None
            assert snap.gpus[1].state is DeviceState.OK
            assert [p.pid for p in snap.processes] == [11]
        assert not [key for key in fake.calls_by_gpu if key[1] == 0]  # not one NVML call on the sleeper
        status.write_text("active\n")
        fake.advance(1.0)
        reading = backend.sample(2.0)[0]
        assert reading.state is DeviceState.OK and reading.sample is not None
        assert reading.sample.temperature_c == 78
    finally:
        backend.close()


def test_a_gpu_asleep_at_start_is_read_in_full_when_it_wakes(clock: Clock, tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu()])
    status = _sysfs(tmp_path, "0000:01:00.0", "suspended")
    backend = _open(fake, clock, sysfs_root=tmp_path)
    try:
        (info,) = backend.devices()
        assert info.name == fake.gpus[0].name and info.uuid == fake.gpus[0].uuid  # who it is, nothing more
        assert info.vram_total_mib is None
        assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == fake.calls["nvmlDeviceGetFieldValues"] == 0
        assert backend.sample(1.0)[0].state is DeviceState.ASLEEP
        status.write_text("active\n")
        reading = backend.sample(2.0)[0]
        assert reading.state is DeviceState.OK and reading.info.vram_total_mib == 16 * 1024.0
    finally:
        backend.close()


def test_the_sleep_check_ignores_a_non_nvidia_device_at_that_address(clock: Clock, tmp_path: Path) -> None:
    fake = FakeNvml([FakeGpu()])
    _sysfs(tmp_path, "0000:01:00.0", "suspended", vendor="0x8086")
    backend = _open(fake, clock, sysfs_root=tmp_path)
    try:
        assert backend.sample(1.0)[0].state is DeviceState.OK
    finally:
        backend.close()
