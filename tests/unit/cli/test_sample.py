"""`rigscope sample`: JSON lines with every metric, the readable table, Ctrl+C and bad options."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from desktop.cli import sample
from desktop.errors import UserError
from desktop.telemetry import loop
from desktop.telemetry.model import GPU_METRIC_NAMES, HostSample
from tests.fakes.fake_pynvml import FakeNvml, FakeProcess, ada_desktop_gpu, desktop_gpu


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"json": True, "count": 1, "interval": 0.1, "simulate": ""}
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


def test_sample_table_has_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert sample.main(_args(json=False, count=2, simulate="rtx4090")) == 0
    out = capsys.readouterr().out
    assert out.count("GPU utilization") == 2
    assert " °C" in out and " W" in out and " MiB" in out and "n/a" not in out.split("Fan")[0]


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
    assert sample.main(_args(simulate=None, count=1, json=False)) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "to slowdown" in line)
    assert "58 °C" in row


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
