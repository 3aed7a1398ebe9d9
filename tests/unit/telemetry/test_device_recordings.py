"""Every `make device-check` recording replays under the driver-level NVML stand-in: doctor and sample agree.

The recordings live in tests/fixtures/real/<gpu>/ (none until a GPU machine has run
`make device-check`); a synthetic one, recorded by the same script on the simulated GPU, is
always replayed too, so the path from recording to personality to doctor is never untested.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from desktop.cli import doctor, sample
from tests.fakes.nvml_driver import NvmlDriver
from tests.fakes.personalities import Personality
from tools import device_check

REAL = sorted(p for p in device_check.REAL_FIXTURES.glob("*/doctor.json"))
# Identity, limits and thresholds doctor reports, which a replay must give back unchanged.
_SAME = ("name", "uuid", "pci_bus_id", "vram_total_mib", "laptop", "power_limit_w", "power_limit_range_w",
         "power_limit_settable", "sm_clock_max_mhz", "temp_slowdown_c", "temp_shutdown_c", "temp_max_operating_c")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthetic-recording")
    # The stress run's outcome is not this test's business (tests/unit/test_device_check.py checks it).
    assert device_check.main(["--simulate", "--out", str(out), "--sample-s", "3", "--stress-minutes", "0.02"]) in (0, 1)
    (folder,) = out.iterdir()
    assert (folder / "doctor.json").is_file() and (folder / "samples.jsonl").is_file()
    return folder


def _json_out(capsys: pytest.CaptureFixture[str], func: Any, args: argparse.Namespace) -> str:
    capsys.readouterr()
    assert func(args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("recording", ["synthetic", *REAL],
                         ids=lambda r: r if isinstance(r, str) else r.parent.name)
def test_a_recording_replays_through_doctor_and_sample(recording: str | Path, request: pytest.FixtureRequest,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = request.getfixturevalue("synthetic") if recording == "synthetic" else Path(recording).parent
    recorded = json.loads((folder / "doctor.json").read_text())
    ticks = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    driver = NvmlDriver(Personality.from_recording(recorded, ticks))
    driver.install(monkeypatch)

    report = json.loads(_json_out(capsys, doctor.main, argparse.Namespace(json=True, simulate=None)))
    assert report["source"]["kind"] == "nvml"
    assert len(report["gpus"]) == len(recorded["gpus"])
    for was, now in zip(recorded["gpus"], report["gpus"], strict=True):
        same = [k for k in _SAME if was.get(k) is not None]
        assert {k: now.get(k) for k in same} == {k: was[k] for k in same}
        assert {k: now["metrics"].get(k) for k in was["metrics"]} == was["metrics"]

    out = _json_out(capsys, sample.main, argparse.Namespace(json=True, simulate=None, interval=0.1, count=2))
    replayed = [json.loads(line) for line in out.splitlines()]
    for index, was_gpu in enumerate(recorded["gpus"]):
        seen = [t["gpus"][index] for t in ticks if t["gpus"][index]["state"] == "ok"]
        now_gpu = replayed[-1]["gpus"][index]
        assert now_gpu["state"] == "ok", now_gpu
        # n/a stays n/a and a reading stays a reading (counters answer from the second tick on).
        # Effective load is the sampler's estimate, not an NVML answer: a real GPU gets one only against its
        # own stress-run calibration, which a replay does not have (the simulated recording's GPU has its own).
        estimated = {"effective_load_pct"}
        ever = {k for g in seen for k, v in g.items() if v is not None and k in was_gpu["metrics"]} - estimated
        assert {k for k in was_gpu["metrics"] if now_gpu.get(k) is not None} - estimated == ever
        first = seen[0]
        for key in ("temperature_c", "vram_used_mib", "utilization_gpu_pct"):
            if first.get(key) is not None:
                assert now_gpu[key] == pytest.approx(first[key], abs=0.5), key
    driver.check()


def test_the_synthetic_recording_has_samples_under_load(synthetic: Path) -> None:
    load = [json.loads(line) for line in (synthetic / "samples-load.jsonl").read_text().splitlines()]
    assert load and {line["phase"] for line in load} == {"stress-gemm"}


def test_an_under_load_recording_replays_its_reason_bits_and_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    # A recording as the device check writes it on an H200 under R580.159 (modelled lines): the cap
    # for 3 s, then HW thermal for 4 s, then the cap again.
    counters = {name: True for name in ("clock_event_sw_power_cap_s", "clock_event_sw_thermal_s",
                                        "clock_event_hw_thermal_s", "clock_event_hw_power_brake_s")}
    recorded = {"driver_version": "580.159.03", "cuda_version": "13.0", "source": {"detail": "NVML"},
                "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-h200", "vram_total_mib": 143771.0,
                          "metrics": {"temperature_c": True, "power_w": True, "clock_event_reasons": True,
                                      **counters}}]}
    idle = [{"time_s": 0.0, "gpus": [{"index": 0, "state": "ok", "temperature_c": 30.0, "power_w": 80.0,
                                      "clock_event_reasons": 1, **dict.fromkeys(counters, 0.0)}]}]
    masks = [0x4] * 3 + [0x48] * 4 + [0x4] * 3
    load = [{"time_s": 100.0 + i, "phase": "stress-gemm",
             "gpus": [{"index": 0, "state": "ok", "clock_event_reasons": m,
                       "gpm": {"sm_active_pct": 96.0, "tensor_active_pct": 80.0, "dram_active_pct": 30.0}}]}
            for i, m in enumerate(masks)]
    personality = Personality.from_recording(recorded, idle, load=load)
    assert personality.gpus[0].counter_field_bits == {74: 0x4, 269: 0x20, 270: 0x40, 271: 0x80}
    from desktop.telemetry.nvml import NvmlBackend

    driver = NvmlDriver(personality)
    backend = NvmlBackend.open(driver.install(monkeypatch))
    try:
        readings = [backend.sample(1000.0 + i)[0].sample for i in range(9)]
    finally:
        backend.close()
    assert all(r is not None for r in readings)
    seen = [r.clock_event_reasons for r in readings if r is not None]
    assert 0x48 in seen and 0x4 in seen
    hw_thermal = sum((r.clock_event_hw_thermal_s or 0.0) for r in readings if r is not None)
    assert hw_thermal == pytest.approx(4.0)  # the recorded 4 s of HW thermal, counted at 270
    loaded = [r.effective_load_pct for r in readings[2:] if r is not None]
    assert loaded and all(v == pytest.approx(96.0) for v in loaded)  # GPM's SM activity under load, replayed
    driver.check()
