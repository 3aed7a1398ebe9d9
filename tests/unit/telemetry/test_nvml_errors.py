"""No NVML error ever escapes the NVML backend, whatever call fails, on whichever GPU, however often."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.telemetry.backend import BackendUnavailable
from desktop.telemetry.model import GPU_METRIC_NAMES, DeviceState, GpuInfo, GpuReading
from desktop.telemetry.nvml import NvmlBackend
from tests.fakes.fake_pynvml import ALL_ERROR_CODES, FakeNvml, FakeProcess, desktop_gpu

#: Every NVML function the backend calls (and a few it does not, which must do nothing).
FUNCTIONS = (
    "nvmlInit", "nvmlDeviceGetCount", "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetFieldValues", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetFanSpeed", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses", "nvmlShutdown", "nvmlDeviceGetBAR1MemoryInfo",
)

failure = st.tuples(
    st.sampled_from(FUNCTIONS),
    st.sampled_from([None, 0, 1]),
    st.sampled_from(ALL_ERROR_CODES),
    st.one_of(st.none(), st.integers(min_value=1, max_value=3)),
)
action = st.sampled_from(["sample", "sample", "sample", "processes", "reinit", "supported", "lose", "recover"])


def _well_formed(readings: list[GpuReading], infos: list[GpuInfo]) -> None:
    assert [r.info.index for r in readings] == [i.index for i in infos] == list(range(len(infos)))
    for reading in readings:
        if reading.state is DeviceState.OK:
            assert reading.sample is not None
            for name in GPU_METRIC_NAMES:
                value = getattr(reading.sample, name)
                assert value is None or (isinstance(value, (int, float)) and math.isfinite(value)), (name, value)
        else:
            assert reading.state is DeviceState.LOST
            assert reading.sample is None and reading.state_detail


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(failures=st.lists(failure, max_size=6), actions=st.lists(action, min_size=1, max_size=12))
def test_random_errors_never_escape(failures: list[tuple[str, int | None, int, int | None]],
                                    actions: list[str]) -> None:
    fake = FakeNvml([desktop_gpu(processes=[FakeProcess(10)]), desktop_gpu(processes=[FakeProcess(11)])])
    for func, gpu, code, times in failures:
        fake.fail(func, gpu=gpu, error=code, times=times)
    try:
        backend = NvmlBackend.open(fake.module)
    except BackendUnavailable as exc:  # allowed: init or the device count failed
        assert str(exc)
        return
    try:
        infos = list(backend.devices())
        assert all(isinstance(i, GpuInfo) for i in infos)
        for step, what in enumerate(actions):
            fake.advance(1.0)
            if what == "sample":
                _well_formed(backend.sample(float(step) * 3.0), infos)
            elif what == "processes":
                for proc in backend.processes():
                    assert proc.pid > 0 and proc.gpu_index in (0, 1)
            elif what == "reinit":
                backend.reinit()
                infos = list(backend.devices())
            elif what == "supported":
                for index in range(len(infos)):
                    assert set(backend.supported_metrics(index)) == set(GPU_METRIC_NAMES)
            elif what == "lose":
                fake.lose(step % 2)
            else:
                fake.recover(step % 2)
    finally:
        backend.close()
