"""Measured SM activity (GPM) over the fast fake NVML and the driver-level stand-in.

A GPU with GPM (Hopper) gets its effective load measured: two calls per tick, the support asked
once, two sample buffers freed when the GPU is lost, the backend re-initialises or closes. A GPU
without it (Ada, R470) costs nothing per tick and keeps the estimate.
"""

from __future__ import annotations

from collections.abc import Iterator

import pynvml
import pytest

from advisor.effective_load import Calibration
from desktop.telemetry.model import DeviceState, GpuReading
from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.sampler import Sampler
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, hopper_gpu
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import Personality, ada_desktop, hopper, hopper_mig, r470_v100

GPM_CALLS = ("nvmlGpmSampleGet", "nvmlGpmMetricsGet")
#: The driver stand-ins and backends a test opened (closed and checked for leaks after it).
Opened = tuple[list[NvmlDriver], list[NvmlBackend]]


def _gpm_calls(calls: dict[str, int]) -> int:
    return sum(n for name, n in calls.items() if name.startswith("nvmlGpm"))


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _sampler(backend: NvmlBackend) -> tuple[Sampler, _Clock]:
    clock = _Clock()
    sampler = Sampler(backend, None, clock=lambda: 1.7e9 + clock.t, monotonic=clock, reinit_period_s=0.0)
    # Each GPU's own stress run: a GPU without GPM is estimated only against one (issue 22).
    sampler.effective_load.calibrate_all({info.uuid: Calibration(20.0, info.power_limit_enforced_w or 300.0,
                                                                 0.9 * (info.sm_clock_max_mhz or 2000.0), "stress run")
                                          for info in backend.devices()})
    return sampler, clock


def _tick(sampler: Sampler, clock: _Clock, fake: FakeNvml | None = None) -> tuple[GpuReading, ...]:
    clock.t += 1.0
    if fake is not None:
        fake.advance(1.0)
    return sampler.tick().gpus


# --- the fast fake -----------------------------------------------------------------------------------


def test_a_hopper_gpu_measures_sm_activity_and_a_geforce_beside_it_is_estimated() -> None:
    fake = FakeNvml([hopper_gpu(), FakeGpu()])
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        assert [info.gpm_supported for info in backend.devices()] == [True, False]
        fake.reset_counts()
        hopper_reading, geforce = _tick(sampler, clock, fake)
        # The first tick already measures: the priming read at open took the first sample.
        assert hopper_reading.sample is not None and hopper_reading.activity is not None
        assert hopper_reading.sample.effective_load_pct == pytest.approx(62.0)
        assert hopper_reading.activity.tensor_active_pct == pytest.approx(41.0)
        assert hopper_reading.activity.dram_active_pct == pytest.approx(55.0)
        assert geforce.activity is None and not geforce.info.gpm_supported
        assert geforce.sample is not None and geforce.sample.effective_load_pct is not None  # the estimate
        for _ in range(4):
            _tick(sampler, clock, fake)
        per_gpu = {(name, gpu): n for (name, gpu), n in fake.calls_by_gpu.items() if name.startswith("nvmlGpm")}
        # Two calls per tick on the Hopper (the metrics call takes no device handle), none on the GeForce.
        assert per_gpu == {("nvmlGpmSampleGet", 0): 5, ("nvmlGpmMetricsGet", None): 5}
    finally:
        sampler.close()
    assert fake.gpm_samples == {}, "GPM samples leaked"


def test_the_measurement_follows_the_work() -> None:
    fake = FakeNvml([hopper_gpu()])
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        _tick(sampler, clock, fake)
        fake.gpus[0].sm_active_pct, fake.gpus[0].dram_active_pct = 97.0, 12.0
        (reading,) = _tick(sampler, clock, fake)
        assert reading.sample is not None and reading.sample.effective_load_pct == pytest.approx(97.0)
        assert reading.activity is not None and reading.activity.dram_active_pct == pytest.approx(12.0)
    finally:
        sampler.close()


@pytest.mark.parametrize("refusal", ["not_supported", "no_gpm"])
def test_a_gpu_without_gpm_is_asked_once_and_never_again(refusal: str) -> None:
    fake = FakeNvml([FakeGpu()])
    if refusal == "not_supported":
        fake.fail("nvmlGpmQueryDeviceSupport", error=pynvml.NVML_ERROR_NOT_SUPPORTED)
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        for _ in range(5):
            (reading,) = _tick(sampler, clock, fake)
            assert reading.activity is None and not reading.info.gpm_supported
            assert reading.sample is not None and reading.sample.effective_load_pct is not None  # estimated
        assert fake.calls["nvmlGpmQueryDeviceSupport"] == 1
        assert _gpm_calls(fake.calls) == 1
    finally:
        sampler.close()
    assert fake.gpm_samples == {}


def test_a_first_tick_without_a_previous_sample_is_na_not_an_estimate() -> None:
    fake = FakeNvml([hopper_gpu()])
    fake.fail("nvmlGpmSampleGet", error=pynvml.NVML_ERROR_TIMEOUT, times=1)  # the priming sample at open
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        (first,) = _tick(sampler, clock, fake)
        assert first.info.gpm_supported and first.activity is None
        # A GPU that measures never shows the estimate under the "measured" label: n/a for this tick.
        assert first.sample is not None and first.sample.effective_load_pct is None
        (second,) = _tick(sampler, clock, fake)
        assert second.sample is not None and second.sample.effective_load_pct == pytest.approx(62.0)
    finally:
        sampler.close()


