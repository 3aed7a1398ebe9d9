"""Rigscope over the real ``pynvml`` and a driver-level NVML stand-in with real GPUs' personalities.

Every personality (tests/fakes/personalities.py, each built from a real ``nvidia-smi -q`` capture)
runs ``rigscope doctor --json`` and ``rigscope sample --json`` through the CLI; the direct backend
tests cover what the captures alone cannot show: process lists when the binding and the driver
disagree on the process-entry layout, MIG instances, failing sensors, wrapping counters.
"""

from __future__ import annotations

import ctypes
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from desktop.cli import main
from desktop.telemetry.nvml import NvmlBackend
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import (
    PERSONALITIES,
    MigSpec,
    Personality,
    ProcessSpec,
    ada_desktop,
    ada_laptop,
    hopper_mig,
    r470_v100,
    r535_gtx1050ti,
    with_bogus_power,
    with_failing_sensor,
    with_name_bytes,
    with_pcie_wrap,
)

Install = Callable[..., NvmlDriver]

#: What each personality's capture says: doctor values, sample values, and metrics it shows as N/A.
EXPECTED: dict[str, dict[str, Any]] = {
    "ada_desktop": {
        "doctor": {"name": "NVIDIA GeForce RTX 4090", "vram_total_mib": 24564.0, "power_limit_w": 450.0,
                   "power_limit_range_w": [150.0, 450.0], "sm_clock_max_mhz": 3105.0, "laptop": False},
        "driver": ("550.127.05", "12.4"),
        "sample": {"temperature_c": 28.0, "power_w": 20.0, "fan_pct": 0.0, "vram_used_mib": 2.0,
                   "vram_free_mib": 24210.0, "sm_clock_mhz": 210.0, "pstate": 8, "clock_event_reasons": 0x1,
                   "pcie_gen": 1, "pcie_width": 16, "pcie_rx_kib_s": 50.0},
        "n/a": (),
    },
    "ada_laptop": {
        "doctor": {"name": "NVIDIA GeForce RTX 4070 Laptop GPU", "vram_total_mib": 8188.0, "power_limit_w": 61.24,
                   "power_limit_default_w": 55.0, "power_limit_range_w": [5.0, 140.0],
                   "power_limit_settable": False, "sm_clock_max_mhz": 3105.0, "laptop": True},
        "driver": ("566.36", "12.7"),
        "sample": {"temperature_c": 42.0, "power_w": 1.97, "fan_pct": None, "vram_free_mib": 7948.0,
                   "pcie_width": 8, "pcie_rx_kib_s": 500.0, "pcie_tx_kib_s": 350.0},
        "n/a": ("fan_pct",),
    },
    "hopper_mig": {
        "doctor": {"name": "NVIDIA H200", "vram_total_mib": 143771.0, "power_limit_w": 700.0,
                   "sm_clock_max_mhz": 1980.0, "laptop": False},
        "driver": ("550.90.12", "12.4"),
        "sample": {"temperature_c": 28.0, "power_w": 74.58, "utilization_gpu_pct": None, "pcie_gen": 5},
        "n/a": ("fan_pct", "utilization_gpu_pct", "utilization_mem_pct"),
    },
    "r470_gtx680": {
        "doctor": {"name": "NVIDIA GeForce GTX 680", "vram_total_mib": 2000.0, "power_limit_w": None,
                   "sm_clock_max_mhz": None, "temp_slowdown_c": None},
        "driver": ("470.256.02", "11.4"),
        "sample": {"temperature_c": 35.0, "fan_pct": 37.0, "pstate": 0, "vram_used_mib": 0.0,
                   "utilization_gpu_pct": None, "power_w": None, "clock_event_reasons": None},
        "n/a": ("utilization_gpu_pct", "power_w", "energy_mj", "sm_clock_mhz", "mem_clock_mhz",
                "clock_event_reasons", "pcie_gen", "pcie_width", "pcie_rx_kib_s"),
    },
    "r470_v100": {
        "doctor": {"name": "Tesla V100-SXM2-16GB", "vram_total_mib": 16384.0, "power_limit_w": 300.0,
                   "temp_slowdown_c": 87.0, "temp_shutdown_c": 90.0, "sm_clock_max_mhz": 1530.0},
        "driver": ("470.256.02", "11.4"),
        # No "event" reasons call and no v2 memory info on 470: the "throttle" call and v1 answer.
        "sample": {"temperature_c": 37.0, "power_w": 44.5, "clock_event_reasons": 0x1, "vram_used_mib": 241.0,
                   "sm_clock_mhz": 135.0},
        "n/a": ("fan_pct",),
    },
    "r535_gtx1050ti": {
        "doctor": {"name": "NVIDIA GeForce GTX 1050 Ti", "vram_total_mib": 4096.0, "power_limit_w": 75.0,
                   "power_limit_range_w": [52.5, 75.0], "temp_slowdown_c": 99.0, "temp_shutdown_c": 102.0,
                   "sm_clock_max_mhz": 1911.0},
        "driver": ("535.161.07", "12.2"),
        "sample": {"temperature_c": 31.0, "power_w": None, "fan_pct": 40.0, "sm_clock_mhz": 1290.0,
                   "clock_event_reasons": 0},
        "n/a": ("power_w", "energy_mj"),
    },
}


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    drivers: list[NvmlDriver] = []

    def make(personality: Personality, **options: Any) -> NvmlDriver:
        driver = NvmlDriver(personality)
        driver.install(monkeypatch, **options)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.check()
        assert driver.init_count == 0, "NVML left initialised"


