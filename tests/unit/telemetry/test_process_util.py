"""Per-process GPU utilization (issue 16): from the fast fake and from real pynvml over the driver stand-in.

The stand-in (tests/fakes/nvml_driver.py) keeps the driver's sample buffer and answers by
``lastSeenTimeStamp`` as nvml.h describes: samples newer than it, only for processes with
non-zero utilization, NOT_FOUND when there are none, NotSupported where the GPU samples none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from desktop.telemetry.model import GpuProcess
from desktop.telemetry.nvml import NvmlBackend, processes
from desktop.telemetry.nvml.proc_util import average_per_pid
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, FakeProcess, hopper_mig_gpu
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import (
    Personality,
    ProcessSpec,
    ada_desktop,
    ada_laptop,
    hopper_mig,
    r470_gtx680,
    r470_v100,
    r535_gtx1050ti,
)

UTIL_FIELDS = ("sm_util_pct", "mem_util_pct", "enc_util_pct", "dec_util_pct")


@pytest.fixture(autouse=True)
def _ask_at_every_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """The semantics tests ask at every process poll; the cadence has its own test."""
    monkeypatch.setattr(processes, "UTIL_EVERY_POLLS", 1)


def _utils(procs: list[GpuProcess]) -> dict[int, tuple[float | None, ...]]:
    return {p.pid: tuple(getattr(p, f) for f in UTIL_FIELDS) for p in procs}


# --- the fast fake -----------------------------------------------------------------------------------


def _fake_backend(gpu: FakeGpu) -> tuple[NvmlBackend, FakeNvml]:
    fake = FakeNvml([gpu])
    return NvmlBackend.open(fake.module), fake


def test_fake_reports_each_process_utilization_and_idle_ones_as_zero() -> None:
    backend, fake = _fake_backend(FakeGpu(processes=[FakeProcess(10, sm_util=83, mem_util=41, enc_util=5),
                                                     FakeProcess(11)]))
    try:
        assert _utils(backend.processes()) == {10: (83.0, 41.0, 5.0, 0.0), 11: (0.0, 0.0, 0.0, 0.0)}
        # One call per GPU per poll: the newer call, where the driver has it.
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 1
        assert fake.calls["nvmlDeviceGetProcessUtilization"] == 0
    finally:
        backend.close()


def test_fake_no_new_samples_means_idle_not_unsupported() -> None:
    """NOT_FOUND ("nothing newer than lastSeenTimeStamp") is asked again next time, never remembered."""
    gpu = FakeGpu(processes=[FakeProcess(10, sm_util=60)])
    backend, fake = _fake_backend(gpu)
    try:
        assert _utils(backend.processes())[10][0] == 60.0
        # The fake's clock has not moved: no sample is newer than the one seen.
        assert _utils(backend.processes())[10] == (0.0, 0.0, 0.0, 0.0)
        fake.advance(5.0)
        gpu.processes[0].sm_util = 75
        assert _utils(backend.processes())[10][0] == 75.0
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 3
    finally:
        backend.close()


def test_utilization_is_asked_every_other_poll_and_carried_between(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "UTIL_EVERY_POLLS", 2)
    gpu = FakeGpu(processes=[FakeProcess(10, sm_util=60)])
    backend, fake = _fake_backend(gpu)
    try:
        assert _utils(backend.processes())[10][0] == 60.0
        gpu.processes.append(FakeProcess(11, sm_util=30))
        fake.advance(5.0)
        # Not asked this poll: the last answer is carried; a pid that appeared since is n/a until the next.
        assert _utils(backend.processes()) == {10: (60.0, 0.0, 0.0, 0.0), 11: (None, None, None, None)}
        fake.advance(5.0)
        assert _utils(backend.processes()) == {10: (60.0, 0.0, 0.0, 0.0), 11: (30.0, 0.0, 0.0, 0.0)}
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 2
    finally:
        backend.close()


def test_fake_falls_back_to_the_older_call_and_remembers() -> None:
    gpu = FakeGpu(processes=[FakeProcess(10, sm_util=50, mem_util=20)],
                  unsupported={"nvmlDeviceGetProcessesUtilizationInfo"})
    backend, fake = _fake_backend(gpu)
    try:
        assert _utils(backend.processes())[10] == (50.0, 20.0, 0.0, 0.0)
        fake.advance(5.0)
        backend.processes()
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 1  # asked once, remembered
        assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2
    finally:
        backend.close()


@pytest.mark.parametrize("make", [lambda: FakeGpu(unsupported={"nvmlDeviceGetProcessUtilization",
                                                               "nvmlDeviceGetProcessesUtilizationInfo"}),
                                  hopper_mig_gpu])
def test_fake_not_supported_is_na_never_zero(make: Callable[[], FakeGpu]) -> None:
    gpu = make()
    gpu.processes = [FakeProcess(10, sm_util=70)]
    backend, fake = _fake_backend(gpu)
    try:
        for _ in range(3):
            assert _utils(backend.processes())[10] == (None, None, None, None)
            fake.advance(5.0)
        # Each call asked once per device, then remembered.
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 1
        assert fake.calls["nvmlDeviceGetProcessUtilization"] == 1
    finally:
        backend.close()


def test_fake_transient_failure_is_na_for_that_poll_only() -> None:
    gpu = FakeGpu(processes=[FakeProcess(10, sm_util=40)])
    backend, fake = _fake_backend(gpu)
    fake.fail("nvmlDeviceGetProcessesUtilizationInfo", error=pynvml.NVML_ERROR_TIMEOUT, times=1)
    try:
        assert _utils(backend.processes())[10] == (None, None, None, None)
        fake.advance(5.0)
        assert _utils(backend.processes())[10][0] == 40.0
    finally:
        backend.close()


def test_no_process_no_utilization_call() -> None:
    backend, fake = _fake_backend(FakeGpu(processes=[]))
    try:
        assert backend.processes() == []
        assert fake.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 0
    finally:
        backend.close()


def test_each_pid_is_the_mean_over_the_windows_periods_and_garbage_is_none() -> None:
    class S:
        def __init__(self, pid: int, ts: int, sm: int, mem: int = 0) -> None:
            self.pid, self.timeStamp, self.smUtil, self.memUtil, self.encUtil, self.decUtil = pid, ts, sm, mem, 0, 0

    samples = [S(1, 100, 10), S(1, 300, 90), S(2, 200, 0xFFFFFFFF, 7), S(1, 200, 50)]
    # Samples 100 µs apart in a window (0, 1000]: 10 periods; pid 1 busy in 3 of them, pid 2 in one.
    found, seen, period = average_per_pid(samples, window_start_us=0 or None, window_end_us=1000, period_us=None)
    assert seen == 300 and period == 100
    # No window start: one period before the oldest sample, so (0, 1000] here too.
    assert found[1].sm_pct == pytest.approx((10 + 90 + 50) / 10)
    assert (found[2].sm_pct, found[2].mem_pct) == (None, pytest.approx(0.7))
    # Where the window is unknown, never fewer periods than the answer's sample stamps (3 here).
    found, _, _ = average_per_pid(samples, window_start_us=None, window_end_us=None, period_us=10_000)
    assert found[1].sm_pct == pytest.approx(150 / 3)


# --- real pynvml over the driver stand-in ------------------------------------------------------------


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., tuple[NvmlBackend, NvmlDriver]]]:
    made: list[tuple[NvmlBackend, NvmlDriver]] = []

    def make(personality: Personality, procs: list[ProcessSpec], **options: Any) -> tuple[NvmlBackend, NvmlDriver]:
        personality.gpus[0].processes = procs
        driver = NvmlDriver(personality, **options)
        driver.install(monkeypatch)
        backend = NvmlBackend.open(pynvml)
        made.append((backend, driver))
        return backend, driver

    yield make
    for backend, driver in made:
        backend.close()
        driver.check()
        assert not driver.unmodelled.get("nvmlDeviceGetProcessUtilization")


BUSY = [ProcessSpec(4242, 512.0, sm_util=87, mem_util=35), ProcessSpec(4343, 1024.0, kind="graphics", enc_util=12),
        ProcessSpec(4444, 64.0)]


@pytest.mark.parametrize("make", [ada_desktop, r535_gtx1050ti, r470_v100])
def test_stand_in_reports_utilization_through_real_pynvml(stand_in: Callable[..., Any],
                                                         make: Callable[[], Personality]) -> None:
    backend, driver = stand_in(make(), BUSY)
    driver.advance(3.0)
    assert _utils(backend.processes()) == {4242: (87.0, 35.0, 0.0, 0.0), 4343: (0.0, 0.0, 12.0, 0.0),
                                           4444: (0.0, 0.0, 0.0, 0.0)}


#: nvidia-ml-py 12.535 (the floor) has no wrapper for the R550 call: the app asks the older one there.
_NEWER_WRAPPER = hasattr(pynvml, "nvmlDeviceGetProcessesUtilizationInfo")
_needs_newer_wrapper = pytest.mark.skipif(not _NEWER_WRAPPER, reason="this nvidia-ml-py has no "
                                          "nvmlDeviceGetProcessesUtilizationInfo (the older call is tested too)")


@_needs_newer_wrapper
def test_stand_in_uses_the_newer_call_where_the_driver_exports_it(stand_in: Callable[..., Any]) -> None:
    backend, driver = stand_in(ada_desktop(), BUSY)
    driver.advance(3.0)
    backend.processes()
    # pynvml's wrapper: a size query, then the fill: two C calls, one API call.
    assert driver.calls["nvmlDeviceGetProcessesUtilizationInfo"] == 2
    assert "nvmlDeviceGetProcessUtilization" not in driver.calls


def test_stand_in_r535_lacks_the_newer_call_and_uses_the_older(stand_in: Callable[..., Any]) -> None:
    backend, driver = stand_in(r535_gtx1050ti(), BUSY)
    driver.advance(3.0)
    backend.processes()
    driver.advance(5.0)
    backend.processes()
    assert "nvmlDeviceGetProcessesUtilizationInfo" not in driver.calls  # not exported: never reaches the driver
    assert driver.calls["nvmlDeviceGetProcessUtilization"] == 4


def test_stand_in_passes_the_last_seen_timestamp_and_averages_the_window(stand_in: Callable[..., Any]) -> None:
    backend, driver = stand_in(ada_desktop(), [ProcessSpec(4242, 512.0, sm_util=20)])
    proc = driver.personality.gpus[0].processes[0]
    assert _utils(backend.processes())[4242][0] == 20.0  # the buffer so far, all at 20 %
    driver.advance(4.0)  # four samples at 20 %
    proc.sm_util = 90
    driver.advance(2.0)  # two more at 90 %: one answer holds both, a 6 s window
    assert _utils(backend.processes())[4242][0] == pytest.approx((4 * 20 + 2 * 90) / 6)
    assert backend._devices[0].util_seen_us == driver.util_samples[0][-1][0]
    proc.sm_util = 30
    driver.advance(2.0)
    assert _utils(backend.processes())[4242][0] == 30.0
    # The next poll asked only for samples after the last one seen: with nothing new, NOT_FOUND: idle.
    assert _utils(backend.processes())[4242] == (0.0, 0.0, 0.0, 0.0)
    proc.sm_util = 0  # the process stops computing
    driver.advance(3.0)
    backend.sample(1000.0)  # the sampler's tick marks the time (the stand-in's clock moves 1 s with it)
    assert _utils(backend.processes())[4242][0] == 0.0
    proc.sm_util = 55
    driver.advance(1.0)
    assert _utils(backend.processes())[4242][0] == 55.0  # NOT_FOUND was never filed as unsupported


def test_a_process_busy_1_s_of_10_reads_a_tenth_not_100_percent(stand_in: Callable[..., Any]) -> None:
    # The newest sample stood for the whole window: 1 s at 100 % then 9 s idle read 100 % for all 10 s.
    backend, driver = stand_in(ada_desktop(), [ProcessSpec(4242, 512.0, sm_util=0)])
    proc = driver.personality.gpus[0].processes[0]
    backend.processes()
    start_us = backend._devices[0].util_window_end_us
    proc.sm_util = 100
    driver.advance(1.0)
    proc.sm_util = 0
    driver.advance(8.0)
    backend.sample(1000.0)  # the sampler's tick: its field-values call stamps the window's end (1 s later)
    window_s = (backend._devices[0].last_field_stamp_us - start_us) / 1e6
    assert window_s == pytest.approx(10.0)
    assert _utils(backend.processes())[4242][0] == pytest.approx(100.0 / window_s)


@_needs_newer_wrapper
def test_stand_in_only_samples_newer_than_the_timestamp_are_returned(stand_in: Callable[..., Any]) -> None:
    """The fixture first: pynvml with lastSeenTimeStamp returns only newer samples, NOT_FOUND for none."""
    _, driver = stand_in(ada_desktop(), [ProcessSpec(4242, 512.0, sm_util=20)])
    driver.advance(3.0)
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    every = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert len(every) >= 3 and {s.pid for s in every} == {4242}
    newest = max(s.timeStamp for s in every)
    older = pynvml.nvmlDeviceGetProcessesUtilizationInfo(handle, newest - 1)
    assert [s.timeStamp for s in older] == [newest]
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessUtilization(handle, newest)


@pytest.mark.parametrize("make", [ada_laptop, r470_gtx680, hopper_mig])
def test_stand_in_not_supported_is_na_and_asked_once(stand_in: Callable[..., Any],
                                                     make: Callable[[], Personality]) -> None:
    personality = make()
    procs = [ProcessSpec(77, 300.0, sm_util=70)]
    if personality.gpus[0].mig_devices:
        personality.gpus[0].mig_devices[0].processes = procs
        procs = []
    backend, driver = stand_in(personality, procs)
    for _ in range(3):
        driver.advance(5.0)
        listed = backend.processes()
        assert listed and all(getattr(p, f) is None for p in listed for f in UTIL_FIELDS)
    asked = driver.calls["nvmlDeviceGetProcessUtilization"] + driver.calls["nvmlDeviceGetProcessesUtilizationInfo"]
    assert asked <= 2  # each call at most once per device, then remembered


def test_stand_in_lost_gpu_during_utilization_call_marks_it_lost(stand_in: Callable[..., Any]) -> None:
    backend, driver = stand_in(ada_desktop(), BUSY)
    driver.advance(2.0)
    asked = "nvmlDeviceGetProcessesUtilizationInfo" if _NEWER_WRAPPER else "nvmlDeviceGetProcessUtilization"
    driver.fail(asked, pynvml.NVML_ERROR_GPU_IS_LOST)
    assert backend.processes() == []
    assert backend.sample(10.0)[0].state.value == "lost"


# --- `rigscope sample` --------------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "expected"), [(ada_desktop, {4242: 87.0, 4343: 0.0, 4444: 0.0}),
                                                (ada_laptop, {4242: None, 4343: None, 4444: None})])
def test_sample_json_carries_process_utilization_null_when_not_supported(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], make: Callable[[], Personality],
        expected: dict[int, float | None]) -> None:
    import json

    from desktop.cli import main

    personality = make()
    personality.gpus[0].processes = BUSY
    driver = NvmlDriver(personality)
    driver.install(monkeypatch)
    assert main(["sample", "--json", "--count", "1", "--interval", "0.1"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert {p["pid"]: p["sm_util_pct"] for p in first["processes"]} == expected
    assert all(set(UTIL_FIELDS) <= set(p) for p in first["processes"])
    assert main(["sample", "--detail", "--count", "1", "--interval", "0.1"]) == 0
    table = capsys.readouterr().out
    assert "SM" in table and ("87 %" in table if expected[4242] else "n/a" in table)
    driver.check()
