"""`stress --device cpu` names the CPU's model, not the architecture "x86_64" (issue 26)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from desktop.stress import records
from desktop.stress.devices import GpuTarget, cpu_model_name
from desktop.stress.run_model import RunResult, StressConfig

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD Ryzen 9 7945HX with Radeon Graphics
flags\t\t: fpu vme

processor\t: 1
model name\t: AMD Ryzen 9 7945HX with Radeon Graphics
"""
PI = """processor\t: 0
BogoMIPS\t: 108.00
CPU part\t: 0xd0b

Hardware\t: BCM2835
Model\t\t: Raspberry Pi 5 Model B Rev 1.0
"""


def test_the_model_comes_from_cpuinfo(tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(X86)
    assert cpu_model_name(path, processor="x86_64") == "AMD Ryzen 9 7945HX with Radeon Graphics"
    path.write_text(PI)
    assert cpu_model_name(path, processor="") == "Raspberry Pi 5 Model B Rev 1.0"


def test_without_cpuinfo_the_architecture_is_not_taken_for_a_name(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    assert cpu_model_name(missing, processor="Intel64 Family 6 Model 183 Stepping 1, GenuineIntel") == (
        "Intel64 Family 6 Model 183 Stepping 1, GenuineIntel")  # Windows says more than the machine type
    assert cpu_model_name(missing, processor="x86_64") != "x86_64"


def test_a_cpu_run_is_stored_under_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(X86)
    monkeypatch.setattr(records, "cpu_model_name", lambda: cpu_model_name(path, processor="x86_64"))
    t = np.arange(3.0)
    result = RunResult("completed", "finished", StressConfig(target=GpuTarget("cpu")), 0.0, 3.0, "GFLOP/s", "fp32", t,
                       t, {})
    assert records.gpu_identity(result) == ("cpu", "AMD Ryzen 9 7945HX with Radeon Graphics", None)
