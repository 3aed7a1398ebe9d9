"""The NVML gateway on its own: one session, calls sorted into value / MISSING / lost, per-device memory."""

from __future__ import annotations

from collections.abc import Iterator

import pynvml
import pytest

from desktop.telemetry.backend import BackendUnavailable
from desktop.telemetry.nvml.call_memory import FAILED_RETRY_S, CallMemory
from desktop.telemetry.nvml.gateway import NvmlGateway
from desktop.telemetry.nvml.outcomes import MISSING, NvmlLost
from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu


class Clock:
    def __init__(self) -> None:
        self.now_s = 50.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml([desktop_gpu()])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gateway(fake: FakeNvml, clock: Clock) -> Iterator[NvmlGateway]:
    gw = NvmlGateway(fake.module, monotonic=clock)
    gw.start()
    yield gw
    gw.shutdown()


def test_start_is_once_and_shutdown_is_once(fake: FakeNvml) -> None:
    gw = NvmlGateway(fake.module)
    gw.start()
    gw.start()
    assert fake.init_count == 1 and fake.calls["nvmlInit"] + fake.calls["nvmlInit_v2"] == 1
    gw.shutdown()
    gw.shutdown()
    assert fake.init_count == 0 and fake.calls["nvmlShutdown"] == 1 and gw.closed


def test_a_start_that_fails_says_why() -> None:
    with pytest.raises(BackendUnavailable, match="not loaded"):
        NvmlGateway(FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED).module).start()


def test_not_supported_is_missing_and_never_asked_again(fake: FakeNvml, gateway: NvmlGateway) -> None:
    handle = fake.module.nvmlDeviceGetHandleByIndex(0)
    memory = CallMemory(label="GPU 0")
    fake.fail("nvmlDeviceGetFanSpeed", error=pynvml.NVML_ERROR_NOT_SUPPORTED)
    assert gateway.device_call(memory, "fan", "nvmlDeviceGetFanSpeed", handle) is MISSING
    assert gateway.device_call(memory, "fan", "nvmlDeviceGetFanSpeed", handle) is MISSING
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 1 and memory.is_unsupported("fan")
    other = CallMemory(label="GPU 1")  # memory is per device: another GPU is still asked
    assert gateway.device_call(other, "fan", "nvmlDeviceGetFanSpeed", handle) is MISSING
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 2


def test_a_failing_sensor_rests_then_is_asked_again(fake: FakeNvml, gateway: NvmlGateway, clock: Clock) -> None:
    handle = fake.module.nvmlDeviceGetHandleByIndex(0)
    memory = CallMemory(label="GPU 0")
    fake.fail("nvmlDeviceGetFanSpeed", error=pynvml.NVML_ERROR_UNKNOWN, times=1)
    assert gateway.device_call(memory, "fan", "nvmlDeviceGetFanSpeed", handle) is MISSING
    assert memory.failure("fan") is not None and memory.every_query_failed()
    clock.now_s += FAILED_RETRY_S - 1.0
    assert gateway.device_call(memory, "fan", "nvmlDeviceGetFanSpeed", handle) is MISSING
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 1
    clock.now_s += 1.0
    assert gateway.device_call(memory, "fan", "nvmlDeviceGetFanSpeed", handle) == desktop_gpu().fan_pct
    assert memory.failure("fan") is None and not memory.is_unsupported("fan")


def test_a_lost_gpu_raises_for_a_device_and_is_missing_for_a_system_call(fake: FakeNvml,
                                                                           gateway: NvmlGateway) -> None:
    handle = fake.module.nvmlDeviceGetHandleByIndex(0)
    fake.lose(0)
    with pytest.raises(NvmlLost, match="nvmlDeviceGetFanSpeed"):
        gateway.device_call(CallMemory(label="GPU 0"), "fan", "nvmlDeviceGetFanSpeed", handle)
    fake.fail("nvmlSystemGetDriverVersion", error=pynvml.NVML_ERROR_GPU_IS_LOST)
    assert gateway.call("nvmlSystemGetDriverVersion") is MISSING


def test_a_field_entry_is_sorted_like_a_call(gateway: NvmlGateway) -> None:
    memory = CallMemory(label="GPU 0")
    assert gateway.field_answered(memory, 185, 0)
    assert not gateway.field_answered(memory, 83, pynvml.NVML_ERROR_NOT_SUPPORTED)
    assert memory.is_unsupported("field:83")
    assert not gateway.field_answered(memory, 197, pynvml.NVML_ERROR_TIMEOUT)  # transient: nothing remembered
    assert not memory.is_unsupported("field:197") and memory.failure("field:197") is None
    with pytest.raises(NvmlLost):
        gateway.field_answered(memory, 198, pynvml.NVML_ERROR_GPU_IS_LOST)


def test_unknown_functions_are_remembered_and_constants_fall_back(fake: FakeNvml, gateway: NvmlGateway) -> None:
    del fake.module.nvmlDeviceGetCurrPcieLinkWidth
    memory = CallMemory(label="GPU 0")
    handle = fake.module.nvmlDeviceGetHandleByIndex(0)
    assert gateway.device_call(memory, "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", handle) is MISSING
    assert gateway.unknown_functions == {"nvmlDeviceGetCurrPcieLinkWidth"} and memory.is_unsupported("pcie_width")
    assert gateway.const("NVML_CLOCK_SM", 99) == pynvml.NVML_CLOCK_SM
    assert gateway.const("NVML_NO_SUCH_CONSTANT", 7) == 7
