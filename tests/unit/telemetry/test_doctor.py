"""`rigscope doctor`: the fallback and its reason on a machine without a GPU, and a full report over NVML."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from desktop.telemetry import doctor
from desktop.telemetry.model import GPU_METRIC_NAMES
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, desktop_gpu


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


def test_doctor_cli_without_gpu_shows_the_fallback_and_why() -> None:
    # This machine has no NVIDIA driver (the test also passes where a fake is on sys.path
    # only if the real library is missing): the real program must fall back, with the reason.
    text = subprocess.run([sys.executable, "-m", "desktop", "doctor"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    data = json.loads(subprocess.run([sys.executable, "-m", "desktop", "doctor", "--json"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout)
    if data["source"]["kind"] == "nvml":
        pytest.skip("this machine has a working NVIDIA driver")
    assert data["fallback"]["active"] and data["fallback"]["reason"]
    assert "FALLBACK: using the simulated GPU" in text and data["fallback"]["reason"] in text
    assert "Supported metrics" in text and "Permissions" in text
