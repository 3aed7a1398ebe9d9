"""What a tick keeps between reads (issue 27): the field-values request array, the memory clock by P-state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from desktop.telemetry.model import DeviceState, GpuSample
from desktop.telemetry.nvml import NvmlBackend
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml([FakeGpu()])


@pytest.fixture
def backend(fake: FakeNvml) -> Iterator[NvmlBackend]:
    b = NvmlBackend.open(fake.module)
    yield b
    b.close()


def _sample(fake: FakeNvml, backend: NvmlBackend, t: float) -> GpuSample:
    fake.advance(1.0)
    reading = backend.sample(t)[0]
    assert reading.state is DeviceState.OK and reading.sample is not None, reading.state_detail
    return reading.sample


def _spy_c_batch(fake: FakeNvml) -> list[tuple[Any, list[int]]]:
    """Each C-level nvmlDeviceGetFieldValues call: (the request array passed, its field ids)."""
    seen: list[tuple[Any, list[int]]] = []
    lookup: Callable[[str], Any] = fake.module.__dict__["_nvmlGetFunctionPointer"]

    def c_spy(handle: Any, count: Any, ref: Any) -> Any:
        seen.append((ref._obj, [int(ref._obj[i].fieldId) for i in range(count.value)]))
        return lookup("nvmlDeviceGetFieldValues")(handle, count, ref)

    fake.module.__dict__["_nvmlGetFunctionPointer"] = (
        lambda name: c_spy if name == "nvmlDeviceGetFieldValues" else lookup(name))
    return seen


def _no_wrapper(*_: Any) -> Any:
    raise AssertionError("the binding's nvmlDeviceGetFieldValues wrapper was called")


def test_the_field_batch_reuses_its_request_array(fake: FakeNvml, backend: NvmlBackend) -> None:
    seen = _spy_c_batch(fake)
    fake.module.__dict__["nvmlDeviceGetFieldValues"] = _no_wrapper
    first, second = _sample(fake, backend, 100.0), _sample(fake, backend, 101.0)
    assert first.power_w == second.power_w == 142.0  # read through the C symbol, the wrapper untouched
    assert first.energy_mj is not None
    assert len(seen) == 2 and seen[0][0] is seen[1][0]  # one array, kept
    assert 198 in seen[1][1]
    # A field that stops answering (NotSupported) is left out: the request is built again without it.
    fake.gpus[0].unsupported_fields.add(198)
    _sample(fake, backend, 102.0)  # the tick that learns it
    fourth = _sample(fake, backend, 103.0)
    assert 198 not in seen[-1][1] and seen[-1][0] is not seen[1][0]
    assert fourth.power_w == 142.0
    assert backend.supported_metrics(0)["pcie_rx_kib_s"]  # the throughput call stands in for the counter


def test_a_binding_without_c_symbols_is_read_through_its_wrapper(fake: FakeNvml) -> None:
    del fake.module.__dict__["_nvmlGetFunctionPointer"]
    asked: list[list[int]] = []
    real: Callable[..., Any] = fake.module.__dict__["nvmlDeviceGetFieldValues"]

    def spy(handle: Any, field_ids: list[int]) -> Any:
        asked.append(list(field_ids))
        return real(handle, field_ids)

    fake.module.__dict__["nvmlDeviceGetFieldValues"] = spy
    backend = NvmlBackend.open(fake.module)
    try:
        assert _sample(fake, backend, 100.0).power_w == 142.0
        assert asked and 185 in asked[-1]
    finally:
        backend.close()


def test_a_failing_c_batch_is_sorted_like_any_call(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.fail("nvmlDeviceGetFieldValues", error=pynvml.NVML_ERROR_GPU_IS_LOST)
    fake.advance(1.0)
    reading = backend.sample(100.0)[0]
    assert reading.state is DeviceState.LOST and "GPU is lost" in (reading.state_detail or "")


def test_the_memory_clock_is_asked_again_when_the_p_state_moves(fake: FakeNvml, backend: NvmlBackend) -> None:
    _sample(fake, backend, 100.0)  # after the open: the slow metrics are due again
    fake.reset_counts()
    for t in range(101, 111):  # two slow refreshes, the P-state where it was: no memory clock asked
        assert _sample(fake, backend, float(t)).mem_clock_mhz == 9001
    assert fake.calls["nvmlDeviceGetPerformanceState"] == 2
    assert fake.calls["nvmlDeviceGetClockInfo"] == 10  # the SM clock, each tick
    gpu = fake.gpus[0]
    gpu.pstate, gpu.mem_clock_mhz = 8, 405  # idle: P8 and the memory clock it sets
    samples = [_sample(fake, backend, float(t)) for t in range(111, 116)]
    assert samples[-1].pstate == 8 and samples[-1].mem_clock_mhz == 405
