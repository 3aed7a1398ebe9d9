"""NVML's per-reason time counters: exact seconds per sample, the perf-policy fallback, NotSupported."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from desktop.telemetry.model import DeviceState, GpuSample
from desktop.telemetry.nvml import NvmlBackend
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, desktop_gpu

COUNTERS = ("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s", "clock_event_hw_thermal_s",
            "clock_event_hw_power_brake_s")
HW_THERMAL = int(pynvml.nvmlClocksEventReasonHwThermalSlowdown)


def _asked_fields(fake: FakeNvml) -> list[list[int]]:
    """Record the field ids of every nvmlDeviceGetFieldValues call (the batch each tick makes)."""
    asked: list[list[int]] = []
    real: Callable[..., Any] = fake.module.nvmlDeviceGetFieldValues

    def spy(handle: Any, field_ids: list[Any]) -> Any:
        asked.append([int(f) for f in field_ids])
        return real(handle, field_ids)

    fake.module.nvmlDeviceGetFieldValues = spy
    # The backend makes the batch call through the C symbol with a request array it keeps: spied there too.
    lookup: Callable[[str], Any] = fake.module._nvmlGetFunctionPointer

    def c_spy(handle: Any, count: Any, ref: Any) -> Any:
        asked.append([int(ref._obj[i].fieldId) for i in range(count.value)])
        return lookup("nvmlDeviceGetFieldValues")(handle, count, ref)

    fake.module._nvmlGetFunctionPointer = lambda name: c_spy if name == "nvmlDeviceGetFieldValues" else lookup(name)
    return asked


def _open(*gpus: FakeGpu) -> tuple[FakeNvml, NvmlBackend]:
    fake = FakeNvml(list(gpus))
    return fake, NvmlBackend.open(fake.module)


@pytest.fixture
def power_capped() -> Iterator[tuple[FakeNvml, NvmlBackend]]:
    # A GEMM at its power limit: the SW power cap bit set at every sample, nothing else.
    fake, backend = _open(desktop_gpu(clock_event_reasons=0x4))
    yield fake, backend
    backend.close()


def _sample(fake: FakeNvml, backend: NvmlBackend, t: float, dt_s: float = 1.0) -> GpuSample:
    fake.advance(dt_s)
    reading = backend.sample(t)[0]
    assert reading.state is DeviceState.OK and reading.sample is not None, reading.state_detail
    return reading.sample


def test_counters_give_the_exact_time_per_sample_even_for_an_episode_the_bits_miss(
        power_capped: tuple[FakeNvml, NvmlBackend]) -> None:
    fake, backend = power_capped
    gpu = fake.gpus[0]
    first = _sample(fake, backend, 100.0)
    assert all(getattr(first, name) is None for name in COUNTERS)  # no interval yet
    second = _sample(fake, backend, 101.0)
    assert second.clock_event_sw_power_cap_s == 1.0
    assert (second.clock_event_sw_thermal_s, second.clock_event_hw_thermal_s,
            second.clock_event_hw_power_brake_s) == (0.0, 0.0, 0.0)
    # 0.3 s of HW thermal slowdown between two 1 Hz samples: over before the next one looks.
    gpu.hw_thermal_ns += 300_000_000
    third = _sample(fake, backend, 102.0)
    assert third.clock_event_reasons is not None and not third.clock_event_reasons & HW_THERMAL
    assert third.clock_event_hw_thermal_s == pytest.approx(0.3, abs=1e-9)
    assert third.clock_event_sw_power_cap_s == 1.0
    # A slower tick counts the whole interval.
    assert _sample(fake, backend, 104.5, dt_s=2.5).clock_event_sw_power_cap_s == pytest.approx(2.5)
    assert _sample(fake, backend, 105.5).clock_event_hw_thermal_s == 0.0


def test_counters_cost_no_extra_call(power_capped: tuple[FakeNvml, NvmlBackend]) -> None:
    fake, backend = power_capped
    asked = _asked_fields(fake)
    _sample(fake, backend, 100.0)
    fake.reset_counts()
    _sample(fake, backend, 101.0)
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1
    assert {74, 269, 270, 271} <= set(asked[-1]) and 75 not in asked[-1]


def test_an_older_driver_falls_back_to_the_perf_policy_field() -> None:
    # Before the Clocks Event Reasons Counters (driver 575), only the perf-policy fields answer.
    fake, backend = _open(desktop_gpu(clock_event_reasons=0x20, unsupported_fields={269, 270, 271}))
    try:
        asked = _asked_fields(fake)
        _sample(fake, backend, 100.0)
        sample = _sample(fake, backend, 101.0)
        assert sample.clock_event_sw_thermal_s == 1.0  # from NVML_FI_DEV_PERF_POLICY_THERMAL (75)
        assert sample.clock_event_sw_power_cap_s == 0.0  # 74 is both names' id
        assert sample.clock_event_hw_thermal_s is None and sample.clock_event_hw_power_brake_s is None
        assert 75 in asked[-1] and not {269, 270, 271} & set(asked[-1])  # remembered, not asked again
        supported = backend.supported_metrics(0)
        assert supported["clock_event_sw_thermal_s"] and supported["clock_event_sw_power_cap_s"]
        assert not supported["clock_event_hw_thermal_s"] and not supported["clock_event_hw_power_brake_s"]
    finally:
        backend.close()


def test_not_supported_counters_are_none_and_the_rest_is_read() -> None:
    fake, backend = _open(desktop_gpu(unsupported_fields={74, 75, 269, 270, 271}))
    try:
        for t in range(3):
            sample = _sample(fake, backend, 100.0 + t)
            assert all(getattr(sample, name) is None for name in COUNTERS)
            assert sample.power_w == 380.0 and sample.clock_event_reasons == 0x4
        assert not any(backend.supported_metrics(0)[name] for name in COUNTERS)
    finally:
        backend.close()


def test_a_counter_reset_gives_none_once(power_capped: tuple[FakeNvml, NvmlBackend]) -> None:
    fake, backend = power_capped
    _sample(fake, backend, 100.0)
    assert _sample(fake, backend, 101.0).clock_event_sw_power_cap_s == 1.0
    fake.gpus[0].sw_power_cap_ns = 0  # the driver was reloaded
    assert _sample(fake, backend, 102.0).clock_event_sw_power_cap_s is None
    assert _sample(fake, backend, 103.0).clock_event_sw_power_cap_s == 1.0


def test_a_field_that_is_no_time_counter_is_left_unread(power_capped: tuple[FakeNvml, NvmlBackend]) -> None:
    # Field ids moved between nvml.h versions: an id that means something else here jumps by far
    # more than the time that passed. It is dropped, not reported as hours of throttling.
    fake, backend = power_capped
    asked = _asked_fields(fake)
    _sample(fake, backend, 100.0)
    fake.gpus[0].hw_power_brake_ns += 10**13
    assert _sample(fake, backend, 101.0).clock_event_hw_power_brake_s is None
    assert _sample(fake, backend, 102.0).clock_event_hw_power_brake_s is None
    assert 271 not in asked[-1]
    assert _sample(fake, backend, 103.0).clock_event_sw_power_cap_s == 1.0  # the others go on
    assert backend.supported_metrics(0)["clock_event_hw_power_brake_s"] is False


def test_a_batch_refused_whole_is_asked_again_without_the_counters() -> None:
    # An old driver might refuse the whole batch over ids it does not know: power, energy and
    # the PCIe counters must still come from the batch, not from the per-metric fallbacks.
    fake = FakeNvml([desktop_gpu()])
    fake.fail("nvmlDeviceGetFieldValues", error=pynvml.NVML_ERROR_INVALID_ARGUMENT, times=1)
    backend = NvmlBackend.open(fake.module)
    try:
        _sample(fake, backend, 100.0)
        fake.reset_counts()
        sample = _sample(fake, backend, 101.0)
        assert sample.power_w == 380.0 and sample.pcie_rx_kib_s == pytest.approx(3400)
        assert fake.calls["nvmlDeviceGetPowerUsage"] == 0 and fake.calls["nvmlDeviceGetFieldValues"] == 1
        assert all(getattr(sample, name) is None for name in COUNTERS)
    finally:
        backend.close()
