"""HBM temperature (field 82, nvidia-smi's "Memory Current Temp") and the memory threshold over the stand-in."""

from __future__ import annotations

import pytest

from desktop.telemetry.nvml import NvmlBackend
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import ada_desktop
from tests.fakes.personalities_counters import h200_r580_82


def test_an_h200_reading_carries_its_hbm_temperature(monkeypatch: pytest.MonkeyPatch) -> None:
    personality = h200_r580_82()
    personality.gpus[0].temp_memory_max_c = 95  # as an A100 answers it (nvsmi_q_A100SXMx4.txt)
    driver = NvmlDriver(personality)
    backend = NvmlBackend.open(driver.install(monkeypatch))
    try:
        reading = backend.sample(100.0)[0]
        assert reading.memory_temperature_c == 25.0  # nvsmi_q_H200.txt: "Memory Current Temp: 25 C"
        assert reading.info.temp_memory_max_c == 95.0
    finally:
        backend.close()
    driver.check()


def test_a_gpu_without_a_memory_sensor_reads_none(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = NvmlDriver(ada_desktop())
    backend = NvmlBackend.open(driver.install(monkeypatch))
    try:
        reading = backend.sample(100.0)[0]
        assert reading.memory_temperature_c is None and reading.info.temp_memory_max_c is None
        assert reading.sample is not None and reading.sample.power_w == 20.0  # the batch still answers
    finally:
        backend.close()


def test_sample_json_carries_hbm_temperature_and_gpm_for_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    from desktop.telemetry.live import snapshot_json
    from desktop.telemetry.sampler import Sampler

    driver = NvmlDriver(h200_r580_82())
    sampler = Sampler(NvmlBackend.open(driver.install(monkeypatch)), clock=lambda: 1_777_000_000.0)
    try:
        sampler.tick()
        gpu = snapshot_json(sampler.tick())["gpus"][0]
    finally:
        sampler.close()
    assert gpu["memory_temperature_c"] == 25.0
    assert set(gpu["gpm"]) == {"sm_active_pct", "tensor_active_pct", "dram_active_pct", "graphics_active_pct"}