@pytest.fixture
def backend_on(install: Install) -> Iterator[Callable[..., tuple[NvmlBackend, NvmlDriver]]]:
    opened: list[NvmlBackend] = []

    def make(personality: Personality, **options: Any) -> tuple[NvmlBackend, NvmlDriver]:
        driver = install(personality, **options)
        backend = NvmlBackend.open(pynvml)
        opened.append(backend)
        return backend, driver

    yield make
    for backend in opened:
        backend.close()


def _cli(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, *argv: str) -> str:
    caplog.set_level(logging.WARNING)
    assert main(list(argv)) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    return out


def _doctor(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_cli(capsys, caplog, "doctor", "--json"))
    return report


def _samples(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    out = _cli(capsys, caplog, "sample", "--json", "--count", "2", "--interval", "0.1")
    return [json.loads(line) for line in out.splitlines()]


# --- every personality through the CLI ----------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(PERSONALITIES))
def test_doctor_and_sample_run_on_every_personality(key: str, install: Install, capsys: pytest.CaptureFixture[str],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    install(PERSONALITIES[key]())
    report = _doctor(capsys, caplog)
    assert report["source"]["kind"] == "nvml" and not report["fallback"]["active"]
    assert [g["state"] for g in report["gpus"]] == ["ok"]
    ticks = _samples(capsys, caplog)
    assert len(ticks) == 2
    assert all(g["state"] == "ok" for tick in ticks for g in tick["gpus"])


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_doctor_shows_what_the_capture_shows(key: str, install: Install, capsys: pytest.CaptureFixture[str],
                                             caplog: pytest.LogCaptureFixture) -> None:
    expected = EXPECTED[key]
    install(PERSONALITIES[key]())
    report = _doctor(capsys, caplog)
    assert (report["driver_version"], report["cuda_version"]) == expected["driver"]
    gpu = report["gpus"][0]
    assert {k: gpu[k] for k in expected["doctor"]} == expected["doctor"]
    assert [name for name in expected["n/a"] if gpu["metrics"][name]] == []
    assert gpu["metrics"]["temperature_c"] and gpu["metrics"]["vram_used_mib"]


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_sample_json_reads_the_capture_values(key: str, install: Install, capsys: pytest.CaptureFixture[str],
                                              caplog: pytest.LogCaptureFixture) -> None:
    expected = EXPECTED[key]["sample"]
    install(PERSONALITIES[key]())
    second = _samples(capsys, caplog)[1]["gpus"][0]
    assert {k: second[k] for k in expected} == expected


def test_sample_lists_processes_of_an_r535_driver(install: Install, capsys: pytest.CaptureFixture[str],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    personality = r535_gtx1050ti()
    personality.gpus[0].processes = [ProcessSpec(4242, 512.0), ProcessSpec(4343, 1024.0), ProcessSpec(4444, 64.0)]
    install(personality)
    first = _samples(capsys, caplog)[0]
    assert sorted((p["pid"], p["vram_mib"]) for p in first["processes"]) == [
        (4242, 512.0), (4343, 1024.0), (4444, 64.0)]


# --- the thresholds Ada/Hopper give as T.Limit offsets ---------------------------------------------------


@pytest.mark.parametrize(("personality", "thresholds_c"), [
    (ada_desktop, (86.0, 91.0)),  # nvsmi_q_RTX4090.txt: 28 C + margin 56 = limit 84; slowdown -2, shutdown -7
    (ada_laptop, (77.0, 87.0)),  # nvsmi_q_RTX4070Laptop_WSL_566.36.txt: 42 + 33 = 75; -2, -12
    (hopper_mig, (89.0, 95.0)),  # nvsmi_q_H200.txt: 28 + 59 = 87; -2, -8
])
def test_doctor_reads_tlimit_thresholds(personality: Callable[[], Personality], thresholds_c: tuple[float, float],
                                        install: Install, capsys: pytest.CaptureFixture[str],
                                        caplog: pytest.LogCaptureFixture) -> None:
    driver = install(personality())
    gpu = _doctor(capsys, caplog)["gpus"][0]
    assert (gpu["temp_slowdown_c"], gpu["temp_shutdown_c"]) == thresholds_c
    assert driver.calls["nvmlDeviceGetFieldValues"] > 0


# --- process lists when binding and driver disagree on the entry layout ---------------------------------

THREE = [ProcessSpec(4242, 512.0), ProcessSpec(4343, 1024.0, kind="graphics"), ProcessSpec(4444, 64.0, kind="both")]
THREE_SEEN = [(4242, 512.0, "compute"), (4343, 1024.0, "graphics"), (4444, 64.0, "mixed")]


def _with_processes(personality: Personality, procs: list[ProcessSpec]) -> Personality:
    personality.gpus[0].processes = procs
    return personality


def _seen(backend: NvmlBackend) -> list[tuple[int, float | None, str]]:
    return sorted((p.pid, p.vram_mib, p.kind) for p in backend.processes())


def test_the_stand_in_reproduces_the_garbled_r535_list_in_pynvml_itself(install: Install) -> None:
    """The fixture first: an R535 driver writes 32-byte entries, pynvml 13.x reads 24-byte ones.

    nvidia-ml-py 12.535 (the oldest binding declared) was built for R535: its entry is the 32-byte one
    (``c_nvmlProcessInfo_t``, no ``_v3_t`` name) and it reads the list right.
    """
    install(_with_processes(r535_gtx1050ti(), [ProcessSpec(4242, 512.0), ProcessSpec(4343, 1024.0)]))
    pynvml.nvmlInit()
    try:
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        pynvml.nvmlShutdown()
    entry = getattr(pynvml, "c_nvmlProcessInfo_v3_t", pynvml.c_nvmlProcessInfo_t)
    if ctypes.sizeof(entry) == 32:
        assert [p.pid for p in procs] == [4242, 4343]
    else:
        assert ctypes.sizeof(entry) == 24
        assert [p.pid for p in procs] == [4242, 0]  # a fake pid 0, and 4343 dropped


def test_the_stand_in_reproduces_a_32_byte_binding_on_a_24_byte_driver(install: Install) -> None:
    install(_with_processes(ada_desktop(), [ProcessSpec(4242, 512.0), ProcessSpec(4343, 1024.0)]),
            binding_process_entry_bytes=32)
    pynvml.nvmlInit()
    try:
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        pynvml.nvmlShutdown()
    pids = [p.pid for p in procs]
    assert pids[:1] == [4242] and 4343 not in pids


def test_processes_right_when_an_r535_driver_writes_32_byte_entries(backend_on: Callable[..., Any]) -> None:
    backend, _ = backend_on(_with_processes(r535_gtx1050ti(), THREE))
    assert _seen(backend) == THREE_SEEN


def test_processes_right_when_the_binding_expects_32_byte_entries(backend_on: Callable[..., Any]) -> None:
    backend, _ = backend_on(_with_processes(ada_desktop(), THREE), binding_process_entry_bytes=32)
    assert _seen(backend) == THREE_SEEN


def test_processes_right_when_both_use_32_byte_entries(backend_on: Callable[..., Any]) -> None:
    backend, _ = backend_on(_with_processes(r535_gtx1050ti(), THREE), binding_process_entry_bytes=32)
    assert _seen(backend) == THREE_SEEN


def test_processes_of_an_r470_driver_without_v3_calls(backend_on: Callable[..., Any]) -> None:
    backend, driver = backend_on(_with_processes(r470_v100(), THREE))
    assert _seen(backend) == THREE_SEEN
    assert driver.calls["nvmlDeviceGetComputeRunningProcesses_v2"] > 0


def test_processes_under_wddm_have_no_vram_figure(backend_on: Callable[..., Any]) -> None:
    """Windows (WSL included) reports NVML_VALUE_NOT_AVAILABLE for a process's memory."""
    backend, _ = backend_on(_with_processes(ada_laptop(), [ProcessSpec(77, None, kind="graphics")]))
    assert _seen(backend) == [(77, None, "graphics")]


def test_a_failing_process_query_costs_only_the_process_list(backend_on: Callable[..., Any]) -> None:
    backend, driver = backend_on(_with_processes(ada_desktop(), THREE))
    driver.fail("nvmlDeviceGetComputeRunningProcesses_v3", pynvml.NVML_ERROR_NO_PERMISSION)
    assert _seen(backend) == [(4343, 1024.0, "graphics"), (4444, 64.0, "graphics")]
    driver.lose(0)
    assert backend.processes() == []
    assert backend.sample(1.0)[0].state.value == "lost"


# --- MIG, failing sensors, wrapping counters, odd strings, bogus readings ---------------------------------


def test_mig_instances_are_listed_with_memory_and_processes(backend_on: Callable[..., Any]) -> None:
    personality = hopper_mig()
    first: MigSpec = personality.gpus[0].mig_devices[0]
    first.processes = [ProcessSpec(5151, 2048.0, gpu_instance_id=2, compute_instance_id=0)]
    backend, _ = backend_on(personality)
    instances = backend.mig_instances(0)
    assert [(m.name, m.uuid, m.vram_total_mib, m.pids) for m in instances] == [
        ("NVIDIA H200 MIG 3g.71gb", first.uuid, 71424.0, (5151,)),
        ("NVIDIA H200 MIG 4g.71gb", personality.gpus[0].mig_devices[1].uuid, 71424.0, ())]
    sample = backend.sample(1.0)[0].sample
    assert sample is not None and sample.utilization_gpu_pct is None
    assert [p.pid for p in backend.processes()] == [5151]


def test_mig_instance_processes_right_on_an_r535_driver(backend_on: Callable[..., Any]) -> None:
    """An A100/H100 in MIG mode on R535: the instance's process list has the 32-byte layout too."""
    personality = hopper_mig()
    personality.driver = r535_gtx1050ti().driver
    personality.gpus[0].mig_devices[0].processes = [
        ProcessSpec(5151, 2048.0, gpu_instance_id=2, compute_instance_id=0),
        ProcessSpec(5252, 1024.0, gpu_instance_id=2, compute_instance_id=0)]
    backend, _ = backend_on(personality)
    assert [m.pids for m in backend.mig_instances(0)] == [(5151, 5252), ()]
    assert sorted(p.pid for p in backend.processes()) == [5151, 5252]


def test_a_fan_that_answers_unknown_leaves_the_gpu_ok(backend_on: Callable[..., Any]) -> None:
    backend, driver = backend_on(with_failing_sensor(ada_desktop()))
    reading = backend.sample(1.0)[0]
    assert reading.state.value == "ok" and reading.sample is not None
    assert reading.sample.fan_pct is None and reading.sample.temperature_c == 28.0
    assert driver.calls["nvmlDeviceGetFanSpeed"] >= 1


def test_pcie_rate_is_right_across_a_32_bit_wrap(backend_on: Callable[..., Any]) -> None:
    backend, _ = backend_on(with_pcie_wrap(ada_laptop()))  # rx 500 KB/s from 100 KiB short of 2**32
    rates = []
    for t in (1.0, 2.0, 3.0):
        sample = backend.sample(t)[0].sample
        assert sample is not None
        rates.append((sample.pcie_rx_kib_s, sample.pcie_tx_kib_s))
    assert rates == [(500.0, 350.0)] * 3


def test_a_name_that_is_not_utf8_leaves_the_gpu_ok(backend_on: Callable[..., Any]) -> None:
    backend, _ = backend_on(with_name_bytes(ada_desktop()))
    reading = backend.sample(1.0)[0]
    assert reading.state.value == "ok" and reading.sample is not None and reading.sample.temperature_c == 28.0
    assert backend.devices()[0].vram_total_mib == 24564.0


def test_a_power_reading_far_above_the_max_limit_is_not_shown(backend_on: Callable[..., Any]) -> None:
    """~593,000 mW at idle on an RTX 4090 Laptop (REFERENCE.md): a bad reading, not 593 W."""
    backend, _ = backend_on(with_bogus_power(ada_laptop()))
    sample = backend.sample(1.0)[0].sample
    assert sample is not None and sample.temperature_c == 42.0
    assert sample.power_w is None


# --- the stand-in itself ------------------------------------------------------------------------------------


def test_missing_symbol_is_function_not_found_and_unmodelled_is_not_supported(install: Install) -> None:
    driver = install(r470_v100())
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetBAR1MemoryInfo(handle)
        assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == 0x1
    finally:
        pynvml.nvmlShutdown()
    assert driver.unmodelled["nvmlDeviceGetBAR1MemoryInfo"] == 1
    assert "nvmlDeviceGetCurrentClocksEventReasons" not in driver.calls


def test_field_values_carry_their_own_return_type_and_timestamp(install: Install) -> None:
    install(ada_desktop())
    pynvml.nvmlInit()
    try:
        values = pynvml.nvmlDeviceGetFieldValues(pynvml.nvmlDeviceGetHandleByIndex(0), [185, 194, 75])
    finally:
        pynvml.nvmlShutdown()
    power, slowdown, unknown = values
    assert (power.nvmlReturn, power.valueType, power.value.uiVal) == (0, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 20_000)
    assert (slowdown.valueType, slowdown.value.siVal) == (pynvml.NVML_VALUE_TYPE_SIGNED_INT, -2)
    assert unknown.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert power.timestamp == slowdown.timestamp > 0


def test_a_tick_costs_few_driver_calls(backend_on: Callable[..., Any]) -> None:
    backend, driver = backend_on(ada_desktop())
    backend.sample(100.0)  # after the open, so the slow metrics are due again: skip them
    driver.calls.clear()
    backend.sample(101.0)
    assert sum(driver.calls.values()) <= 7, dict(driver.calls)


def test_a_recording_replays_as_a_personality(install: Install, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              caplog: pytest.LogCaptureFixture) -> None:
    install(_with_processes(ada_laptop(), [ProcessSpec(77, 300.0)]))
    report, ticks = _doctor(capsys, caplog), _samples(capsys, caplog)
    replay = Personality.from_recording(report, ticks)
    NvmlDriver(replay).install(monkeypatch)
    again, again_ticks = _doctor(capsys, caplog), _samples(capsys, caplog)
    keys = ("name", "uuid", "vram_total_mib", "power_limit_w", "power_limit_range_w", "power_limit_settable",
            "metrics", "laptop")
    assert {k: again["gpus"][0][k] for k in keys} == {k: report["gpus"][0][k] for k in keys}
    assert again["driver_version"] == "566.36"
    assert again_ticks[0]["gpus"][0]["temperature_c"] == 42.0
    assert [p["pid"] for p in again_ticks[0]["processes"]] == [77]