def test_gpm_that_stops_answering_falls_back_to_the_estimate_and_frees_its_samples() -> None:
    fake = FakeNvml([hopper_gpu()])
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        _tick(sampler, clock, fake)
        fake.fail("nvmlGpmSampleGet", error=pynvml.NVML_ERROR_NOT_SUPPORTED)
        (reading,) = _tick(sampler, clock, fake)
        assert not reading.info.gpm_supported and reading.activity is None
        assert fake.gpm_samples == {}
        (reading,) = _tick(sampler, clock, fake)
        assert reading.sample is not None and reading.sample.effective_load_pct is not None  # the estimate again
        assert fake.calls["nvmlGpmSampleGet"] == 3  # open, first tick, the refusal: never again
    finally:
        sampler.close()


def test_a_lost_gpu_frees_its_samples_and_its_new_handle_gets_fresh_ones() -> None:
    fake = FakeNvml([hopper_gpu()])
    backend = NvmlBackend.open(fake.module)
    sampler, clock = _sampler(backend)
    try:
        _tick(sampler, clock, fake)
        assert len(fake.gpm_samples) == 2
        fake.lose(0)
        (lost,) = _tick(sampler, clock, fake)
        assert lost.state is DeviceState.LOST
        assert fake.gpm_samples == {}
        fake.recover(0)
        _tick(sampler, clock, fake)  # reinit: a fresh handle, support asked again, two new samples
        assert len(fake.gpm_samples) == 2
        (back,) = _tick(sampler, clock, fake)
        assert back.state is DeviceState.OK and back.sample is not None
        assert back.sample.effective_load_pct == pytest.approx(62.0)
    finally:
        sampler.close()
    assert fake.gpm_samples == {}


# --- the driver-level stand-in (real pynvml, the driver's own struct layouts) ----------------------------


@pytest.fixture
def driver_backend() -> Iterator[Opened]:
    drivers: list[NvmlDriver] = []
    backends: list[NvmlBackend] = []
    yield drivers, backends
    for backend in backends:
        backend.close()
    for driver in drivers:
        driver.check()
        assert driver.gpm_samples == {}, "GPM samples leaked"
        assert driver.init_count == 0


def _open(fixture: Opened, personality: Personality,
          monkeypatch: pytest.MonkeyPatch) -> tuple[NvmlBackend, NvmlDriver]:
    drivers, backends = fixture
    driver = NvmlDriver(personality)
    driver.install(monkeypatch)
    drivers.append(driver)
    backend = NvmlBackend.open(pynvml)
    backends.append(backend)
    return backend, driver


def test_the_h200_measures_through_the_real_bindings(driver_backend: Opened,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    personality = hopper()
    personality.gpus[0].gpm_activity_pct.update({pynvml.NVML_GPM_METRIC_SM_UTIL: 73.0,
                                                 pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 40.0,
                                                 pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 20.0})
    backend, driver = _open(driver_backend, personality, monkeypatch)
    assert backend.devices()[0].gpm_supported
    assert len(driver.gpm_samples) == 2
    driver.calls.clear()
    (reading,) = backend.sample(1.0)
    assert reading.sample is not None and reading.sample.effective_load_pct == pytest.approx(73.0)
    assert reading.activity is not None
    assert reading.activity.tensor_active_pct == pytest.approx(40.0)
    assert reading.activity.dram_active_pct == pytest.approx(20.0)
    assert {name: n for name, n in driver.calls.items() if name.startswith("nvmlGpm")} == {
        name: 1 for name in GPM_CALLS}


def test_the_h200_as_captured_reads_idle(driver_backend: Opened,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    backend, _ = _open(driver_backend, hopper(), monkeypatch)
    (reading,) = backend.sample(1.0)
    assert reading.sample is not None and reading.sample.effective_load_pct == 0.0  # measured 0, not missing


@pytest.mark.parametrize("make", [ada_desktop, hopper_mig, r470_v100])
def test_gpus_without_usable_gpm_cost_no_call_per_tick(make: object, monkeypatch: pytest.MonkeyPatch,
                                                       driver_backend: Opened) -> None:
    personality = make()  # type: ignore[operator]
    backend, driver = _open(driver_backend, personality, monkeypatch)
    assert not backend.devices()[0].gpm_supported
    asked = driver.calls["nvmlGpmQueryDeviceSupport"]
    # Ada answers isSupportedDevice=0; under MIG it is not asked (per GPU instance there); R470 lacks the
    # symbol, so the binding never reaches the driver (FunctionNotFound, remembered).
    assert asked == {"ada_desktop": 1, "hopper_mig": 0, "r470_v100": 0}[personality.key]
    if personality.key == "r470_v100":
        assert "nvmlGpmQueryDeviceSupport" in backend.unknown_functions
    driver.calls.clear()
    for t in range(3):
        (reading,) = backend.sample(float(t))
        assert reading.activity is None
    assert _gpm_calls(driver.calls) == 0
    assert driver.gpm_samples == {}


def test_reinit_after_every_gpu_was_lost_frees_and_reallocates(
        driver_backend: Opened,
        monkeypatch: pytest.MonkeyPatch) -> None:
    backend, driver = _open(driver_backend, hopper(), monkeypatch)
    assert len(driver.gpm_samples) == 2
    driver.lose(0)
    (lost,) = backend.sample(1.0)
    assert lost.state is DeviceState.LOST and driver.gpm_samples == {}
    driver.recover(0)
    backend.reinit()  # every GPU lost: the NVML session is renewed too
    assert len(driver.gpm_samples) == 2  # the new handle's own (the lost one's were freed above)
    (back,) = backend.sample(2.0)
    assert back.state is DeviceState.OK and back.info.gpm_supported
    assert back.sample is not None and back.sample.effective_load_pct == 0.0
