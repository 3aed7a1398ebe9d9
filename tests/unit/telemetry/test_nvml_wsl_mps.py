"""MPS clients are listed; under WSL2 the backend says why the process list is empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.telemetry.nvml import NvmlBackend
from desktop.telemetry.nvml.backend import WSL_PROCESSES_NOTE, wsl_processes_note
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import ProcessSpec, ada_laptop, hopper


def test_mps_clients_are_listed_beside_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under MPS the compute list holds the server; its clients answer only nvmlDeviceGetMPSComputeRunningProcesses.
    personality = hopper()
    personality.gpus[0].processes = [ProcessSpec(100, 256.0, name="nvidia-cuda-mps-server"),
                                     ProcessSpec(4242, 20_000.0, kind="mps"), ProcessSpec(4343, 9_000.0, kind="mps")]
    driver = NvmlDriver(personality)
    backend = NvmlBackend.open(driver.install(monkeypatch))
    try:
        listed = {(p.pid, p.vram_mib, p.kind) for p in backend.processes()}
    finally:
        backend.close()
    assert listed == {(100, 256.0, "compute"), (4242, 20_000.0, "compute"), (4343, 9_000.0, "compute")}
    driver.check()


def test_wsl2_is_told_apart_by_its_kernel_release(tmp_path: Path) -> None:
    wsl, native, missing = tmp_path / "wsl", tmp_path / "native", tmp_path / "none"
    wsl.write_text("5.15.153.1-microsoft-standard-WSL2\n")
    native.write_text("6.8.0-45-generic\n")
    assert wsl_processes_note(wsl) == WSL_PROCESSES_NOTE
    assert wsl_processes_note(native) is None and wsl_processes_note(missing) is None


def test_the_wsl_laptop_says_why_it_lists_no_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # nvsmi_q_RTX4070Laptop_WSL_566.36.txt: "Processes: None" while anything runs (WDDM keeps them in Windows).
    osrelease = tmp_path / "osrelease"
    osrelease.write_text("5.15.167.4-microsoft-standard-WSL2\n")
    driver = NvmlDriver(ada_laptop())
    backend = NvmlBackend.open(driver.install(monkeypatch), osrelease=osrelease)
    try:
        assert backend.processes() == []
        assert backend.source.processes_note is not None and "WSL2" in backend.source.processes_note
    finally:
        backend.close()
    native = tmp_path / "native"
    native.write_text("6.8.0-45-generic\n")
    backend = NvmlBackend.open(NvmlDriver(ada_laptop()).install(monkeypatch), osrelease=native)
    try:
        assert backend.source.processes_note is None
    finally:
        backend.close()
