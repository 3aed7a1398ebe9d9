"""The NVML backend against the fake pynvml: metrics, NotSupported memory, lost GPUs, fallbacks."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pynvml
import pytest

from desktop.telemetry.backend import BackendUnavailable
from desktop.telemetry.model import CLOCK_EVENT_COUNTERS, GPU_METRIC_NAMES, DeviceState, GpuSample
from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, FakeProcess, desktop_gpu

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED

#: metric -> (functions to fail, field ids to fail, metrics that share those calls and go too)
KILL: dict[str, tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]] = {
    "utilization_gpu_pct": (("nvmlDeviceGetUtilizationRates",), (), ("utilization_mem_pct",)),
    "utilization_mem_pct": (("nvmlDeviceGetUtilizationRates",), (), ("utilization_gpu_pct",)),
    "vram_used_mib": (("nvmlDeviceGetMemoryInfo",), (), ("vram_free_mib",)),
    "vram_free_mib": (("nvmlDeviceGetMemoryInfo",), (), ("vram_used_mib",)),
    "temperature_c": (("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"), (), ()),
    "power_w": (("nvmlDeviceGetPowerUsage",), (185,), ("effective_load_pct",)),
    "energy_mj": (("nvmlDeviceGetTotalEnergyConsumption",), (83,), ()),
    "sm_clock_mhz": (("nvmlDeviceGetClockInfo",), (), ("mem_clock_mhz",)),
    "mem_clock_mhz": (("nvmlDeviceGetClockInfo",), (), ("sm_clock_mhz",)),
    "fan_pct": (("nvmlDeviceGetFanSpeed",), (), ()),
    "clock_event_reasons": (("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
                            (), ()),
    "pcie_rx_kib_s": (("nvmlDeviceGetPcieThroughput",), (197, 198), ("pcie_tx_kib_s",)),
    "pcie_tx_kib_s": (("nvmlDeviceGetPcieThroughput",), (197, 198), ("pcie_rx_kib_s",)),
    "pcie_gen": (("nvmlDeviceGetCurrPcieLinkGeneration",), (), ()),
    "pcie_width": (("nvmlDeviceGetCurrPcieLinkWidth",), (), ()),
    "pstate": (("nvmlDeviceGetPerformanceState",), (), ()),
    "clock_event_sw_power_cap_s": ((), (74,), ()),
    "clock_event_sw_thermal_s": ((), (269, 75), ()),
    "clock_event_hw_thermal_s": ((), (270,), ()),
    "clock_event_hw_power_brake_s": ((), (271,), ()),
    # Estimated by the sampler from power (desktop/telemetry/effective_load.py): supported with power.
    "effective_load_pct": (("nvmlDeviceGetPowerUsage",), (185,), ("power_w",)),
}
#: Filled in by the sampler, never by the backend itself.
SAMPLER_FILLS = frozenset({"effective_load_pct"})
#: Deltas of NVML's counters: no value on a GPU's first sample.
COUNTERS = frozenset(name for name, _ in CLOCK_EVENT_COUNTERS)


@pytest.fixture
def fake() -> FakeNvml:
    return FakeNvml([desktop_gpu(), desktop_gpu(name="NVIDIA GeForce RTX 4080 Laptop GPU", fan_pct=None)])


@pytest.fixture
def backend(fake: FakeNvml) -> Iterator[NvmlBackend]:
    b = NvmlBackend.open(fake.module)
    yield b
    b.close()


def _tick(fake: FakeNvml, backend: NvmlBackend, t: float) -> list[GpuSample]:
    fake.advance(1.0)
    readings = backend.sample(t)
    assert all(r.state is DeviceState.OK for r in readings), [r.state_detail for r in readings]
    return [r.sample for r in readings if r.sample is not None]


def test_static_info_is_read_once(backend: NvmlBackend) -> None:
    laptop = backend.devices()[1]
    desktop = backend.devices()[0]
    assert desktop.name == "NVIDIA GeForce RTX 4090" and not desktop.is_laptop
    assert laptop.is_laptop
    assert desktop.vram_total_mib == 24 * 1024
    assert (desktop.power_limit_enforced_w, desktop.power_limit_min_w, desktop.power_limit_max_w) == (450, 150, 600)
    assert desktop.power_limit_settable is True
    assert desktop.temp_slowdown_c == 87 and desktop.temp_shutdown_c == 95
    assert desktop.pcie_gen_max == 4 and desktop.pcie_width_max == 16
    assert desktop.pci_bus_id == "00000000:01:00.0"
    assert desktop.driver_version == "565.57.01" and desktop.cuda_version == "12.7"
    assert desktop.persistence_mode is True and desktop.vbios_version
    assert backend.library_version == "12.565.57.01"


def test_laptop_power_limit_is_not_settable() -> None:
    fake = FakeNvml([FakeGpu()])
    b = NvmlBackend.open(fake.module)
    try:
        assert b.devices()[0].power_limit_settable is False
        assert b.devices()[0].power_limit_enforced_w == 150
    finally:
        b.close()


def test_sample_values_and_units(fake: FakeNvml, backend: NvmlBackend) -> None:
    sample = _tick(fake, backend, 100.0)[0]
    assert sample.utilization_gpu_pct == 87 and sample.utilization_mem_pct == 41
    assert sample.vram_used_mib == 3 * 1024  # v2: reserved memory is not "used"
    assert sample.power_w == 380.0
    assert sample.temperature_c == 78 and sample.fan_pct == 55
    assert sample.sm_clock_mhz == 2040 and sample.mem_clock_mhz == 9001
    assert sample.clock_event_reasons == 0x4
    assert sample.pcie_rx_kib_s == pytest.approx(3400) and sample.pcie_tx_kib_s == pytest.approx(1200)
    assert (sample.pcie_gen, sample.pcie_width, sample.pstate) == (4, 16, 0)
    before = sample.energy_mj
    assert before is not None
    assert _tick(fake, backend, 101.0)[0].energy_mj == before + 380_000


@pytest.mark.parametrize("metric", GPU_METRIC_NAMES)
def test_each_metric_not_supported_in_turn(metric: str) -> None:
    fake = FakeNvml([desktop_gpu(), desktop_gpu()])
    funcs, field_ids, siblings = KILL[metric]
    for func in funcs:
        fake.fail(func, gpu=0, error=NOT_SUPPORTED)
    fake.gpus[0].unsupported_fields.update(field_ids)
    b = NvmlBackend.open(fake.module)
    try:
        gone = {metric, *siblings}
        for t in range(3):
            first, second = _tick(fake, b, 10.0 + t)
            for name in GPU_METRIC_NAMES:
                first_sample = t == 0 and name in COUNTERS
                assert (getattr(first, name) is None) == (name in gone or first_sample or name in SAMPLER_FILLS), name
                assert (getattr(second, name) is None) == (first_sample or name in SAMPLER_FILLS), name
        assert {n for n, ok in b.supported_metrics(0).items() if not ok} == gone
        assert all(b.supported_metrics(1).values())
        fake.reset_counts()
        for t in range(10):
            _tick(fake, b, 20.0 + t)
        # remembered: never asked again on GPU 0 (except a deprecated call standing in for a newer one)
        asked = {name for (name, gpu) in fake.calls_by_gpu if gpu == 0}
        assert not asked & set(funcs), asked
        assert {name for (name, gpu) in fake.calls_by_gpu if gpu == 1} >= asked
    finally:
        b.close()


def test_not_supported_is_not_retried(fake: FakeNvml) -> None:
    fake.fail("nvmlDeviceGetUtilizationRates", error=NOT_SUPPORTED)
    b = NvmlBackend.open(fake.module)
    try:
        fake.reset_counts()
        for t in range(20):
            _tick(fake, b, float(t))
        assert fake.calls["nvmlDeviceGetUtilizationRates"] == 0
        assert fake.calls["nvmlDeviceGetTemperatureV"] == 40
    finally:
        b.close()


def test_transient_errors_are_retried(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.fail("nvmlDeviceGetTemperatureV", gpu=0, error=pynvml.NVML_ERROR_TIMEOUT, times=1)
    assert _tick(fake, backend, 1.0)[0].temperature_c is None
    assert _tick(fake, backend, 2.0)[0].temperature_c == 78


def test_calls_per_tick(fake: FakeNvml, backend: NvmlBackend) -> None:
    _tick(fake, backend, 0.0)  # the first tick refreshes the slow metrics too
    fake.reset_counts()
    _tick(fake, backend, 1.0)
    # field batch + utilization + memory + temperature + SM clock + reasons, per GPU
    assert fake.total_calls() == 6 * 2
    fake.reset_counts()
    for t in range(2, 12):
        _tick(fake, backend, float(t))
    # ten ticks at 1 s, slow metrics every 5 s: twice (pstate, fan (GPU 0 only)); the P-state did not move,
    # so the memory clock it sets is not asked again
    assert fake.total_calls() == 10 * 12 + 2 * (2 + 1)
    fake.reset_counts()
    for t in range(12, 17):
        _tick(fake, backend, float(t))
    # ...and on every 4th slow refresh the PCIe link and the memory clock too (priming read, then t=15)
    assert fake.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == fake.calls["nvmlDeviceGetCurrPcieLinkWidth"] == 2
    assert fake.total_calls() == 5 * 12 + (3 + 2) + 2 * 2
    fake.reset_counts()
    backend.processes()
    # compute + graphics per GPU; no compute process, so no MPS server and no client to ask for
    assert fake.total_calls() == 2 * 2
    assert fake.calls["nvmlDeviceGetMPSComputeRunningProcesses"] == 0
    fake.gpus[0].processes = [FakeProcess(4242)]
    fake.reset_counts()
    backend.processes()
    # GPU 0 lists a compute process: its MPS clients are asked too, and (1) its per-process utilization
    assert fake.total_calls() == 3 + 2 + 1
    assert fake.calls_by_gpu["nvmlDeviceGetMPSComputeRunningProcesses", 0] == 1


def test_lost_gpu_keeps_others_sampling_and_recovers(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.lose(1)
    fake.advance(1.0)
    readings = backend.sample(1.0)
    assert readings[0].state is DeviceState.OK and readings[0].sample is not None
    assert readings[1].state is DeviceState.LOST and readings[1].sample is None
    assert "GPU is lost" in (readings[1].state_detail or "")
    fake.reset_counts()
    backend.sample(2.0)
    assert fake.total_calls() == 6  # the lost GPU is not asked again until reinit()
    backend.reinit()  # still lost
    assert backend.sample(3.0)[1].state is DeviceState.LOST
    assert [p.gpu_index for p in backend.processes()] == []
    fake.recover(1)
    assert backend.sample(4.0)[1].state is DeviceState.LOST  # the old handle is dead
    backend.reinit()
    readings = backend.sample(5.0)
    assert [r.state for r in readings] == [DeviceState.OK, DeviceState.OK]
    assert readings[1].info.name == "NVIDIA GeForce RTX 4080 Laptop GPU"


def test_sampler_reinits_lost_gpu_on_its_period(fake: FakeNvml, backend: NvmlBackend) -> None:
    clock = [0.0]
    sampler = Sampler(backend, reinit_period_s=10.0, clock=lambda: 1e9 + clock[0], monotonic=lambda: clock[0])
    fake.lose(0)
    assert sampler.tick().gpus[0].state is DeviceState.LOST
    fake.recover(0)
    clock[0] = 5.0
    assert sampler.tick().gpus[0].state is DeviceState.LOST
    clock[0] = 11.0
    sampler.tick()  # reinit happens in this tick, after the read
    clock[0] = 12.0
    assert sampler.tick().gpus[0].state is DeviceState.OK


def test_unknown_error_costs_only_that_metric_of_that_gpu(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.fail("nvmlDeviceGetUtilizationRates", gpu=0, error=pynvml.NVML_ERROR_UNKNOWN, times=1)
    fake.advance(1.0)
    readings = backend.sample(1.0)
    assert [r.state for r in readings] == [DeviceState.OK, DeviceState.OK]
    assert readings[0].sample is not None and readings[0].sample.utilization_gpu_pct is None
    assert readings[0].sample.temperature_c is not None
    assert "Unknown" in backend.metric_errors(0)["utilization_gpu_pct"]


def test_memory_v2_falls_back_to_v1(fake: FakeNvml) -> None:
    fake.fail("nvmlDeviceGetMemoryInfo_v2", error=pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    b = NvmlBackend.open(fake.module)
    try:
        sample = _tick(fake, b, 1.0)[0]
        assert sample.vram_used_mib == 3 * 1024 + 300  # v1 counts reserved memory as used
        assert b.devices()[0].vram_total_mib == 24 * 1024
        assert "nvmlDeviceGetMemoryInfo" in b.unknown_functions
    finally:
        b.close()


def test_temperature_v_falls_back_to_deprecated_call(fake: FakeNvml) -> None:
    fake.fail("nvmlDeviceGetTemperatureV", error=pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    b = NvmlBackend.open(fake.module)
    try:
        fake.reset_counts()
        assert _tick(fake, b, 1.0)[0].temperature_c == 78
        assert fake.calls["nvmlDeviceGetTemperatureV"] == 0 and fake.calls["nvmlDeviceGetTemperature"] == 2
    finally:
        b.close()


def test_clock_event_reasons_fall_back_to_throttle_name(fake: FakeNvml) -> None:
    del fake.module.nvmlDeviceGetCurrentClocksEventReasons  # bindings older than the rename
    b = NvmlBackend.open(fake.module)
    try:
        assert _tick(fake, b, 1.0)[0].clock_event_reasons == 0x4
    finally:
        b.close()


def test_unknown_function_is_logged_once(fake: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:
    del fake.module.nvmlDeviceGetCurrPcieLinkWidth
    with caplog.at_level(logging.INFO, logger="desktop.telemetry.nvml"):
        b = NvmlBackend.open(fake.module)
        try:
            for t in range(12):
                assert _tick(fake, b, float(t))[0].pcie_width is None
        finally:
            b.close()
    assert sum("nvmlDeviceGetCurrPcieLinkWidth" in r.getMessage() for r in caplog.records) == 1


def test_without_field_values_every_metric_uses_its_own_call(fake: FakeNvml) -> None:
    fake.fail("nvmlDeviceGetFieldValues", error=NOT_SUPPORTED)
    b = NvmlBackend.open(fake.module)
    try:
        sample = _tick(fake, b, 1.0)[0]
        assert sample.power_w == 380 and sample.energy_mj is not None
        assert sample.pcie_rx_kib_s == 3400 and sample.pcie_tx_kib_s == 1200  # the 20 ms throughput call
        fake.reset_counts()
        _tick(fake, b, 2.0)
        assert fake.calls["nvmlDeviceGetFieldValues"] == 0 and fake.calls["nvmlDeviceGetPcieThroughput"] == 0
        assert fake.calls["nvmlDeviceGetPowerUsage"] == 2
    finally:
        b.close()


def test_processes_are_merged_by_pid(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.gpus[0].processes = [FakeProcess(10, 2 * 1024**3), FakeProcess(10, 2 * 1024**3, kind="graphics"),
                              FakeProcess(11, None, kind="graphics")]
    fake.gpus[1].processes = [FakeProcess(12, 1024**3)]
    procs = {(p.gpu_index, p.pid): p for p in backend.processes()}
    assert set(procs) == {(0, 10), (0, 11), (1, 12)}
    assert procs[0, 10].kind == "mixed" and procs[0, 10].vram_mib == 2048
    assert procs[0, 11].kind == "graphics" and procs[0, 11].vram_mib is None
    fake.fail("nvmlDeviceGetComputeRunningProcesses", gpu=1, error=pynvml.NVML_ERROR_NO_PERMISSION)
    assert {(p.gpu_index, p.pid) for p in backend.processes()} == {(0, 10), (0, 11)}


def test_close_shuts_down_once(fake: FakeNvml) -> None:
    b = NvmlBackend.open(fake.module)
    assert fake.init_count == 1
    b.close()
    b.close()
    assert fake.init_count == 0 and fake.calls["nvmlShutdown"] == 1
    assert all(r.state is DeviceState.LOST for r in b.sample(1.0))


@pytest.mark.parametrize(("code", "words"), [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "not loaded"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "No NVIDIA driver found"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "permission"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "reboot"),
])
def test_init_errors_fall_back_to_simulated(code: int, words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(1, init_error=code)
    fake.install(monkeypatch)
    with pytest.raises(BackendUnavailable, match=words):
        NvmlBackend.open()
    backend = open_gpu_backend()
    assert backend.source.simulated
    assert words in (backend.source.fallback_reason or "")


def test_library_missing_falls_back_to_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    backend = open_gpu_backend()
    assert backend.source.simulated
    assert "nvidia-ml-py" in (backend.source.fallback_reason or "")
    assert backend.sample(0.0)[0].state is DeviceState.OK


def test_no_gpu_falls_back_to_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([]).install(monkeypatch)
    backend = open_gpu_backend()
    assert "found no NVIDIA GPU" in (backend.source.fallback_reason or "")


def test_open_gpu_backend_uses_nvml_when_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml(2).install(monkeypatch)
    backend = open_gpu_backend()
    try:
        assert backend.source.kind == "nvml" and len(backend.devices()) == 2
    finally:
        backend.close()


def test_gpu_lost_at_startup_is_a_lost_device(fake: FakeNvml) -> None:
    fake.lose(1)
    b = NvmlBackend.open(fake.module)
    try:
        readings = b.sample(1.0)
        assert readings[0].state is DeviceState.OK and readings[1].state is DeviceState.LOST
        assert b.devices()[1].name == "GPU 1"
        assert not any(b.supported_metrics(1).values())
        fake.recover(1)
        b.reinit()
        assert b.sample(2.0)[1].state is DeviceState.OK
        assert b.devices()[1].name == "NVIDIA GeForce RTX 4080 Laptop GPU"
    finally:
        b.close()


def test_every_gpu_lost_renews_the_nvml_session(fake: FakeNvml, backend: NvmlBackend) -> None:
    fake.lose(0)
    fake.lose(1)
    assert all(r.state is DeviceState.LOST for r in backend.sample(1.0))
    fake.recover(0)
    fake.recover(1)
    backend.reinit()
    assert all(r.state is DeviceState.OK for r in backend.sample(2.0))
    assert fake.calls["nvmlInit"] == 2 and fake.init_count == 1  # shut down, then started again


def test_a_renewed_session_reads_the_driver_version_again(fake: FakeNvml, backend: NvmlBackend) -> None:
    """Issue 32: a driver reloaded under a running recorder (every GPU lost, then back) is a new driver: the
    GPUs' info carries its version, so the history stores the change (``driver_change``) at the re-init."""
    assert {d.driver_version for d in backend.devices()} == {"565.57.01"}
    fake.lose(0)
    fake.lose(1)
    assert all(r.state is DeviceState.LOST for r in backend.sample(1.0))
    fake.driver_version = "570.86.16"
    fake.recover(0)
    fake.recover(1)
    backend.reinit()
    assert all(r.state is DeviceState.OK for r in backend.sample(2.0))
    assert {d.driver_version for d in backend.devices()} == {"570.86.16"}
    assert backend.driver_version == "570.86.16" and "570.86.16" in backend.source.detail


def test_module_without_nvml_error_class_is_contained() -> None:
    fake = FakeNvml([desktop_gpu(), desktop_gpu()])  # GPUs that answer every call at open
    del fake.module.NVMLError  # a broken binding: its errors cannot be matched by class
    b = NvmlBackend.open(fake.module)
    try:
        fake.fail("nvmlDeviceGetUtilizationRates", gpu=0, error=NOT_SUPPORTED)
        first, second = b.sample(1.0)  # nothing escapes: the error is still judged by its code
        assert first.state is DeviceState.OK and first.sample is not None
        assert first.sample.utilization_gpu_pct is None and b.supported_metrics(0)["utilization_gpu_pct"] is False
        fake.lose(1)
        second = b.sample(2.0)[1]
        assert second.state is DeviceState.LOST and "GPU is lost" in (second.state_detail or "")
    finally:
        b.close()
