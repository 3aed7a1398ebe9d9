"""`rigscope sample`: JSON lines with every metric, the readable table, Ctrl+C and bad options."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from advisor.clock_events import SINGLE_REASONS
from desktop.cli import sample
from desktop.errors import UserError
from desktop.telemetry import loop
from desktop.telemetry.model import (
    GPU_METRIC_NAMES,
    DeviceState,
    GpuInfo,
    GpuReading,
    GpuSample,
    HostSample,
    Snapshot,
    SourceInfo,
)
from tests.fakes.fake_pynvml import FakeNvml, FakeProcess, ada_desktop_gpu, desktop_gpu


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"json": True, "detail": False, "count": 1, "interval": 0.1, "simulate": ""}
    base.update(kw)
    return argparse.Namespace(**base)


def test_sample_json_count_3_in_the_real_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "desktop", "sample", "--json", "--count", "3",
                             "--interval", "0.1"], capture_output=True, text=True, timeout=60, check=True)
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    host_fields = set(HostSample.__dataclass_fields__)
    times = []
    for line in lines:
        tick = json.loads(line)
        times.append(tick["time_s"])
        assert tick["gpus"], tick
        for gpu in tick["gpus"]:
            assert set(GPU_METRIC_NAMES) <= set(gpu), set(GPU_METRIC_NAMES) - set(gpu)
            assert gpu["state"] in ("ok", "lost", "asleep")
        assert set(tick["host"]) == host_fields
        assert isinstance(tick["processes"], list)
        if tick["source"]["kind"] == "simulated":  # no NVIDIA driver here: the reason travels along
            assert tick["source"]["fallback_reason"]
            assert gpu["fan_pct"] is None and gpu["temperature_c"] is not None
    assert times == sorted(times) and len(set(times)) == 3
    assert result.stderr == ""


def test_sample_json_over_nvml_has_nulls_for_unsupported(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeNvml([desktop_gpu(fan_pct=None, processes=[FakeProcess(999_999)])])
    fake.install(monkeypatch)
    assert sample.main(_args(simulate=None, count=2)) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["source"]["kind"] == "nvml"
    gpu = second["gpus"][0]
    assert gpu["fan_pct"] is None and gpu["power_w"] == 380.0 and gpu["temperature_c"] == 78
    assert first["processes"][0]["pid"] == 999_999 and first["processes_fresh"]
    assert fake.init_count == 0


def test_sample_prints_one_line_per_gpu_per_sample_with_units(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Like `nvidia-smi dmon`: a header (names, then units), then one line per GPU per tick; the
    reasons in a few letters; no energy counter (mJ since the driver loaded means nothing live)."""
    fake = FakeNvml([desktop_gpu(clock_event_reasons=0x4 | 0x40), desktop_gpu(uuid="GPU-b", fan_pct=None)])
    fake.install(monkeypatch)
    assert sample.main(_args(simulate=None, json=False, count=3)) == 0
    lines = capsys.readouterr().out.splitlines()
    data = [line for line in lines if not line.startswith("#")]
    assert len(data) == 6  # 2 GPUs x 3 samples, one line each
    names, units = (line for line in lines if line.startswith(("#    time", "#hh")))
    assert names.split()[1:] == ["time", "gpu", "util", "mem", "vram", "temp", "toslow", "power", "limit", "sm",
                                 "memclk", "fan", "pst", "reasons"]
    assert units.split() == ["#hh:mm:ss", "idx", "%", "%", "MiB", "°C", "°C", "W", "W", "MHz", "MHz", "%"]
    assert "mJ" not in "\n".join(lines) and "energy" not in "\n".join(lines).lower()
    first, second = data[0].split(), data[1].split()
    assert first[1] == "0" and second[1] == "1"
    assert first[-1] == "pwrcap,hwtherm"  # 0x44, decoded short
    assert first[7] == "380.0" and second[11] == "-"  # power in W; the fan the second GPU lacks: a dash
    assert lines[0].startswith("# ") and any(line.startswith("# GPU 1: ") for line in lines[:4])


