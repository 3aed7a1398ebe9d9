"""The fake pynvml itself: injection, counting, latency, and gpustat/nvitop reading it like a driver."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Iterator

import pynvml
import pytest

from tests.fakes import nvml_abi as abi
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, FakeProcess, desktop_gpu

_TOOLS = ("gpustat", "nvitop", "pynvml")


@pytest.fixture
def fresh_tool_modules() -> Iterator[None]:
    saved = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] in _TOOLS}
    for name in saved:
        del sys.modules[name]
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in _TOOLS]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_failures_counts_and_lost_handles() -> None:
    fake = FakeNvml(2)
    nv = fake.module
    nv.nvmlInit()
    h0, h1 = nv.nvmlDeviceGetHandleByIndex(0), nv.nvmlDeviceGetHandleByIndex(1)
    fake.fail("nvmlDeviceGetFanSpeed", gpu=1, error=pynvml.NVML_ERROR_NO_PERMISSION, times=1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetFanSpeed(h0)  # a laptop: no fan reading
    with pytest.raises(pynvml.NVMLError_NoPermission):
        nv.nvmlDeviceGetFanSpeed(h1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetFanSpeed(h1)  # the injected error was for one call only
    fake.lose(1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetTemperatureV(h1, pynvml.NVML_TEMPERATURE_GPU)
    fake.recover(1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nv.nvmlDeviceGetName(h1)  # a stale handle stays dead
    assert nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(1)).startswith("NVIDIA")
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 3
    assert fake.calls_by_gpu["nvmlDeviceGetFanSpeed", 1] == 2
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()


def test_field_values_are_real_structures() -> None:
    fake = FakeNvml([FakeGpu(unsupported_fields={pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION})])
    nv = fake.module
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    power, energy, bogus = nv.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_AVERAGE,
                                                           pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 1])
    # The header's struct (tests/fakes/nvml_abi.py), laid out as the installed binding's own.
    assert isinstance(power, abi.c_nvmlFieldValue_t)
    assert ctypes.sizeof(power) == ctypes.sizeof(pynvml.c_nvmlFieldValue_t)
    assert power.nvmlReturn == pynvml.NVML_SUCCESS and power.value.uiVal == 142_000 and power.timestamp > 0
    assert energy.nvmlReturn == bogus.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_c_function_pointers_fill_out_parameters() -> None:
    fake = FakeNvml([desktop_gpu(processes=[FakeProcess(5), FakeProcess(6, kind="graphics")])])
    nv = fake.module
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    fn = nv._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    count = ctypes.c_uint(0)
    assert fn(h, ctypes.byref(count), None) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE and count.value == 1
    array = (abi.c_nvmlProcessInfo_v3_t * 3)()
    count.value = 3
    assert fn(h, ctypes.byref(count), array) == pynvml.NVML_SUCCESS
    assert (count.value, array[0].pid) == (1, 5)
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1  # size query + fill = one call
    memory = pynvml.c_nvmlMemory_v2_t()
    assert nv._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")(h, ctypes.byref(memory)) == 0
    assert memory.total == 24 * 1024**3
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nv._nvmlGetFunctionPointer("nvmlDeviceGetNoSuchThing")


@pytest.mark.parametrize("mode", ["busy", "sleep"])
def test_latency_is_per_call(mode: str) -> None:
    fake = FakeNvml(1, latency_s=0.002, latency_mode=mode)
    fake.module.nvmlInit()
    wall0 = time.perf_counter()
    for _ in range(10):
        fake.module.nvmlDeviceGetCount()
    assert time.perf_counter() - wall0 >= 0.02  # at least the latency; never an upper bound
    assert fake.total_calls() == 11


def test_gpustat_and_nvitop_read_the_fake(monkeypatch: pytest.MonkeyPatch, fresh_tool_modules: None) -> None:
    fake = FakeNvml([FakeGpu(processes=[FakeProcess(os.getpid())]), desktop_gpu()])
    fake.install(monkeypatch)
    import gpustat
    import gpustat.core

    monkeypatch.setattr(gpustat.core, "time", type("NoSleep", (), {"sleep": staticmethod(lambda _: None)}))
    stats = gpustat.new_query()
    first = stats.gpus[0].entry
    assert (first["temperature.gpu"], first["power.draw"], first["memory.total"]) == (78, 142, 16384)
    assert [p["pid"] for p in first["processes"]] == [os.getpid()]
    assert stats.gpus[1].entry["fan.speed"] == 55
    from nvitop import Device

    devices = Device.all()
    snapshot = devices[0].as_snapshot()
    assert (snapshot.temperature, snapshot.power_usage, snapshot.gpu_utilization) == (78, 142_000, 87)
    assert snapshot.memory_used == 3 * 1024**3
    assert list(devices[0].processes()) == [os.getpid()]
