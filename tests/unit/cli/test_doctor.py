"""`rigscope doctor`: the fallback and its reason on a machine without a GPU, and a full report over NVML."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable

import pynvml
import pytest

from desktop.cli import doctor
from desktop.telemetry.model import GPU_METRIC_NAMES
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, ada_desktop_gpu, desktop_gpu, hopper_mig_gpu
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import Personality, ada_desktop, hopper


def _run(capsys: pytest.CaptureFixture[str], *, json_out: bool, simulate: str | None = None) -> str:
    assert doctor.main(argparse.Namespace(json=json_out, simulate=simulate)) == 0
    return capsys.readouterr().out


def test_doctor_over_nvml_reports_gpus_metrics_and_permissions(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml([FakeGpu(), desktop_gpu()])
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", gpu=1)
    fake.install(monkeypatch)
    report = json.loads(_run(capsys, json_out=True))
    assert report["source"]["kind"] == "nvml"
    assert report["driver_version"] == "565.57.01" and report["cuda_version"] == "12.7"
    assert report["nvml_library_version"] == "12.565.57.01"
    assert not report["fallback"]["active"]
    laptop, desk = report["gpus"]
    assert laptop["laptop"] and not desk["laptop"]
    assert set(laptop["metrics"]) == set(GPU_METRIC_NAMES)
    assert laptop["metrics"]["fan_pct"] is False and desk["metrics"]["fan_pct"] is True
    assert laptop["metrics"]["pcie_width"] is True and desk["metrics"]["pcie_width"] is False
    assert desk["persistence_mode"] is True and laptop["persistence_mode"] is False
    limits = {c["gpu"]: c["power_limit_change"] for c in report["permissions"]["power_limit"]}
    assert limits[0].startswith("no") and limits[1].startswith("yes")
    assert fake.init_count == 0  # doctor shut NVML down
    text = _run(capsys, json_out=False)
    assert "Supported metrics" in text and "Fan (%)" in text and "FALLBACK" not in text


def test_doctor_names_a_lost_gpu(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml(2)
    fake.lose(1)
    fake.install(monkeypatch)
    report = json.loads(_run(capsys, json_out=True))
    assert report["gpus"][1]["state"] == "lost"
    assert "GPU 1" in report["fallback"]["reason"] and "GPU is lost" in report["fallback"]["reason"]


def test_doctor_simulate_flag(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(_run(capsys, json_out=True, simulate="rtx4090,h100"))
    assert report["fallback"] == {"active": True, "uses": "simulated GPU (rtx4090, h100)",
                                  "reason": "--simulate was given"}
    assert len(report["gpus"]) == 2


def test_doctor_cli_without_gpu_shows_the_gpu_unavailable_and_why() -> None:
    # This machine has no NVIDIA driver (the test also passes where a fake is on sys.path
    # only if the real library is missing): the real program says the GPU is unavailable, with the reason,
    # and describes no simulated GPU as if it were this machine's (issue 32).
    text = subprocess.run([sys.executable, "-m", "desktop", "doctor"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    data = json.loads(subprocess.run([sys.executable, "-m", "desktop", "doctor", "--json"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout)
    if data["source"]["kind"] == "nvml":
        pytest.skip("this machine has a working NVIDIA driver")
    assert data["source"]["kind"] == "unavailable" and data["gpus"] == []
    assert data["fallback"]["active"] and data["fallback"]["reason"]
    assert "GPU UNAVAILABLE" in text and data["fallback"]["reason"] in text and "simulated GPU (" not in text
    assert "Permissions" in text


def test_doctor_shows_absolute_thresholds_headroom_and_mig(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml([ada_desktop_gpu(), hopper_mig_gpu(), desktop_gpu(temp_max_operating_c=93)])
    fake.fail("nvmlDeviceGetFanSpeed", gpu=0, error=pynvml.NVML_ERROR_UNKNOWN)
    fake.install(monkeypatch)
    ada, hopper, older = json.loads(_run(capsys, json_out=True))["gpus"]
    # nvsmi_q_RTX4090.txt: 28 C now, limit 84, slowdown 86, shutdown 91 C.
    assert (ada["temp_slowdown_c"], ada["temp_shutdown_c"], ada["temp_max_operating_c"]) == (86.0, 91.0, 84.0)
    assert ada["temp_thresholds_relative"] is True and ada["slowdown_headroom_c"] == 58.0
    assert ada["state"] == "ok" and "Unknown" in ada["metric_errors"]["fan_pct"]
    # nvsmi_q_H100SXMx8.txt: 30 C, T.Limit 57 => limit 87, slowdown 89, shutdown 95 C.
    assert (hopper["temp_slowdown_c"], hopper["temp_shutdown_c"], hopper["slowdown_headroom_c"]) == (89.0, 95.0, 59.0)
    assert hopper["mig_enabled"] is True and hopper["metrics"]["utilization_gpu_pct"] is False
    first, second = hopper["mig_instances"]
    assert first["uuid"] == "MIG-fake-0001" and first["vram_used_mib"] == 2048.0 and first["pids"] == [4242]
    assert second["vram_total_mib"] == 40960.0 and second["pids"] == []
    assert older["temp_thresholds_relative"] is False and older["temp_max_operating_c"] == 93
    assert older["slowdown_headroom_c"] == 87 - 78 and older["mig_instances"] == []
    text = _run(capsys, json_out=False)
    assert "headroom to slowdown" in text and "T.Limit" in text
    assert "MIG-fake-0001" in text and "4242" in text
    assert "ERR" in text and "Unknown Error" in text


def test_simulated_gpus_carry_the_thresholds_of_the_cards_they_model(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(_run(capsys, json_out=True, simulate="rtx4090,h100,rtx4070-laptop"))
    rtx4090, h100, laptop = report["gpus"]
    # nvsmi_q_RTX4090.txt: limit 84, slowdown 86, shutdown 91 C
    assert (rtx4090["temp_max_operating_c"], rtx4090["temp_slowdown_c"], rtx4090["temp_shutdown_c"]) == (84, 86, 91)
    # nvsmi_q_H100SXMx8.txt: limit 87, slowdown 89, shutdown 95 C
    assert (h100["temp_max_operating_c"], h100["temp_slowdown_c"], h100["temp_shutdown_c"]) == (87, 89, 95)
    assert laptop["temp_max_operating_c"] == 87 and laptop["temp_shutdown_c"] == 99
    assert all(g["temp_max_operating_c"] <= g["temp_slowdown_c"] < g["temp_shutdown_c"] for g in report["gpus"])


@pytest.mark.parametrize(("personality", "expected"), [(hopper, "measured (GPM)"), (ada_desktop, "estimate")])
def test_doctor_says_whether_effective_load_is_measured_or_estimated(
        personality: Callable[[], Personality], expected: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The driver-level stand-in: the H200 answers nvmlGpmQueryDeviceSupport, the RTX 4090 does not.
    NvmlDriver(personality()).install(monkeypatch)
    (gpu,) = json.loads(_run(capsys, json_out=True))["gpus"]
    assert gpu["effective_load"] == expected
    text = _run(capsys, json_out=False)
    (row,) = [line.strip() for line in text.splitlines() if line.strip().startswith("effective load")]
    assert row.split(None, 2)[2] == expected


def test_doctor_on_the_simulated_gpus_says_where_effective_load_comes_from(capsys: pytest.CaptureFixture[str]) -> None:
    """The simulated H100 answers GPM as a Hopper does (issue 37); the simulated RTX 4090 has no GPM."""
    report = json.loads(_run(capsys, json_out=True, simulate="h100,rtx4090"))
    assert [g["effective_load"] for g in report["gpus"]] == ["measured (GPM)", "estimate"]


# --- PyTorch: the stress test's workload (issue 26) -------------------------------------------

def _version_file(cuda: str | None) -> str:
    """torch/version.py as a wheel writes it."""
    quoted = f"'{cuda}'" if cuda else "None"
    return (f"from typing import Optional\n__version__ = '2.5.1'\ndebug = False\n"
            f"cuda: Optional[str] = {quoted}\nhip: Optional[str] = None\n")


def _torch(version: str | None, file_text: str | None) -> dict[str, object]:
    return {"version_of": lambda name: version if name == "torch" else None,
            "version_file": lambda: file_text, "python": "/venv/bin/python"}


def test_doctor_reads_the_cuda_build_and_finds_it_fits_the_driver() -> None:
    from desktop.telemetry.doctor import torch_report

    report = torch_report("12.4", nvidia_gpu=True, **_torch("2.5.1", _version_file("12.1")))  # type: ignore[arg-type]
    assert (report["version"], report["build"], report["cuda_build"]) == ("2.5.1", "cuda", True)
    assert (report["cuda_runtime"], report["driver_cuda"], report["status"]) == ("12.1", "12.4", "ok")
    assert report["problem"] is None and report["fix"] is None


def test_a_cuda_build_newer_than_the_driver_gets_the_wheel_the_driver_runs() -> None:
    from desktop.telemetry.doctor import torch_report

    report = torch_report("12.4", nvidia_gpu=True, **_torch("2.7.0", _version_file("12.8")))  # type: ignore[arg-type]
    assert report["status"] == "driver_too_old" and "12.8" in report["problem"] and "12.4" in report["problem"]
    assert report["fix"] == ("/venv/bin/python -m pip uninstall -y torch && /venv/bin/python -m pip install torch "
                             "--index-url https://download.pytorch.org/whl/cu124")
    old_driver = torch_report("11.4", nvidia_gpu=True, **_torch("2.7.0", _version_file("12.8")))  # type: ignore[arg-type]
    assert old_driver["fix"] == "update the NVIDIA driver to one for CUDA 12.8 or newer"


def test_the_cpu_build_on_a_gpu_machine_is_said_with_its_fix(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The laptop user with the CPU build learned it only when `stress --device cuda:0` failed."""
    from desktop.telemetry import doctor as doctor_data

    FakeNvml([desktop_gpu()]).install(monkeypatch)
    monkeypatch.setattr(doctor_data, "_package_version",
                        lambda name: "2.13.0+cpu" if name == "torch" else "12.565.57")
    monkeypatch.setattr(doctor_data, "_torch_version_file", lambda: _version_file(None))
    torch = json.loads(_run(capsys, json_out=True))["pytorch"]
    assert (torch["version"], torch["build"], torch["cuda_build"], torch["status"]) == (
        "2.13.0+cpu", "cpu", False, "cpu_build")
    assert torch["driver_cuda"] == "12.7" and torch["fix"].endswith("--index-url https://download.pytorch.org/whl/cu126")
    text = _run(capsys, json_out=False)
    assert "PyTorch" in text and "CPU only" in text and "PROBLEM: a CPU build of PyTorch" in text
    assert "fix: " in text and "whl/cu126" in text


def test_no_torch_and_the_version_tag_fallback() -> None:
    from desktop.telemetry.doctor import torch_build, torch_report

    missing = torch_report(None, nvidia_gpu=False, **_torch(None, None))  # type: ignore[arg-type]
    assert missing["status"] == "not_installed" and missing["fix"] == "/venv/bin/python -m pip install torch"
    assert torch_build("2.3.1+cu121", None) == ("cuda", "12.1")
    assert torch_build("2.13.0+cpu", None) == ("cpu", None)
    assert torch_build("2.3.1", None) == (None, None)
    cpu_here = torch_report(None, nvidia_gpu=False, **_torch("2.13.0+cpu", _version_file(None)))  # type: ignore[arg-type]
    assert cpu_here["status"] == "ok"  # no NVIDIA GPU: the CPU build is the right one


def test_doctor_never_imports_torch() -> None:
    code = ("import sys; from desktop.cli import main; main(['doctor', '--json', '--simulate']); "
            "sys.exit(3 if 'torch' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pytorch"]["installed"] in (True, False)