def test_the_header_comes_again_each_screen() -> None:
    printer = sample.LinePrinter(screen_lines=6)  # 2 header lines + 4 data lines per screen
    snap = _snapshot(gpus=2)
    out = [line for _ in range(5) for line in printer.lines(snap)]
    data_and_headers = [line for line in out if line.startswith(("#    time", "#hh")) or not line.startswith("#")]
    headers = [i for i, line in enumerate(data_and_headers) if line.startswith("#    time")]
    assert headers == [0, 6, 12]  # every 4 data lines; 10 data lines in all
    assert len(data_and_headers) - 2 * len(headers) == 10


def _snapshot(gpus: int) -> Snapshot:
    readings = tuple(GpuReading(GpuInfo(index=i, uuid=f"u{i}", name=f"GPU {i}\x1b[31m"), DeviceState.OK,
                                GpuSample(temperature_c=60.0, clock_event_reasons=0)) for i in range(gpus))
    return Snapshot(time_s=0.0, monotonic_s=0.0, source=SourceInfo("nvml", "NVIDIA driver"), gpus=readings)


def test_every_clock_event_reason_has_a_short_form_and_a_lost_gpu_shows_its_state() -> None:
    assert set(sample.SHORT_REASONS) == set(SINGLE_REASONS)
    assert len(set(sample.SHORT_REASONS.values())) == len(SINGLE_REASONS)
    assert sample.short_reasons(0) == "-" and sample.short_reasons(None) == "-"
    lost = GpuReading(GpuInfo(index=3, uuid="u", name="x"), DeviceState.LOST, None, state_detail="GPU is lost")
    assert sample.gpu_line(0.0, lost).split()[1:] == ["3", *["-"] * 11, "LOST"]
    names = sample.LinePrinter(24).lines(_snapshot(gpus=1))
    assert "\x1b" not in "".join(names)  # a driver's name is data, shown escaped


def test_sample_detail_keeps_the_block_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert sample.main(_args(json=False, detail=True, count=2, simulate="rtx4090")) == 0
    out = capsys.readouterr().out
    assert out.count("GPU utilization") == 2
    assert " °C" in out and " W" in out and " MiB" in out and "n/a" not in out.split("Fan")[0]
    with pytest.raises(UserError):
        sample.main(_args(json=True, detail=True))


def test_ctrl_c_ends_cleanly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    def run_every(*args: Any, **kwargs: Any) -> int:  # Ctrl+C arrives during the first wait
        return loop.run_every(*args, **{**kwargs, "sleep": interrupt})

    monkeypatch.setattr(sample, "run_every", run_every)
    assert sample.main(_args(count=0)) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


@pytest.mark.parametrize("bad", [{"count": -1}, {"interval": 0.0}, {"simulate": "rtx9999"}])
def test_bad_options_are_user_errors(bad: dict[str, object]) -> None:
    with pytest.raises(UserError):
        sample.main(_args(**bad))


def test_sample_shows_the_headroom_to_slowdown_of_a_tlimit_gpu(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # nvsmi_q_RTX4090.txt: 28 C, slowdown at T.Limit -2 = 86 C absolute: 58 C of headroom.
    fake = FakeNvml([ada_desktop_gpu()])
    fake.install(monkeypatch)
    assert sample.main(_args(simulate=None, count=1)) == 0
    gpu = json.loads(capsys.readouterr().out)["gpus"][0]
    assert gpu["temp_slowdown_c"] == 86.0 and gpu["slowdown_headroom_c"] == 58.0
    assert sample.main(_args(simulate=None, count=1, json=False, detail=True)) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "to slowdown" in line)
    assert "58 °C" in row
    assert sample.main(_args(simulate=None, count=1, json=False)) == 0
    line = capsys.readouterr().out.splitlines()[-1].split()
    assert line[5:7] == ["28", "58"]  # temperature, headroom to slowdown


def test_sample_into_a_pipe_that_closes_ends_quietly_with_0() -> None:
    """`rigscope sample | head -1`: the reader goes away; no traceback, no message, exit 0."""
    proc = subprocess.Popen([sys.executable, "-m", "desktop", "sample", "--json", "--simulate", "--interval", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["gpus"]
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == ""
    proc.stderr.close()
